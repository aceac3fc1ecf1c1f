"""What a simulation writes (the result file sim-*.json, --jobs-csv, the database row), checked before it
simulates (api/scheduling.py); sched/report.py's save_simulation then writes them all or none."""

from __future__ import annotations

import os
from pathlib import Path

from stash_core.csv_outputs import check_csv_replaceable
from stash_core.errors import UsageError, write_failure
from stash_core.store.connection import check_database_path
from stash_core.terminal import clipped
from stash_core.userfiles import writable_target

JOBS_CSV_HEADER = "policy,job_id,gpus,"  # the per-job table's first columns (api/scheduling._per_job)


def check_outputs(
    out_dir: Path,
    jobs_csv: Path | None,
    database: Path,
    store: bool,
    out_given: bool = True,
    db_named_by: str = "--db",
) -> None:
    """Refuse, in one line and before any work, outputs that could not be written: --db a directory, not a
    DuckDB file, unwritable or an impossible name; --out a file; --jobs-csv a directory or in a missing
    folder."""
    try:
        database.exists()  # an impossible name (too long, ...) fails here; the trace reader reads it too
        if store:
            check_database_path(database)
    except UsageError as error:
        raise UsageError(f"{db_named_by}: {error}") from None
    except OSError as exc:
        raise UsageError(f"{db_named_by} {clipped(database)}: {exc.strerror or exc}") from None
    try:
        # the default folder, beside the database, is named as such: no --out was given to blame
        out_flag = "--out" if out_given else "the results folder beside the database (--out chooses another)"
        if out_dir.exists() and not out_dir.is_dir():
            raise UsageError(f"{out_flag} {clipped(out_dir)} is a file; give the folder of the result file")
        _check_folder(out_dir, out_flag, may_create=True)
        if jobs_csv is not None:
            if jobs_csv.is_dir():
                raise UsageError(f"--jobs-csv {clipped(jobs_csv)} is a directory; give a file name")
            _check_folder(jobs_csv.parent, "--jobs-csv", may_create=False)
            writable_target(jobs_csv, "--jobs-csv")  # a FIFO or a device is refused now, not after the work
            check_csv_replaceable(jobs_csv, "--jobs-csv", "a per-job CSV", JOBS_CSV_HEADER)
    except OSError as exc:
        raise write_failure(
            f"cannot write the results: {exc.strerror or exc} ({clipped(exc.filename)})", exc
        ) from None


def _check_folder(folder: Path, what: str, may_create: bool) -> None:
    existing = folder
    while not existing.exists() and existing != existing.parent and may_create:
        existing = existing.parent
    if not existing.exists():
        raise UsageError(f"{what}: folder {clipped(folder)} does not exist")
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: cannot write in {clipped(existing)} (not a writable folder)")
