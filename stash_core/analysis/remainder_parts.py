"""What a stored run's remainder ("not separated") holds, rebuilt from its stall rows: the database keeps the
stalls, not the parts the profile named (analysis/stalls.py), so `stash show` tells them again from each
row's `raw_s`: a within-noise stall's difference, and a not-separable stall's (on the last stall of a gap in
the chain that spans several, "cpu and disk")."""

from __future__ import annotations

from collections.abc import Callable

from stash_core.units import STALLS, finite_float

# A remainder smaller than this share of t2 is float rounding: there is none.
ROUNDING_SHARE = 1e-9


def parts_from_stalls(
    stalls: dict, seconds: float, stall_fault: Callable[[dict | None], str | None]
) -> list[dict]:
    """The parts of a remainder of `seconds` from stall entries, in the order the profile names them: the
    not-separable ones (a gap's stalls together, then single stalls), the within-noise ones with their
    difference, and the rest as the not-separable stalls' without one, or "other". `stall_fault` says what is
    wrong with a stall stored with a figure it cannot have (stalls.stall_fault)."""
    if seconds == 0.0:
        return []
    faults = [f"the {name} stall {fault}" for name in STALLS if (fault := stall_fault(stalls.get(name)))]
    parts, told = _not_separable_parts(stalls)
    known, unknown = sum(part["seconds"] for part in parts), []
    apart = [name for name in STALLS
             if (stalls.get(name) or {}).get("status") == "not_separable" and name not in told]  # fmt: skip
    for name in STALLS:
        entry = stalls.get(name) or {}
        raw_s = finite_float(entry.get("raw_s"))
        if entry.get("status") == "clamped_zero" and raw_s is not None:
            parts.append(_part("within_noise", name, raw_s))
            known += raw_s
        elif entry.get("status") == "clamped_zero":
            unknown.append(name)
    rest = seconds - known
    if abs(rest) > ROUNDING_SHARE * max(abs(seconds), 1e-12):
        # Stored rows keep a within-noise stall as 0 without its difference: name them together; but a rest
        # that holds a faulty stall's time is not theirs.
        what = "; ".join(faults) or ", ".join(unknown) or " and ".join(apart)
        no_r0 = (stalls.get("compute") or {}).get("status") == "not_measured"  # as the profile said it
        kind = ("unusable" if faults else "within_noise" if unknown else "not_separable" if apart
                else "no_compute_stored" if no_r0 else "other")  # fmt: skip
        parts.append(_part(kind, what, rest))
    return parts


def _not_separable_parts(stalls: dict) -> tuple[list[dict], set[str]]:
    """Not-separable stalls with their difference, and the names they tell: a run of them without one,
    closed by one that has it, is a gap the difference spans ("cpu and disk"); a gap's parts first, as the
    profile's chain names them."""
    gaps, singles, pending, told = [], [], [], set()
    for name in STALLS:
        entry = stalls.get(name) or {}
        if entry.get("status") != "not_separable":
            pending = []
            continue
        pending.append(name)
        raw_s = finite_float(entry.get("raw_s"))
        if raw_s is not None:
            part = _part("not_separable", " and ".join(pending), raw_s)
            (gaps if len(pending) > 1 else singles).append(part)
            told.update(pending)
            pending = []
    return gaps + singles, told


def _part(kind: str, what: str, seconds: float) -> dict:
    return {"kind": kind, "what": what, "seconds": seconds}
