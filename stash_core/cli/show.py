"""`stash show`: a stored run as header lines plus the breakdown table."""

from __future__ import annotations

from stash_core.analysis.stalls import REMAINDER, STALLS, with_remainder
from stash_core.cli.probe_text import format_communication
from stash_core.cli.report import format_breakdown


def breakdown_from_stored(run: dict) -> dict | None:
    """The breakdown structure of a result file, rebuilt from the runs and stalls rows.

    The remainder ("not separated") is t2 minus the named stalls, computed again here (with_remainder) so
    that the figures add up for runs stored before it existed; its interval is the stored
    `unattributed_ci95_s` where the store has that column, else estimated.
    """
    if run.get("iteration_s") is None:
        return None
    breakdown = {
        "iteration_s": run["iteration_s"],
        "iteration_ci95_s": run.get("iteration_ci95_s"),
        "iterations_per_epoch": run.get("iterations_per_epoch"),
        "epoch_s": run.get("epoch_s"),
        "reference_phase": run.get("reference_phase"),
        "unattributed_s": run.get("unattributed_s"),
        "unattributed_ci95_s": run.get("unattributed_ci95_s"),
        "stalls": {row["stall"]: row for row in run.get("stalls") or [] if row.get("stall") in STALLS},
        "warnings": run.get("warnings") or [],
        "network_reference": run.get("network_reference"),
        "communication": run.get("communication") or {},
    }
    stored = next((row for row in run.get("stalls") or [] if row.get("stall") == REMAINDER), None)
    if stored is not None and breakdown["unattributed_ci95_s"] is None:
        breakdown["unattributed_ci95_s"] = stored.get("ci95_s")
    return with_remainder(breakdown)


def format_stored_run(run: dict) -> str:
    workers = f"{run.get('workers_per_node')} worker(s) x {run.get('nodes')} node(s)"
    lines = [
        f"run {run['run_id']}  {run.get('status')}  started {run.get('started_at')}",
        f"model {run.get('model')}, batch {run.get('batch_size')} per worker, {workers}, "
        f"{run.get('device')} ({run.get('backend')}), instance {run.get('instance') or '-'}",
    ]
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    for phase in run.get("phases") or []:
        mean_s, ci_s = phase.get("mean_s"), phase.get("ci95_s")
        timing = f"{mean_s:.4f} s ± {ci_s:.4f} over {phase.get('iterations')} iterations" if mean_s else "-"
        lines.append(f"  {phase['phase']:<4}{phase.get('status', ''):<11}{timing}")
    breakdown = breakdown_from_stored(run)
    if breakdown is not None:
        lines.append(format_breakdown(breakdown, run.get("dataset_images")))
        lines.extend(format_communication(breakdown))
    return "\n".join(lines)
