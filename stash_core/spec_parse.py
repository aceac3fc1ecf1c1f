"""Texts of the command line -> values of a spec: the rule of each numeric option (Number), the parsers of
stalls, iterations, hosts, rates and input shapes, and FieldError, the one-line UsageError naming the flag
that every check of a spec raises (stash_core/spec.py holds the spec and its option table)."""

from __future__ import annotations

import argparse
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError
from stash_core.terminal import invisible_character, unsafe_character
from stash_core.units import STALLS, finite_float, rate_bps, shape_parts

_STALL_ALIASES = {"cpu-prep": "cpu", "prep": "cpu", "fetch": "disk", "net": "network"}


class FieldError(UsageError):
    """A wrong value of a spec: the message names the flag; `attr` is the ProfileSpec field, `value` the
    wrong value and `rule` the check that failed where a field has several (for the dashboard's wording)."""

    def __init__(self, message: str, attr: str, value: Any = None, rule: str = "") -> None:
        super().__init__(message)
        self.attr, self.value, self.rule = attr, value, rule


INT32_MAX = 2**31 - 1  # the store's INTEGER columns
DAY_S = 86400.0


@dataclass(frozen=True)
class Number:
    """The rule of a numeric option: whole or real, and its range. Called with a command line's text it is
    argparse's `type` (so a bad value is a usage error at parse time, naming the flag); `problem` checks a
    value that came from elsewhere (a spec the dashboard built). NaN and infinities are never numbers here."""

    low: float
    high: float
    whole: bool = True
    low_open: bool = False  # `low` itself is not allowed (a positive real)
    high_open: bool = False  # nor `high` (a fraction below 1)
    what: str = ""  # how the rule reads after "must be": "a positive integer"

    def __call__(self, text: str) -> int | float:
        value = self.read(text)
        problem = self.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    def read(self, text: Any) -> int | float:
        if self.whole:
            try:
                return int(str(text).strip())
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        number = finite_float(text)
        if number is None:
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        return number

    def problem(self, value: Any) -> str | None:
        """Why `value` breaks the rule ("must be ..., got X"), or None."""
        if isinstance(value, bool) or not isinstance(value, int if self.whole else (int, float)):
            return f"must be {self.describe()}, got {value!r}"
        if not self.whole and finite_float(value) is None:
            return f"must be a finite number, got {value!r}"
        if value < self.low or (self.low_open and value == self.low):
            return f"must be {self.describe()}, got {_number_text(value)}"
        if value > self.high or (self.high_open and value == self.high):
            if self.high_open:
                return f"must be {self.describe()}, got {_number_text(value)}"
            # as _number_text writes the value: 1,000,000, not 1e+06
            return f"must be at most {_number_text(self.high)}, got {_number_text(value)}"
        return None

    def describe(self) -> str:
        if self.what:
            return self.what
        low = f"{int(self.low)}" if self.whole else f"{self.low:g}"
        kind = "an integer" if self.whole else "a number"
        return f"{kind} {'>' if self.low_open else '>='} {low}"


def _number_text(value: float) -> str:
    """A number in a message as its limit is written: 1,000,000,000,000 and 0 (not 1000000000000 and 0.0);
    a float that is not whole as Python writes it, 1e+300 included."""
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:g}" if float(f"{value:g}") == value else repr(value)


def count(high: float = INT32_MAX) -> Number:
    """A positive whole number up to `high`."""
    return Number(1, high, what="a positive integer")


def positive_real(high: float) -> Number:
    """A finite number above zero, up to `high`."""
    return Number(0, high, whole=False, low_open=True, what="positive")


positive_int = count()  # a positive integer an INTEGER column holds (other commands' counts)
BATCH_SIZE = count(2**20)
CAMPAIGN_BATCH_SIZE = 32  # a campaign's batch size per worker when none is given (command and page alike)
WORKERS = count(1024)
SEED = Number(0, INT32_MAX, what="an integer >= 0")
PORT = Number(1, 65535, what="a port number 1..65535")
MAX_ITERATIONS = 10**7
LOADER_WORKERS = Number(0, 256, what=">= 0")
TARGET_CI = Number(0, 1, whole=False, low_open=True, high_open=True,
                   what="a fraction between 0 and 1 (e.g. 0.02 for 2%)")  # fmt: skip


