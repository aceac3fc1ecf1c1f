"""Why a stall was not measured, in words a user can act on: not asked for, or not measurable in this setup
(one worker, one machine, no data to load). A profile stores the reason as the stall's note, so that every
reader of the run (the command's table, the database, the dashboard) says it."""

from __future__ import annotations

from collections.abc import Iterable

from stash_core.analysis.stalls import PHASE_OF_STALL, applicable_chain

_NO_DATA = (
    "no data is loaded: the inputs are made on the device, so the iteration holds no data loading; "
    "--dataset DIR or --synthetic-images N times it"
)
# A stall whose run this setup has no place for, and what would give it one.
UNMEASURABLE = {
    "interconnect": "one worker: nothing is exchanged on the machine; --workers 2 or more measures it",
    "network": "one machine: nothing crosses a network; --nodes 2 or more, with --hosts or --cluster "
    "emulated, measures it",
    "cpu": _NO_DATA,
    "disk": _NO_DATA,
}
NOT_ASKED = "not asked for by --stalls"


def not_measured_reasons(
    requested: Iterable[str], workers_total: int, nodes: int, real_data: bool
) -> dict[str, str]:
    """For each stall a profile of this setup does not measure, why: {stall: reason}."""
    chain = applicable_chain(workers_total, nodes, real_data)
    asked = set(requested)
    reasons = {}
    for stall, phase in PHASE_OF_STALL.items():
        if phase not in chain:
            reasons[stall] = UNMEASURABLE.get(stall, NOT_ASKED)
        elif stall not in asked:
            reasons[stall] = NOT_ASKED
    return reasons


def add_not_measured_notes(stalls: dict[str, dict], reasons: dict[str, str]) -> None:
    """Give each stall left not measured, without a note of its own, its reason (in place)."""
    for stall, reason in reasons.items():
        entry = stalls.get(stall)
        if entry is not None and entry.get("status") == "not_measured" and not entry.get("note"):
            entry["note"] = reason
