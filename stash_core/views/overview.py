"""Overview: the counts, latest runs and recent activity of a database."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.views.breakdown import breakdown_rows
from stash_core.views.common import NO_INSTANCE

# ---------------------------------------------------------------------------------------------------------
# Overview


def overview(db_path: Path | str, latest: int = 8, recent: int = 10) -> dict[str, Any]:
    """Everything the Overview shows, read over one connection: counts, the newest completed runs'
    breakdowns (labelled) and the newest runs of any status."""
    with store.connect(db_path, read_only=True) as con:
        row = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'completed'), count(DISTINCT model), "
            "count(DISTINCT coalesce(instance, hostname)), CAST(max(started_at) AS TIMESTAMP), "
            "(SELECT count(*) FROM iterations) FROM runs"
        ).fetchone()
        newest = breakdown_rows(con, "status = 'completed'", [], latest)
        recent_frame = store.relation_frame(
            con.sql(
                "SELECT run_id, started_at, status, model, batch_size, workers_per_node, nodes, "
                "coalesce(instance, ?) AS instance, device, iteration_s, epoch_s, error FROM runs "
                "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT ?",
                params=[NO_INSTANCE, int(recent)],
            )
        )
    runs, completed, models, instances, last_run, iterations = row
    return {
        "db_path": str(db_path),
        "runs": int(runs),
        "completed_runs": int(completed),
        "models": int(models),
        "instances": int(instances),
        "iterations": int(iterations),
        "last_run_at": None if last_run is None else last_run.replace(tzinfo=UTC),
        "latest": newest,
        "recent": recent_frame,
    }


def run_breakdowns(db_path: Path | str, run_ids: list[str]) -> pd.DataFrame:
    """stall_breakdown rows of the given runs, with labels."""
    with store.connect(db_path, read_only=True) as con:
        return breakdown_rows(
            con, "list_contains(CAST(? AS VARCHAR[]), run_id)", [list(run_ids)], len(run_ids)
        )