def parse_rate(text: str) -> str:
    """A tc-style link rate ('1gbit', '200mbit', '10mbps'), kept as typed; 8kbit .. 400gbit; or 'unlimited'
    (also 'none'), as `stash cluster up` and `set` take it."""
    if str(text).strip().lower() in ("unlimited", "none"):
        return "unlimited"
    bits_per_s = rate_bps(str(text).strip())
    if bits_per_s is None:
        raise FieldError(f"--cluster-bandwidth {text!r}: expected a rate like 1gbit or 200mbit",
                         "cluster_bandwidth", text)  # fmt: skip
    if not 8e3 <= bits_per_s <= 4e11:
        raise FieldError(f"--cluster-bandwidth {text!r}: out of range (8kbit .. 400gbit)",
                         "cluster_bandwidth", text)  # fmt: skip
    return str(text).strip()


def empty_item(text: str) -> str | None:
    """Why a comma list with an empty item ("a,,b", "a,": a name left out, or a comma too many) cannot be
    read, in the words every comma list says it; None when every item has text, or none has (its caller
    asks for at least one)."""
    parts = [part.strip() for part in text.split(",")]
    if any(parts) and not all(parts):
        return f"an empty item in {text[:200]!r}: two commas in a row, or one at an end"
    return None


def parse_stalls(text: str) -> list[str]:
    if said := empty_item(text):
        raise FieldError(f"--stalls: {said}", "stalls", text[:200], "empty item")
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    names = [_STALL_ALIASES.get(name, name) for name in names]
    check_stalls(names)
    return [stall for stall in STALLS if stall in names]


def parse_iterations(text: str) -> str:
    if text == "auto":
        return text
    if not text.isascii() or not text.isdigit() or len(text) > 9 or not 2 <= int(text) <= MAX_ITERATIONS:
        limit = f"at most {MAX_ITERATIONS:,}"
        message = f"--iterations must be 'auto' or an integer >= 2 ({limit}), got {text[:30]!r}"
        raise FieldError(message, "iterations", text)
    return str(int(text))


def parse_hosts(text: str | None) -> list[str]:
    """--hosts a,b,c -> ["a", "b", "c"] (check_fields and the launcher check each name)."""
    if not text:
        return []
    hosts = [part.strip() for part in text.split(",")]
    if any(not host for host in hosts):
        raise FieldError(f"--hosts {text!r}: an empty host name", "hosts", "")
    return hosts


def parse_input_shape(text: str) -> list[int]:
    """'3,224,224' (or '3x224x224', '(3, 224, 224)') -> [3, 224, 224]; '128' -> [128]."""
    parts = shape_parts(text)
    if not parts or not all(len(part) < 10 for part in parts):
        raise shape_error(text)
    shape = [int(part) for part in parts]
    if not shape_fits(shape):
        raise shape_error(text)
    return shape


MAX_SHAPE_DIMS = 4
MAX_SAMPLE_ELEMENTS = 2**28  # one sample of 1 GiB in float32


def shape_fits(shape: Any) -> bool:
    """Positive whole dimensions (at most MAX_SHAPE_DIMS) of a sample that memory can hold."""
    if not isinstance(shape, list | tuple) or not 0 < len(shape) <= MAX_SHAPE_DIMS:
        return False
    elements = 1
    for dim in shape:
        if not positive(dim):
            return False
        elements *= dim
    return elements <= MAX_SAMPLE_ELEMENTS


def shape_error(shape: Any) -> FieldError:
    message = (
        "--input-shape must be positive integers like 3,224,224 (image) or 128 (tokens), at most "
        f"{MAX_SHAPE_DIMS} dimensions and {MAX_SAMPLE_ELEMENTS:,} elements in all; got {shape!r}"
    )
    return FieldError(message, "input_shape", shape)


def below(value: Any, low: float, or_equal: bool = False) -> bool:
    number = finite_float(value) if isinstance(value, int | float) else None
    return number is not None and (number < low or (or_equal and number == low))


def positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_stalls(names: list[str]) -> None:
    unknown = [name for name in names if name not in STALLS]
    if unknown or not names:
        raise FieldError(
            f"--stalls: unknown stall {', '.join(unknown) or '(empty)'}; choose from {', '.join(STALLS)}",
            "stalls",
            ", ".join(unknown),
            "unknown" if unknown else "empty",
        )


MAX_NAME_CHARS = 200  # a name is shown in tables and stored; 100,000 characters are not a name


