"""The SQL console's files: the snapshot a query reads, and the temporary folders of callers that died.

A console query may run for minutes; DuckDB lets no process write a file while another has it open, so a
query on the database itself would lock out every `stash ingest` and `stash instances set` for that long.
Each query therefore reads a snapshot: the database file (and its WAL) copied while a read-only connection
holds off writers for the time of the copy only.

A caller killed with SIGKILL cannot remove its `stash-console-*` folder (the snapshot is in it); the next
query removes the folders whose owner process has ended. `stash export` marks and removes its staging
folders (`.stash-export-*` in the export's folder) the same way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil

from stash_core.errors import UsageError
from stash_core.store.connection import connect

FOLDER_PREFIX = "stash-console-"
OWNER_FILE = "owner"
# A folder without an owner file (its owner died before writing it) is left alone this long.
ORPHAN_AGE_S = 600.0


def new_console_folder() -> tempfile.TemporaryDirectory:
    """A temporary folder for one query, marked with this process (pid and start time) as its owner."""
    remove_stale_folders()
    folder = tempfile.TemporaryDirectory(prefix=FOLDER_PREFIX)
    try:
        mark_owner(Path(folder.name))
    except OSError as exc:
        folder.cleanup()
        raise UsageError(f"cannot prepare the console's folder: {exc.strerror or exc}") from None
    return folder


def snapshot_database(db_path: Path | str, folder: Path) -> Path:
    """A copy of the database (and its WAL) in `folder` for a query to read; the path itself when there is
    no database file yet (the query then reads an empty schema)."""
    source = Path(db_path)
    if not source.is_file():
        return source
    copy = folder / "snapshot.duckdb"
    wal = source.with_name(source.name + ".wal")
    try:
        # While this read-only connection is open no writer can change the file or its WAL.
        with connect(source, read_only=True):
            shutil.copyfile(source, copy)
            if wal.is_file():
                shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
    except OSError as exc:
        raise UsageError(
            f"cannot take a snapshot of {source} for the console: {exc.strerror or exc}"
        ) from None
    return copy


def mark_owner(folder: Path) -> None:
    """Mark `folder` as this process's (pid and start time): remove_stale_folders leaves it while it lives."""
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_create_time(os.getpid())}\n")


def remove_stale_folders(root: Path | None = None, prefix: str = FOLDER_PREFIX) -> int:
    """Remove the folders named `prefix`* in `root` (the console's in the temporary folder) whose owner
    process has ended; how many were removed."""
    removed = 0
    for folder in Path(root or tempfile.gettempdir()).glob(prefix + "*"):
        if folder.is_dir() and not folder.is_symlink() and _stale(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed += not folder.exists()
    return removed


def _stale(folder: Path) -> bool:
    try:
        pid_text, created_text = (folder / OWNER_FILE).read_text().split()
        pid, created = int(pid_text), float(created_text)
    except FileNotFoundError:
        try:
            return time.time() - folder.stat().st_mtime > ORPHAN_AGE_S
        except OSError:
            return False
    except (OSError, ValueError):
        return False  # not ours to judge
    return _create_time(pid) != created


def _create_time(pid: int) -> float:
    """The start time of process `pid` (0.0 when it is gone): with the pid, names one process."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0
