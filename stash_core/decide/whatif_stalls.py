"""A stored run's stall figures as the what-if answers read them: which are valid, which are hidden already,
and the one line said where a question has no answer."""

from __future__ import annotations

from typing import Any

from stash_core.analysis.stalls import stall_fault
from stash_core.units import finite_float

NOISE_SHARE = 0.02  # a stall below 2% of the iteration (or its CI) counts as already hidden
DEFAULT_TARGET_SHARE = 0.05  # the network stall whatif aims for, a share of the rest of the iteration
# The smallest share asked for: below it the bandwidth asked grows past any link (1e-300 asked for 1e299
# Gbit/s), and the stall is already far below what a profile resolves
MIN_TARGET_SHARE = 0.001


def checked_figure(entry: dict[str, Any]) -> dict[str, Any]:
    """A stored stall, marked "invalid" where its figure is no valid one (an inf or NaN, a negative
    "measured"; a hand-edited or damaged row), as `stash show` and the breakdown view set it aside."""
    if stall_fault(entry) is None:  # the rule `stash show` and the store apply
        return entry
    stored = entry.get("seconds")
    note = "stored without a figure" if stored is None else f"stored as {stored!r}, not a valid figure"
    return {**entry, "status": "invalid", "note": note}


def why_not(entry: dict[str, Any], stall: str, has_phases: bool, phases: str) -> str:
    """Why a stall's question has no answer: a stall that could not be separated says why (a script without
    --data-dir runs no cached phase: its missing R3 is not the reason), else the runs missing, else its
    status (negative)."""
    status, note = entry.get("status"), entry.get("note") or ""
    if status == "not_separable":
        return f"not separable: {note}"
    if not has_phases:
        return f"not measured: the run has no {phases}"
    if status == "negative":
        return f"not answered: the {stall} stall came out {note}, so the runs measured none to hide"
    if status == "invalid":
        return f"not answered: the {stall} stall is {note}"
    return f"not measured: the run did not measure the {stall} stall"


def unanswered(status: str) -> dict[str, Any]:
    return {"status": status, "predicted_iteration_s": None, "summary": status}


def seconds_of(entry: dict | None) -> float | None:
    return finite_float(entry.get("seconds")) if entry else None


def hidden(stall_s: float, entry: dict[str, Any], reference_s: float) -> bool:
    ci = entry.get("ci95_s") or 0.0
    return stall_s <= max(ci, NOISE_SHARE * reference_s)