_REGION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def region(text: str) -> str:
    """argparse type of a cloud region (us-east-1, us-central1, eastus): letters, digits, '-' and '_', as
    every cloud names them; it goes into the task a campaign hands to SkyPilot."""
    if not _REGION_RE.fullmatch(text or ""):
        shown = text if len(text or "") <= 40 else f"{text[:40]}..."
        raise argparse.ArgumentTypeError(f"{shown!r} is not a region name (letters, digits, '-', '_')")
    return text


# Spaces other than the plain one (no-break, the typographic widths, ideographic): invisible as different.
_ODD_SPACE_RE = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")


def instance_name_problem(name: str) -> str | None:
    """Why `name` cannot be an instance's name, or None: `--instances` takes names comma separated, some as
    NAME:QUOTA, or all; and a name with an invisible character looks like another ("zw\u200bx" as "zwx")."""
    invisible = invisible_character(name)
    if invisible:
        return f"holds the invisible character {invisible}"
    space = _ODD_SPACE_RE.search(name)
    if space:  # shown as a space: "nb\u00a0sp" looks like "nb sp", and is another name
        return f"holds the space character U+{ord(space.group()):04X}, which looks like a plain space"
    if unicodedata.normalize("NFC", name) != name:  # "e\u0301" looks like "\u00e9", and is another name
        return "is not in Unicode's composed form (NFC): its accents are separate characters"
    if "," in name:
        return "holds a comma, which separates names in --instances"
    if ":" in name:
        return "holds a colon, which separates a name from its quota in --instances"
    if name.strip().lower() == "all":
        return "is taken: --instances all means every instance"
    return None


def instance_label(text: str) -> str:
    """argparse type of an --instance label: a name (identifier) that the catalog could hold, as a profile
    checks it (a campaign's dry run approved 'a,b', which every profile of the campaign then refused)."""
    label = identifier(text)
    problem = instance_name_problem(label)
    if problem:
        raise argparse.ArgumentTypeError(f"{label!r} {problem}")
    return label


def given_text(text: str) -> str:
    """argparse type of an option whose empty text would read as the option left out (a variable that
    expanded to nothing: --hosts '' profiled this machine alone): refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value: leave the option out for its default")
    return text


def identifier(text: str) -> str:
    """argparse type of a name (an instance, a label): non-empty, at most MAX_NAME_CHARS characters, no
    control or bidirectional characters."""
    if len(text) > MAX_NAME_CHARS:
        raise argparse.ArgumentTypeError(f"{len(text):,} characters: at most {MAX_NAME_CHARS}")
    character = unsafe_character(text)
    if character:
        raise argparse.ArgumentTypeError(f"{text!r} holds the control character {character}")
    invisible = invisible_character(text)
    if invisible:
        raise argparse.ArgumentTypeError(f"{text!r} holds the invisible character {invisible}")
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


QUOTA = count(10_000)


RUNNING = Number(0, 10_000, what="a whole number from 0")


def offers_text(text: str) -> str:
    """argparse type of --instances NAME[:QUOTA],... (`stash spot`, and plan_spot()'s offers as that text):
    names without control characters, quotas 1..10,000."""
    return _named_counts(text, "QUOTA", "the quota", QUOTA)


def running_text(text: str) -> str:
    """argparse type of spot-replan's --running NAME[:COUNT],...: as --instances, with counts from 0 (every
    instance of a type revoked)."""
    return _named_counts(text, "COUNT", "the count running", RUNNING)


def _named_counts(text: str, placeholder: str, what: str, check: Any) -> str:
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"give at least one NAME[:{placeholder}]")
    if said := empty_item(text):
        raise argparse.ArgumentTypeError(said)
    for part in parts:
        name, colon, number = part.partition(":")
        identifier(name)
        if colon:
            try:
                check(number)
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{part!r}: {what} {error}") from None
    return text


def refuse_dangling_link(script: str) -> None:
    """A --script link whose target is gone is said as the link it is: resolved, it named only the target."""
    path = Path(script)
    try:
        dangling = path.is_symlink() and not path.exists()
        target = os.readlink(path) if dangling else None
        path.resolve()
    except (RuntimeError, OSError):  # a loop, a name too long: _resolved says it
        return
    if dangling:
        message = f"--script {script}: a link to {target}, which does not exist"
        raise FieldError(message, "script", script, "missing")


def one_per_rate(rates: list[str]) -> list[str]:
    """Each link rate once, as first typed: 200mbit and 0.2gbit are one link, which a campaign's three
    labels made three bandwidths to resume and to fit."""
    by_bps: dict[Any, str] = {}
    for rate in rates:
        by_bps.setdefault(rate_bps(rate) or rate, rate)
    return list(by_bps.values())
