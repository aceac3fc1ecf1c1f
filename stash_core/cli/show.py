"""`stash show`: a stored run as header lines plus the breakdown table."""

from __future__ import annotations

from stash_core.cli.probe_text import format_communication
from stash_core.cli.report import format_breakdown


def breakdown_from_stored(run: dict) -> dict | None:
    """The breakdown structure of a result file, rebuilt from the runs and stalls rows."""
    if run.get("iteration_s") is None:
        return None
    return {
        "iteration_s": run["iteration_s"],
        "iteration_ci95_s": run.get("iteration_ci95_s"),
        "iterations_per_epoch": run.get("iterations_per_epoch"),
        "epoch_s": run.get("epoch_s"),
        "unattributed_s": run.get("unattributed_s"),
        "stalls": {row["stall"]: row for row in run.get("stalls") or []},
        "warnings": run.get("warnings") or [],
        "network_reference": run.get("network_reference"),
        "communication": run.get("communication") or {},
    }


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
