"""Units and names every layer shares: stall names, sizes, rates, durations, number coercion."""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from typing import Any

from stash_core.errors import UsageError
from stash_core.terminal import without_surrogates

# The five stalls in the order the differential runs add them.
STALLS = ("compute", "interconnect", "network", "cpu", "disk")
# What a measured stall whose interval is wider than its value says of itself (stalls.note, the pages' bars).
UNRESOLVED_NOTE = "not resolved: its 95% interval is wider than its value"

KIB = 1024
MIB = 1024 * 1024
GIB = 1024 * 1024 * 1024


# ---------------------------------------------------------------- shapes

_SHAPE_SEPARATOR = r"\s*[,x]\s*|\s+"


def shape_parts(text: str) -> list[str] | None:
    """The numbers of a sample shape written '3,224,224', '3x224x224', '(3, 224, 224)' or '128'; None when
    any part is not a number or two separators meet ('3,x' and '3,,16' are not shortened to fit)."""
    body = str(text).strip().strip("()[]").strip()
    if not re.fullmatch(rf"\d+(?:(?:{_SHAPE_SEPARATOR})\d+)*", body, flags=re.ASCII):
        return None
    return re.split(_SHAPE_SEPARATOR, body)


# ---------------------------------------------------------------- sizes, rates and durations

_NUMBER_AND_UNIT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
SIZE_UNITS_BYTES = {
    "": 1, "b": 1, "k": 1000, "kb": 1000, "kib": KIB, "m": 10**6, "mb": 10**6, "mib": MIB,
    "g": 10**9, "gb": 10**9, "gib": GIB, "t": 10**12, "tb": 10**12, "tib": 2**40,
}  # fmt: skip
# tc's units: *bit are bits per second, *bps are BYTES per second (SI prefixes).
RATE_UNITS_BPS = {
    "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}  # fmt: skip
DURATION_UNITS_S = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0}


def number_and_unit(text: object) -> tuple[float, str] | None:
    """'200mbit' -> (200.0, 'mbit'); '4' -> (4.0, ''); None when the text is not a number and a unit."""
    match = _NUMBER_AND_UNIT_RE.match(text) if isinstance(text, str) else None
    return (float(match.group(1)), match.group(2).lower()) if match else None


def parse_size_bytes(text: str, what: str = "size") -> int:
    """'4KiB' -> 4096, '256MiB', '1GB' -> 10^9, '4096' -> 4096 bytes (a fraction of a byte rounded down);
    UsageError naming `what` otherwise, and for less than one byte (a size of 0 B would be measured, or
    multiplied forever into the next size)."""
    parsed = number_and_unit(text.replace(" ", "") if isinstance(text, str) else text)
    if parsed is None or parsed[1] not in SIZE_UNITS_BYTES or parsed[0] <= 0:
        raise UsageError(f"invalid {what} {text!r}: expected e.g. 4KiB, 256MiB or 1GB")
    size_bytes = int(parsed[0] * SIZE_UNITS_BYTES[parsed[1]])
    if size_bytes < 1:
        raise UsageError(f"invalid {what} {text!r}: less than one byte; expected e.g. 4KiB, 256MiB or 1GB")
    return size_bytes


def rate_bps(text: object, bare_unit: str | None = None) -> float | None:
    """A tc-style rate ('1gbit', '200mbit', '10mbps' = 10 MB/s) in bits per second; None when it is not one.
    bare_unit: the unit of a bare number ('gbit' where a plain 25 means 25 Gbit/s); None refuses it."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = f"{text}{bare_unit or ''}" if math.isfinite(text) else ""
    parsed = number_and_unit(text)
    if parsed is None:
        return None
    value, unit = parsed
    unit = unit or (bare_unit or "")
    if unit not in RATE_UNITS_BPS or value <= 0:
        return None
    return value * RATE_UNITS_BPS[unit]


def parse_duration_s(text: str, what: str = "duration") -> float:
    """'1ms' -> 0.001, '250us', '2s'; a bare '0' is 0; UsageError naming `what` otherwise."""
    parsed = number_and_unit(text)
    if parsed is not None and parsed[1] == "" and parsed[0] == 0:
        return 0.0
    if parsed is None or parsed[1] not in DURATION_UNITS_S:
        raise UsageError(f"invalid {what} {text!r}: expected e.g. 250us, 1ms or 2s")
    return parsed[0] * DURATION_UNITS_S[parsed[1]]


# ---------------------------------------------------------------- number coercion


def decimals_for(value: float, significant: int) -> int:
    """The decimals that show `significant` figures of `value` (none for values of that many digits)."""
    if not value or not math.isfinite(value):
        return significant - 1
    return max(0, significant - 1 - math.floor(math.log10(abs(value))))


def finite_float(value: object) -> float | None:
    """`value` as a finite float; None for None, NaN, +-inf, bools and anything that is not a number.

    Numbers are Python and numpy ints and floats and Decimals; text that reads as a number ("2.5", " 1e3 ")
    counts as one, as typed on a command line. pandas' NA, NaT, dates and other objects are None. The one
    coercion of numbers from DataFrames, the database, JSON and arguments: checked parses that need an error
    message are built on it.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal, str)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def relative_ci95(row: Any) -> float | None:
    """A measured step's 95% half-width over the step (a row's iteration_ci95_s / iteration_s, either a runs,
    stall_breakdown or option row); None where either is unknown or the step is 0."""
    ci95_s, step_s = finite_float(row.get("iteration_ci95_s")), finite_float(row.get("iteration_s"))
    return None if ci95_s is None or not step_s else abs(ci95_s / step_s)


