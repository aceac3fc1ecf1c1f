"""What the iteration time of a run that did not complete is: a failed or interrupted profile keeps the
breakdown of the phases that completed, so its `iteration_s` is the time of the last of them (its
`reference_phase`, R0 being one worker on synthetic data), not the time of the job profiled. `stash runs`,
`stash show` and the Overview's table of recent runs say so in the same words (partial_note).

Plain rows, no pandas: `stash runs` and `stash show` start without it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb

from stash_core.analysis.stalls import applicable_chain, phases_for_stalls
from stash_core.store.connection import connect
from stash_core.store.relations import relation_rows

_STOPPED = ("failed", "interrupted")  # a phase's status where the profile ended
_FAILED_RUN = re.compile(r"run (R\w+) \(")  # a profile's error: "run R1n (2 workers over ...) failed: ..."
JOB_PHASE = "R2"  # all workers on the job's own data: the time of the job profiled, where it reads data


def job_phase(run: dict[str, Any]) -> str:
    """The run whose time is the job's as set up: the last of those its stalls needed (R2 with real data;
    without, R1n across machines, R1 on one, R0 for one worker or compute alone); R2 where the stored spec
    does not say."""
    spec = run.get("spec")
    try:
        spec = json.loads(spec) if isinstance(spec, str) else spec
        workers, nodes = int(spec["workers_per_node"]), int(spec["nodes"])
        real = any(spec.get(key) is not None for key in ("dataset", "synthetic_images", "script"))
        needed = phases_for_stalls(list(spec["stalls"]), applicable_chain(workers * nodes, nodes, real))
    except (TypeError, KeyError, ValueError, AttributeError):
        return JOB_PHASE
    return needed[-1] if needed else JOB_PHASE


def partial_note(run: dict[str, Any], phases: list[dict[str, Any]]) -> str | None:
    """e.g. "failed in R1; its time is R0's (1 worker, synthetic data on the device), the last phase that
    completed", for a run (its runs row: status, iteration_s, reference_phase) that did not complete but holds
    an iteration time other than R2's (the job's own); None for any other. `phases`: its phases rows in the
    order they ran."""
    reference = run.get("reference_phase") or "unknown"
    if run.get("status") == "completed" or run.get("iteration_s") is None or reference == job_phase(run):
        return None  # the job's time as set up (R2's, or R1n's without real data), whichever run stopped
    described = {phase.get("phase"): phase.get("description") for phase in phases}
    stopped = next((phase.get("phase") for phase in phases if phase.get("status") in _STOPPED), None)
    # a run whose later launch failed keeps its earlier ones, completed: its error names it
    stopped = stopped or (match[1] if (match := _FAILED_RUN.match(str(run.get("error") or ""))) else None)
    ended = f"{run.get('status') or 'not completed'}{f' in {stopped}' if stopped else ''}"
    what = f" ({described[reference]})" if described.get(reference) else ""
    return f"{ended}; its time is {reference}'s{what}, the last phase that completed"


def partial_notes(db_path: Path | str, run_ids: list[str]) -> dict[str, str]:
    """{run_id: partial_note} of those of `run_ids` that did not complete but hold an iteration time."""
    with connect(db_path, read_only=True) as con:
        return partial_notes_of(con, run_ids)


def partial_notes_of(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, str]:
    """partial_notes over an open connection, in the order of `run_ids`."""
    among = "list_contains(CAST(? AS VARCHAR[]), run_id)"
    runs = relation_rows(
        con.sql(
            "SELECT run_id, status, iteration_s, reference_phase, spec, error FROM runs "
            f"WHERE status <> 'completed' AND iteration_s IS NOT NULL AND {among}",
            params=[list(run_ids)],
        )
    )
    if not runs:
        return {}
    phases = relation_rows(
        con.sql(
            f"SELECT run_id, phase, status, description FROM phases WHERE {among} "
            "ORDER BY run_id, phase_index, phase",
            params=[[run["run_id"] for run in runs]],
        )
    )
    notes = {
        run["run_id"]: partial_note(run, [phase for phase in phases if phase["run_id"] == run["run_id"]])
        for run in runs
    }
    # in the order asked for (the table's rows): the query's own order is none
    return {run_id: notes[run_id] for run_id in dict.fromkeys(run_ids) if notes.get(run_id) is not None}
