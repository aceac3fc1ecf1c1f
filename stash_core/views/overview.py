"""Overview: the counts, latest runs and recent activity of a database."""

from __future__ import annotations

import shutil
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.pathargs import DEFAULT_DB_NAME
from stash_core.store import queries_breakdown
from stash_core.store.impossible_runs import breakdown_marks_of
from stash_core.store.partial_time import partial_notes_of
from stash_core.terminal import shell_word
from stash_core.views.breakdown import breakdown_rows
from stash_core.views.common import NO_INSTANCE

# ---------------------------------------------------------------------------------------------------------
# Overview


def stash_command() -> str:
    """How a terminal on this machine calls `stash`: `stash` when the one on PATH is this environment's,
    else the path of this environment's, else `python -m stash_core` with this Python."""
    here = Path(sys.executable).parent / "stash"
    on_path = shutil.which("stash")
    if here.is_file() and on_path and Path(on_path).resolve() == here.resolve():
        return "stash"
    if here.is_file():
        return shell_word(str(here))
    return f"{shell_word(sys.executable)} -m stash_core"


def terminal_commands(db_path: Path | str) -> str:
    """The Overview's terminal block: commands that work as shown (each path quoted for the shell), on this
    database."""
    stash = stash_command()
    default = Path(db_path).resolve() == Path(DEFAULT_DB_NAME).resolve()
    db = "" if default else f" --db {shell_word(str(db_path))}"
    return (
        f"{stash} profile --model resnet10 --batch-size 16 --input-shape 3,32,32 --workers 2 \\\n"
        f"    --synthetic-images 256 --image-px 64 --target-ci 0.1 --max-phase-seconds 40{db}\n"
        "# result files copied from other machines, stored in this database:\n"  # on its own line: the
        f"{stash} ingest{db} results/*.json"  # commands are long, and the comment was cut at 1400 px
    )


def overview(db_path: Path | str, latest: int = 8, recent: int = 10) -> dict[str, Any]:
    """Everything the Overview shows, read over one connection: counts, the newest completed runs'
    breakdowns (labelled) and the newest runs of any status ("time_of": what the times of one that did not
    complete are, "" for the others)."""
    with store.connect(db_path, read_only=True) as con:
        row = queries_breakdown.overview_counts(con)
        newest = breakdown_rows(con, *queries_breakdown.COMPLETED_RUNS, latest)
        recent_frame = queries_breakdown.recent_runs(con, NO_INSTANCE, recent)
        partial = partial_notes_of(con, recent_frame["run_id"].tolist())
        marks = breakdown_marks_of(con, recent_frame["run_id"].tolist())
    # a run that did not complete: its times are one phase's (R0: one worker), as `stash runs` marks them
    notes = [partial.get(run_id, "") for run_id in recent_frame["run_id"]]
    recent_frame.insert(recent_frame.columns.get_loc("epoch_s") + 1, "time_of", notes)
    recent_frame["label"] = label_marks(db_path, recent_frame["run_id"].tolist())
    recent_frame["figures"] = [marks.get(run_id, "") for run_id in recent_frame["run_id"]]
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


def label_marks(db_path: Path | str, run_ids: list[str]) -> list[str]:
    """Per run, "contradicted" where its machine contradicts its instance label (Compare, predict and
    recommend set it aside until confirmed; its own page says why), else ""."""
    from stash_core.catalog.labels import stored_label_checks

    checks = stored_label_checks(db_path, run_ids)
    contradicted = {run for run, check in checks.items() if check.status == "contradicted"}
    return ["contradicted" if run in contradicted else "" for run in run_ids]


def run_breakdowns(db_path: Path | str, run_ids: list[str]) -> pd.DataFrame:
    """stall_breakdown rows of the given runs, with labels."""
    with store.connect(db_path, read_only=True) as con:
        return breakdown_rows(con, *queries_breakdown.runs_among(run_ids), len(run_ids))
