"""What `stash schedule` writes (the result file sim-*.json, --jobs-csv, the database row): checked before
simulating, and written all or none (cli/sched.py)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.errors import UsageError
from stash_core.store.connection import check_database_path


def check_outputs(out_dir: Path, jobs_csv: Path | None, database: Path, store: bool) -> None:
    """Refuse, in one line and before any work, outputs that could not be written: --db a directory, not a
    DuckDB file, unwritable or an impossible name; --out a file; --jobs-csv a directory or in a missing
    folder."""
    try:
        database.exists()  # an impossible name (too long, ...) fails here; the trace reader reads it too
        if store:
            check_database_path(database)
    except UsageError as error:
        raise UsageError(f"--db: {error}") from None
    except OSError as exc:
        raise UsageError(f"--db {_short(database)}: {exc.strerror or exc}") from None
    try:
        if out_dir.exists() and not out_dir.is_dir():
            raise UsageError(f"--out {_short(out_dir)} is a file; give the folder of the result file")
        _check_folder(out_dir, "--out", may_create=True)
        if jobs_csv is not None:
            if jobs_csv.is_dir():
                raise UsageError(f"--jobs-csv {_short(jobs_csv)} is a directory; give a file name")
            _check_folder(jobs_csv.parent, "--jobs-csv", may_create=False)
    except OSError as exc:
        raise UsageError(
            f"cannot write the results: {exc.strerror or exc} ({_short(exc.filename)})"
        ) from None


def save_outputs(doc: dict[str, Any], per_job: pd.DataFrame | None, out_dir: Path, jobs_csv: Path | None,
                 database: Path | None) -> Path:  # fmt: skip
    """The result file, the per-job CSV and (when `database`) its row, all or none: the files are written
    beside their places first, the row stored, then the files moved into place. Returns the result file."""
    from stash_core.store.simulations import ingest_simulation

    created = _missing_folders(out_dir)
    staged: list[tuple[str, Path]] = []
    done = False
    try:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"{doc['simulation_id']}.json"
            staged.append((_staged(out_dir, ".sim-", lambda out: json.dump(doc, out, indent=1)), path))
            if per_job is not None and jobs_csv is not None:
                write = lambda out: per_job.to_csv(out, index=False)  # noqa: E731
                staged.append((_staged(jobs_csv.parent, ".jobs-", write), jobs_csv))
        except OSError as exc:
            raise UsageError(
                f"cannot write the results: {exc.strerror or exc} ({_short(exc.filename)})"
            ) from None
        if database is not None:
            ingest_simulation(database, doc, str(path.resolve()))
        for tmp, final in staged:
            os.replace(tmp, final)
        done = True
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        if not done:
            for folder in reversed(created):
                try:
                    folder.rmdir()
                except OSError:
                    break  # not empty or gone: leave it
    return path


def _staged(folder: Path, prefix: str, write) -> str:
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            write(out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _check_folder(folder: Path, what: str, may_create: bool) -> None:
    existing = folder
    while not existing.exists() and existing != existing.parent and may_create:
        existing = existing.parent
    if not existing.exists():
        raise UsageError(f"{what}: folder {_short(folder)} does not exist")
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: cannot write in {_short(existing)} (not a writable folder)")


def _missing_folders(folder: Path) -> list[Path]:
    """The folders mkdir(parents=True) would create, outermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))


def _write_error(exc: OSError) -> UsageError:
    return UsageError(f"cannot write the results: {exc.strerror or exc} ({_short(exc.filename)})")


def _short(path: object) -> str:
    text = str(path)
    return text if len(text) <= 80 else f"{text[:40]}...{text[-30:]} ({len(text)} characters)"
