"""Overview: the counts, latest runs and recent activity of a database."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.store import queries_breakdown
from stash_core.views.breakdown import breakdown_rows
from stash_core.views.common import NO_INSTANCE

# ---------------------------------------------------------------------------------------------------------
# Overview


def overview(db_path: Path | str, latest: int = 8, recent: int = 10) -> dict[str, Any]:
    """Everything the Overview shows, read over one connection: counts, the newest completed runs'
    breakdowns (labelled) and the newest runs of any status."""
    with store.connect(db_path, read_only=True) as con:
        row = queries_breakdown.overview_counts(con)
        newest = breakdown_rows(con, *queries_breakdown.COMPLETED_RUNS, latest)
        recent_frame = queries_breakdown.recent_runs(con, NO_INSTANCE, recent)
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
        return breakdown_rows(con, *queries_breakdown.runs_among(run_ids), len(run_ids))