def json_safe(value: Any) -> Any:
    """Copy of `value` with NaN and infinities replaced by None (JSON has no such numbers), and text that is
    no UTF-8 (a file name's bytes) written out (terminal.without_surrogates): the one way a result file, a
    protocol line and a stored JSON column drop them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return without_surrogates(value)
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def duration_words(seconds: float | None, within_s: float | None = None) -> str:
    """A duration in the unit that reads best: '42 s', '3.5 min', '1.3 h', '2.1 d'; '-' when unknown. Given
    `within_s` (a budget the duration meets), more decimals where rounding would show it over: 15.97 h within
    15.98 h is '15.97 h', not '16.0 h'."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0)):
        if seconds >= size or unit == "s":
            value = seconds / size
            decimals = 0 if value >= 100 or (unit == "s" and value >= 1) else 2 if unit == "s" else 1
            meets = within_s is not None and seconds <= within_s
            while meets and decimals < 6 and round(value, decimals) * size > within_s:
                decimals += 1
            return f"{value:,.{decimals}f} {unit}"
    raise AssertionError("unreachable: the loop ends at seconds")


def share_at_an_end(share: float) -> str | None:
    """How a share that a percentage with one decimal would show as 0.0% or 100.0% while it is not is said:
    '<0.1%' (or '>-0.1%'), '>99.9%' (or '<100.1%'); None for any other share."""
    if 0 < abs(share) < 0.0005:
        return "<0.1%" if share > 0 else ">-0.1%"
    if 0 < abs(1 - share) < 0.0005:
        return ">99.9%" if share < 1 else "<100.1%"
    return None


def usd_words(usd: float | None) -> str:
    """A cost in dollars: '$1,234.50', '$0.0520', '$0.0000130' (three significant digits below a dollar, so
    that a small cost never reads '$0.00'); '-' when unknown."""
    if usd is None or not math.isfinite(usd):
        return "-"
    if usd == 0 or abs(usd) >= 1:
        return f"${usd:,.2f}"
    decimals = min(12, max(2, 2 - math.floor(math.log10(abs(usd)))))
    return f"${usd:,.{decimals}f}"


def usd_limit_words(usd: float | None) -> str:
    """A cost the user gave (a limit): as usd_words without the zeros it did not give ('$0.01', not
    '$0.0100', which reads as a figure to three digits)."""
    text = usd_words(usd)
    whole, _, cents = text.partition(".")
    return text if len(cents) <= 2 else f"{whole}.{cents.rstrip('0').ljust(2, '0')}"


def usd_words_apart(first: float, second: float) -> tuple[str, str]:
    """Two costs said side by side ("costs X against Y"): as usd_words, with more decimals where that would
    print two different costs alike ('$0.1791' against '$0.1794', not '$0.179' twice)."""
    texts = (usd_words(first), usd_words(second))
    if first == second or texts[0] != texts[1] or not (math.isfinite(first) and math.isfinite(second)):
        return texts
    digits = max(2, 2 - math.floor(math.log10(max(abs(first), abs(second), 1e-12))))
    while digits < 12 and f"{first:,.{digits}f}" == f"{second:,.{digits}f}":
        digits += 1
    return f"${first:,.{digits}f}", f"${second:,.{digits}f}"


def format_time(seconds: float | None) -> str:
    """A stall or probe time as the command line prints it: '181.0 ms', '31 us', '1.25 s'; '-' if unknown."""
    if seconds is None:
        return "-"
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if abs(seconds) < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def size_words(size_bytes: float) -> str:
    """A size in the binary unit that reads best, three significant figures: '938 KiB', '1.25 GiB'."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.3g} {unit}"
    return f"{size_bytes:.0f} B"


def seconds_short(seconds: float, spread_s: float | None = None) -> str:
    """0.2051 -> '205 ms'; 12.5 -> '12.5 s'; with '± spread' when given. A figure smaller than its spread
    takes the spread's unit and decimals: '0 ms ± 997 ms', not '0 µs ± 997 ms'."""
    if spread_s is None:
        return _seconds_short(seconds)
    spread_text = _seconds_short(spread_s)
    if abs(seconds) >= abs(spread_s):
        return f"{_seconds_short(seconds)} ± {spread_text}"
    amount, unit = spread_text.split(" ")
    decimals = len(amount.partition(".")[2])
    unit_s = {"µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}[unit]
    in_unit = round(seconds / unit_s, decimals) + 0.0  # + 0.0: no "-0 ms"
    return f"{in_unit:.{decimals}f} {unit} ± {spread_text}"


def _seconds_short(seconds: float) -> str:
    # a unit is taken where the figure, rounded, stays under 1000 of it: 0.9996 s is "1 s", not "1e+03 ms"
    if round(abs(seconds) * 1e6) < 1000:
        return f"{seconds * 1e6:.0f} µs"
    if float(f"{abs(seconds) * 1e3:.3g}") < 1000:
        return f"{seconds * 1e3:.3g} ms"
    if abs(seconds) < 120:
        return f"{seconds:.3g} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
