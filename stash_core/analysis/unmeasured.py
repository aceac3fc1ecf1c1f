"""Why a stall was not measured, in words that read on the command line and in the dashboard alike: not
asked for, not measurable in this setup (one worker, one machine, no data to load), or its run did not
finish. A profile stores the reason as the stall's note, so that every reader of the run says it."""

from __future__ import annotations

from collections.abc import Iterable

from stash_core.analysis.stalls import PHASE_OF_STALL

_NO_DATA = (
    "no data is loaded: the inputs are made on the device, so the iteration holds no data loading; a data "
    "set or generated images measure it"
)
# A stall whose run the setup has no place for, and what would give it one.
UNMEASURABLE = {
    "interconnect": "one worker: nothing is exchanged on the machine; two workers or more measure it",
    "network": "one machine: nothing crosses a network; two machines or more measure it",
    "cpu": _NO_DATA,
    "disk": _NO_DATA,
}
# Across machines whose first holds one worker there is no run of the job's workers on one machine.
NO_REFERENCE = "the first machine holds one worker: no run on one machine to compare (R0 is the network's)"
NOT_ASKED = "not asked for"
NOT_FINISHED = "not all its runs finished: the profile ended before them"


def not_measured_reasons(requested: Iterable[str], chain: Iterable[str], nodes: int) -> dict[str, str]:
    """For each stall a profile of this chain of runs may leave unmeasured, why: {stall: reason}. A stall
    asked for whose run is in the chain can only be left out by a profile that ended first."""
    runs, asked = set(chain), set(requested)
    reasons = {}
    for stall, phase in PHASE_OF_STALL.items():
        if phase not in runs:
            reasons[stall] = NO_REFERENCE if stall == "interconnect" and nodes > 1 else UNMEASURABLE.get(
                stall, NOT_FINISHED
            )
        elif stall not in asked:
            reasons[stall] = NOT_ASKED
        else:
            reasons[stall] = NOT_FINISHED
    return reasons


def add_not_measured_notes(stalls: dict[str, dict], reasons: dict[str, str]) -> None:
    """Give each stall left not measured, without a note of its own, its reason (in place)."""
    for stall, reason in reasons.items():
        entry = stalls.get(stall)
        if entry is not None and entry.get("status") == "not_measured" and not entry.get("note"):
            entry["note"] = reason
