"""Which stored runs hold a breakdown that cannot be (a stall beyond the whole iteration, a run with more
workers faster than one with fewer) or whose runs did different work, so that every list of runs marks them
as their own page does (analysis/coherence.py decides; this reads what it decides on).

Plain rows, no pandas: `stash runs` starts without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stash_core.analysis.coherence import IMPOSSIBLE, impossible_of_stored
from stash_core.store.connection import connect
from stash_core.store.relations import relation_rows

IMPOSSIBLE_MARK = "impossible"  # the breakdown cannot be: a stall beyond the iteration, or the like
NOT_COMPARABLE_MARK = "not comparable"  # the runs did different work per process


def breakdown_marks(db_path: Path | str, run_ids: list[str]) -> dict[str, str]:
    """{run_id: IMPOSSIBLE_MARK or NOT_COMPARABLE_MARK} of those of `run_ids` whose breakdown is either."""
    with connect(db_path, read_only=True) as con:
        return breakdown_marks_of(con, run_ids)


def breakdown_marks_of(con: Any, run_ids: list[str]) -> dict[str, str]:
    """breakdown_marks over an open connection, in the order of `run_ids`."""
    if not run_ids:
        return {}
    among = "list_contains(CAST(? AS VARCHAR[]), run_id)"
    ids = [list(run_ids)]
    columns = "run_id, warnings, iteration_s, iteration_ci95_s"  # the noise a share beyond 100% is judged in
    runs = relation_rows(con.sql(f"SELECT {columns} FROM runs WHERE {among}", params=ids))
    stall_columns = "run_id, stall, seconds, ci95_s, share"
    stalls = relation_rows(con.sql(f"SELECT {stall_columns} FROM stalls WHERE {among}", params=ids))
    by_run: dict[str, list[dict]] = {}
    for row in stalls:  # each run's rows at once: fit reads every stored run through this
        by_run.setdefault(row["run_id"], []).append(row)
    marks = {}
    for run in runs:
        warning = impossible_of_stored(_warnings(run.get("warnings")), by_run.get(run["run_id"], []), run)
        if warning is not None:
            marks[run["run_id"]] = IMPOSSIBLE_MARK if warning.startswith(IMPOSSIBLE) else NOT_COMPARABLE_MARK
    return {run_id: marks[run_id] for run_id in dict.fromkeys(run_ids) if run_id in marks}


def _warnings(stored: Any) -> list:
    """The runs row's warnings (a JSON column: text over this connection) as a list; [] for none or
    damaged text."""
    if isinstance(stored, str):
        try:
            stored = json.loads(stored)
        except ValueError:
            return []
    return stored if isinstance(stored, list) else []
