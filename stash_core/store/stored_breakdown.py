"""A stored run's breakdown as a result file holds it, rebuilt from its runs and stalls rows (`stash show`,
the Python API), and the remainder as one more row beside the five stalls', so that the rows add up to the
iteration time on every surface."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stash_core.analysis.coherence import DIFFERENT_WORK, IMPOSSIBLE
from stash_core.analysis.epochs import per_epoch
from stash_core.analysis.pipeline import PIPELINE_WARNING, input_pipeline
from stash_core.analysis.stalls import (
    REMAINDER,
    REMAINDER_LABEL,
    STALLS,
    remainder_of,
    stall_fault,
    with_remainder,
)
from stash_core.units import finite_float

if TYPE_CHECKING:
    import pandas as pd

REMAINDER_NOTE = "not separated: the iteration time minus the named stalls"
FIGURE_COLUMNS = ("seconds", "ci95_s", "share", "epoch_s")  # what a stall row with a faulty figure loses


def breakdown_from_stored(run: dict) -> dict | None:
    """The breakdown structure of a result file, rebuilt from the runs and stalls rows.

    The remainder ("not separated") is t2 minus the named stalls, computed again here (with_remainder) so
    that the figures add up for runs stored before it existed; its interval is the stored
    `unattributed_ci95_s` where the store has that column, else estimated.
    """
    if finite_float(run.get("iteration_s")) is None:  # none, or a damaged row's inf or NaN: nothing adds up
        return None
    per_epoch_iterations = run.get("iterations_per_epoch")
    breakdown = {
        "iteration_s": run["iteration_s"],
        "iteration_ci95_s": run.get("iteration_ci95_s"),
        "iterations_per_epoch": per_epoch_iterations,
        "epoch_s": run.get("epoch_s"),
        # the intervals of the epoch figures, derived as a result file derives them (not stored)
        "epoch_ci95_s": _epoch_interval(run.get("iteration_ci95_s"), per_epoch_iterations),
        "reference_phase": run.get("reference_phase"),
        "unattributed_s": run.get("unattributed_s"),
        "unattributed_ci95_s": run.get("unattributed_ci95_s"),
        "stalls": {
            row["stall"]: {**row, "epoch_ci95_s": _epoch_interval(row.get("ci95_s"), per_epoch_iterations)}
            for row in run.get("stalls") or []
            if row.get("stall") in STALLS
        },
        "warnings": run.get("warnings") or [],
        "network_reference": run.get("network_reference"),
        "communication": run.get("communication") or {},
    }
    stored = next((row for row in run.get("stalls") or [] if row.get("stall") == REMAINDER), None)
    if stored is not None and breakdown["unattributed_ci95_s"] is None:
        breakdown["unattributed_ci95_s"] = stored.get("ci95_s")
    for warning in breakdown["warnings"]:  # the file's flag, from the warning it came with (not stored)
        if str(warning).startswith((IMPOSSIBLE, DIFFERENT_WORK)):
            breakdown["impossible"] = str(warning).startswith(IMPOSSIBLE)
            break
    pipeline = _input_pipeline(run, breakdown["warnings"])
    if pipeline is not None:
        breakdown["input_pipeline"] = pipeline
    return with_remainder(breakdown)


def _input_pipeline(run: dict, warnings: list) -> dict | None:
    """A script's input-pipeline figure (R2 minus the last synthetic run) where its profile gave one (its
    warning says so), made again from the stored runs as the profile made it (engine/script_job.py)."""
    if not any(str(warning).startswith(PIPELINE_WARNING) for warning in warnings):
        return None
    times = {
        phase["phase"]: (phase["mean_s"], phase.get("ci95_s"))
        for phase in run.get("phases") or []
        if phase.get("status") == "completed" and finite_float(phase.get("mean_s")) is not None
    }
    found = input_pipeline(times)
    if found is None:
        return None
    seconds, ci95_s, reference = found
    return {"seconds": seconds, "ci95_s": ci95_s, "runs": f"R2 - {reference}"}


def _epoch_interval(ci95_s: Any, iterations_per_epoch: Any) -> float | None:
    return per_epoch(finite_float(ci95_s), iterations_per_epoch)


def remainder_row(run_id: str, breakdown: dict | None) -> dict[str, Any] | None:
    """The remainder ("not separated", stall `unattributed`) as a stalls row: run_id, stall, seconds, ci95_s,
    share, epoch_s, status (none, within_noise, not_separated) and note; None without an iteration time."""
    remainder = remainder_of(breakdown) if breakdown else None
    if remainder is None:
        return None
    figures = {key: remainder.get(key) for key in ("seconds", "ci95_s", "share", "epoch_s", "status")}
    return {"run_id": run_id, "stall": REMAINDER, **figures, "note": REMAINDER_NOTE, "raw_s": None}


def with_remainder_row(stalls: pd.DataFrame, run_id: str, breakdown: dict | None) -> pd.DataFrame:
    """The stalls rows of a run with its remainder row after them (remainder_row); as they are without one.
    A row whose figure is not valid (stall_fault: a 'measured' one below 0 or without a value, as a hand
    edit leaves it) keeps no figure, its note says why, as `stash show` says it: its time is in the
    remainder, so that the rows still add up to the iteration."""
    import pandas as pd

    stalls = _without_faulty_figures(stalls)
    row = remainder_row(run_id, breakdown)
    if row is None:
        return stalls
    extra = pd.DataFrame([row]).reindex(columns=stalls.columns)  # the frame's columns, of any version
    return pd.concat([stalls, extra.astype(stalls.dtypes.to_dict())], ignore_index=True)


def _without_faulty_figures(stalls: pd.DataFrame) -> pd.DataFrame:
    faults = [stall_fault(row) for row in stalls.to_dict(orient="records")]
    if not any(faults):
        return stalls
    stalls = stalls.copy()
    for index, fault in zip(stalls.index, faults, strict=True):
        if fault:
            stalls.loc[index, [c for c in FIGURE_COLUMNS if c in stalls.columns]] = float("nan")
            counted = f'its time is counted in "{REMAINDER_LABEL}"'
            stalls.loc[index, "note"] = f"{stalls.loc[index, 'stall']} {fault}; {counted}"
    return stalls
