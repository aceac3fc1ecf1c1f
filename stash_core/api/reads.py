"""`stash_core.runs()`, `breakdown()` and `load_result()`: stored runs and result files as DataFrames and
Results (what `stash runs`, `stash show` and `stash ingest` read)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stash_core.api.options import api_options, checked, database
from stash_core.api.results import Result
from stash_core.errors import UsageError, no_run_error
from stash_core.pathargs import required_path
from stash_core.spec_parse import count

MAX_LIMIT = 10**6  # as `stash runs --limit`

if TYPE_CHECKING:
    import pandas as pd


@api_options("runs")
def runs(db: Path | str | None = None, limit: int | None = None) -> pd.DataFrame:
    """Every stored run with its stall breakdown, newest first (the stall_breakdown view, docs/schema.md).

    Args:
        db: the database (default $STASH_DB, else ./results.duckdb).
        limit: at most this many runs, the newest (as `stash runs --limit`); default every run.

    Returns:
        pandas.DataFrame: one row per run: run_id, started_at, status, model, batch_size, workers_per_node,
        instance, iteration_s, and per stall its seconds, interval and share (compute_s, compute_ci95_s,
        compute_share, ...); `figures` is "impossible" or "not comparable" for a breakdown that is not to be
        read as stalls (its runs disagree beyond the noise, or did different work per process: `stash
        show` says why), else None, as `stash runs` marks it.

    Raises:
        UsageError: `db` is not a Stash database (missing, another program's, too new), or `limit` is not
            a whole number from 1 to 1,000,000.
    """
    import pandas as pd

    from stash_core import store
    from stash_core.store.impossible_runs import breakdown_marks

    most = checked("limit", limit, count(MAX_LIMIT))
    path = _existing(database(db))
    frame = store.list_runs(path, limit=most)
    marks = breakdown_marks(path, list(frame["run_id"]))
    # object, not pandas' text dtype: an unmarked run's None stays None, as `stash runs --format json` has it
    figures = pd.Series([marks.get(run_id) for run_id in frame["run_id"]], index=frame.index, dtype=object)
    return frame.assign(figures=figures)


@api_options("breakdown")
def breakdown(run_id: str, db: Path | str | None = None) -> pd.DataFrame:
    """The stall breakdown of one stored run, one row per stall (the stalls table, docs/schema.md).

    Args:
        run_id: the run id, or any unique part of it (the short suffix the pages show).
        db: the database (default $STASH_DB, else ./results.duckdb).

    Returns:
        pandas.DataFrame: run_id, stall, seconds, ci95_s, share, epoch_s, status, note, raw_s, resolved
        (its 95% interval no wider than its value, as runs()' <stall>_resolved), in the order
        compute, interconnect, network, cpu, disk, then the remainder (stall `unattributed`, `stash show`'s
        "not separated"), so that the seconds add up to the iteration time; the same rows
        `Result.to_frame()` gives.

    Raises:
        UsageError: no stored run matches `run_id`, or several do.
    """
    from stash_core import store
    from stash_core.api.results import with_resolved
    from stash_core.store.stored_breakdown import breakdown_from_stored, with_remainder_row

    if not isinstance(run_id, str) or not run_id.strip():
        raise UsageError(f"run_id: expected a run id, got {run_id!r}")
    db_path = _existing(database(db))
    frame = store.stalls_frame(db_path, run_id)
    if frame is None:
        raise no_run_error(run_id, db_path)
    run = store.get_run(db_path, run_id)
    return with_resolved(with_remainder_row(frame, run["run_id"], breakdown_from_stored(run)))


@api_options("load_result")
def load_result(path: Path | str) -> Result:
    """Read one result file (migrated to the current version and checked, as `stash ingest` reads it).

    Args:
        path: a result file a profile wrote (results/RUN_ID.json).

    Returns:
        Result: its run id, status, iteration time and document; `result_file` is `path`, `db` None.

    Raises:
        UsageError: the file is missing, unreadable, not a Stash result, too new or incomplete.
    """
    from stash_core.results.file import load_result as load_document
    from stash_core.store.ingest_rows import prepare_run

    path = required_path("path", path)
    doc = load_document(path)
    try:
        prepare_run(doc, str(path))  # every value checked as ingest checks it; nothing is stored
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return Result.from_document(doc, result_file=path)


def _existing(db_path: Path) -> Path:
    """A database to read must exist: reading would otherwise create an empty one."""
    if not db_path.exists():
        raise UsageError(f"no database at {db_path}: profile into it first (db={str(db_path)!r})")
    return db_path
