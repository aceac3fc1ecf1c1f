"""Opening the DuckDB store for one operation at a time.

DuckDB lets one process write a database file, or many processes read it, never both. So every operation
opens a connection, does its work and closes it (`with connect(path) as con: ...`); while another process
holds the file, opening retries with exponential back-off for up to LOCK_TIMEOUT_S seconds.

DuckDB's lock does not queue: a writer that finds the file busy announces itself, and readers step aside
for it (store/writer_turn.py).
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from stash_core.errors import UsageError, first_line, write_failure
from stash_core.exits import RESTORE_ADVICE
from stash_core.store.dbfile import DUCKDB_MAGIC, check_database_file, refuse_foreign
from stash_core.store.migrations import check_reader_can_take, ensure_schema, stored_schema_version
from stash_core.store.open_here import (
    NO_EXTENSION_FETCH,
    SAME_PROCESS_RE,
    callers_own,
    counted,
    stash_connections,
)
from stash_core.store.schema import DB_SCHEMA_VERSION, missing_objects, refuse_damaged, stored_columns
from stash_core.store.schema_template import copy_schema
from stash_core.store.writer_turn import (
    announce_waiting_reader,
    announce_waiting_writer,
    step_aside_for_waiting_writer,
)
from stash_core.userfiles import check_reachable, nearest_existing

LOCK_TIMEOUT_S = 10.0
_FIRST_WAIT_S = 0.02
_LONGEST_WAIT_S = 0.5
# A failed open costs DuckDB tens of milliseconds of CPU, so even an announced waiter does not poll faster.
_ANNOUNCED_WAIT_S = 0.1

# One storing transaction at a time in this process. Threads of one process (the dashboard's sessions, a
# notebook's threads) share DuckDB's instance of a file, and two transactions there that only append never
# conflict: each checked "not stored yet" before the other committed, and both appended the same samples.
STORING = threading.RLock()


@contextmanager
def connect(
    db_path: Path | str, read_only: bool = False, lock_timeout_s: float | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the store for one operation and close it afterwards.

    Writers create the schema on first use (and migrate an older one, see store/migrations.py). Readers take
    a database as it is (versions from READABLE_FROM_VERSION on); readers of a file that does not exist yet,
    or that holds no Stash schema, get an in-memory stand-in with the schema, as a new database has it (no
    runs, the shipped instance catalog; is_stand_in tells it apart), so queries return empty results. The
    session time zone is UTC. Raises UsageError when the file stays locked for `lock_timeout_s` (default
    LOCK_TIMEOUT_S), is not a DuckDB database, or cannot be created.
    """
    path = Path(db_path)
    timeout_s = LOCK_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s
    if path.is_dir():
        raise UsageError(f"database {path} is a directory, not a DuckDB file")
    check_reachable(path)
    wal = path.with_name(path.name + ".wal")
    wal_existed = read_only or wal.exists()  # readers never write a WAL
    with counted(path):
        con = _opened(path, read_only, timeout_s, wal, wal_existed)
        yield from _used_then_closed(con, path, wal, wal_existed)


def _opened(
    path: Path, read_only: bool, timeout_s: float, wal: Path, wal_existed: bool
) -> duckdb.DuckDBPyConnection:
    """The connection connect() yields: the stand-in, or the file opened, its schema made or checked."""
    if read_only and not path.exists():
        return _empty_database()
    if not read_only:
        _make_parent(path)
    existed = path.exists()
    try:
        con = _open_with_retry(path, read_only, timeout_s)
    except DatabaseLocked:
        raise  # another process holds the file: it is theirs
    except UsageError:
        if not existed:
            _remove_new(path)  # DuckDB created it but could not write it whole (a full disk)
        elif not wal_existed:
            _remove_if_empty(wal)
        raise
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = false")  # a long insert drew one into the output
        if read_only:
            return _checked_reader(con, path)
        ensure_schema(con, str(path))
        return con
    except duckdb.Error as exc:
        _close_quietly(con)
        if not existed:
            _remove_new(path)  # a new database whose schema a full disk refused: no half-made file is left
        elif not wal_existed:
            _remove_if_empty(wal)  # a full disk at the first write leaves an empty .wal
        if _CORRUPT_RE.search(str(exc)):
            raise _open_error(path, exc) from None
        raise write_failure(f"cannot use database {path}: {first_line(exc)}", exc) from None
    except BaseException:
        con.close()
        raise


def _used_then_closed(
    con: duckdb.DuckDBPyConnection, path: Path, wal: Path, wal_existed: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        yield con
    except BaseException:
        try:
            con.close()
        except duckdb.Error:
            pass  # the error in flight says more
        if not wal_existed:
            _remove_if_empty(wal)  # a write refused by a full disk leaves an empty .wal
        raise
    try:
        con.close()  # writes a checkpoint, which a full disk can refuse (the WAL keeps the data)
    except duckdb.Error as exc:
        raise write_failure(f"cannot close database {path}: {first_line(exc)}", exc) from None


def _close_quietly(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.close()
    except duckdb.Error:
        pass


def _remove_if_empty(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + ".wal")):
        try:
            if leftover.stat().st_size == 0:
                leftover.unlink()
        except OSError:
            pass


def _remove_new(path: Path) -> None:
    """A database file this open created, and its WAL, whatever is in them: nothing was stored yet."""
    for leftover in (path, path.with_name(path.name + ".wal")):
        try:
            leftover.unlink()
        except OSError:
            pass


def is_stand_in(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a reader's `con` is the in-memory stand-in of a database nothing has written (a file that does
    not exist, or a DuckDB file without the Stash schema): its rows, the shipped catalog's, are no file's."""
    rows = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return bool(rows) and rows[0][0] is None


def _empty_database() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    copy_schema(con)
    return con


def _checked_reader(con: duckdb.DuckDBPyConnection, path: Path) -> duckdb.DuckDBPyConnection:
    try:
        version = stored_schema_version(con, f"database {path}")
    except BaseException:
        con.close()
        raise
    if version is None:
        # A DuckDB file without the Stash schema (e.g. created by a crashed first writer) reads as empty;
        # one with tables of its own is another program's.
        try:
            refuse_foreign(con, str(path))
        except BaseException:
            con.close()
            raise
        con.close()
        return _empty_database()
    check_reader_can_take(version, str(path))  # an older but readable version is read as it is
    if version != DB_SCHEMA_VERSION:
        return con
    identity = _file_identity(path)  # taken before the check: a file changed during it is checked again
    if identity is not None and _SCHEMA_WHOLE.get(str(path)) == identity:
        return con  # checked whole, unchanged since: a page's every read skips the catalog query
    present = stored_columns(con)
    try:
        refuse_damaged(con, str(path), present)  # first: no writer makes a dropped column's figures again
    except UsageError:
        con.close()
        raise
    missing = missing_objects(con, present)
    if missing:
        con.close()
        raise UsageError(
            f"database {path} lacks {', '.join(missing)} of its schema (dropped or damaged): a command that "
            f"writes to it makes them again, e.g. `stash instances seed --db {path}`"
        )
    if identity is not None:
        _SCHEMA_WHOLE[str(path)] = identity
    return con


# Database files whose schema a reader found whole, by path: the file and its write-ahead log as they were.
_SCHEMA_WHOLE: dict[str, tuple] = {}


def _file_identity(path: Path) -> tuple | None:
    """(inode, size, mtime) of the database and of its .wal (None where there is none): what changes when
    anything is written to it, checkpointed or not."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    try:
        log = os.stat(f"{path}.wal")
        wal = (log.st_ino, log.st_size, log.st_mtime_ns)
    except OSError:
        wal = None
    return info.st_ino, info.st_size, info.st_mtime_ns, wal


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failure(f"cannot create database {path}: {exc.strerror or exc}", exc) from None


class DatabaseLocked(UsageError):
    """The database stayed locked by another process (or connection) for the whole wait. A UsageError for
    the callers that catch one, but the machine's state, not the input: a command exits 1 with it."""

    exit_code = 1


# "Could not set lock on file ... Conflicting lock is held": another process holds it. "different
# configuration": this process holds it (e.g. another thread of a Streamlit server) with the other read_only
# setting. "Unique file handle conflict ... already attached": another thread of this process is opening or
# closing it this instant. The word "lock" alone, not "block": a corrupt file's message names the block it
# failed on.
_LOCK_RE = re.compile(r"\block(ed)?\b|different configuration|unique file handle conflict|already attached")
_OTHER_THREAD_RE = re.compile(r"unique file handle conflict|already attached", re.IGNORECASE)
# "could not read enough bytes": a file cut short (a copy that stopped, a full disk)
_CORRUPT_RE = re.compile(
    r"corrupt|checksum|not a valid duckdb|invalid|magic|serializ|could not read enough bytes", re.IGNORECASE
)


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    message = str(exc).lower()
    return bool(_LOCK_RE.search(message)) and not _CORRUPT_RE.search(message)


def check_database_path(path: Path | str) -> None:
    """Refuse, in one line, a database path that cannot be one: a directory, a file that is not a DuckDB
    database (empty, garbage, another format), a path below a file or through a symlink loop, or a new file
    in a place that cannot be written. Reads at most 16 bytes; whether a DuckDB file is intact is only known
    once it is opened (see connect)."""
    path = Path(path)
    check_reachable(path)
    if path.is_dir():
        raise UsageError(f"database {path} is a directory, not a DuckDB file")
    if path.exists():
        check_database_file(path)  # a FIFO or a device first: reading one blocked the command for good
        try:
            with path.open("rb") as handle:
                head = handle.read(16)
        except OSError as exc:
            raise UsageError(f"cannot read database {path}: {exc.strerror or exc}") from None
        if head[8:12] != DUCKDB_MAGIC:
            what = "empty" if not head else "corrupt or not a DuckDB database"
            raise UsageError(f"database {path} is {what} (no DuckDB header)")
        if not os.access(path, os.W_OK):
            raise UsageError(f"database {path} is not writable")
        return
    existing = nearest_existing(path.parent)
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"cannot create database {path}: {existing} is not a writable directory")


def _open_error(path: Path, exc: duckdb.Error) -> UsageError:
    """The one line for a database that DuckDB cannot open, for another reason than a lock."""
    if path.is_dir():
        return UsageError(f"database {path} is a directory, not a DuckDB file")
    if _CORRUPT_RE.search(str(exc)):
        return UsageError(
            f"cannot open database {path}: it is corrupt or not a DuckDB database ({first_line(exc)}); if it "
            f"is your database, {RESTORE_ADVICE}"
        )
    return write_failure(f"cannot open database {path}: {first_line(exc)}", exc)


def _open_with_retry(path: Path, read_only: bool, timeout_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + timeout_s
    wait_s = _FIRST_WAIT_S
    announcement: int | None = None  # a writer's fd holding the flock on the side file while it waits
    try:
        while True:
            if read_only:
                step_aside_for_waiting_writer(path, deadline)
            check_database_file(path)
            stash_before = stash_connections(path)
            try:
                # Never fetch an extension: a file DuckDB would need one for is refused above.
                return duckdb.connect(str(path), read_only=read_only, config=NO_EXTENSION_FETCH)
            except duckdb.Error as exc:
                if not _is_lock_conflict(exc):
                    raise _open_error(path, exc) from None
                shared = _join_this_process(path, read_only, exc)
                if shared is not None:
                    return shared
                remaining_s = deadline - time.monotonic()
                callers = callers_own(path, exc, stash_before)
                if callers:
                    remaining_s = 0  # waiting would not close it
                if remaining_s <= 0:
                    raise DatabaseLocked(_locked_message(path, exc, timeout_s, callers)) from None
                if announcement is None:
                    announce = announce_waiting_reader if read_only else announce_waiting_writer
                    announcement = announce(path)
                longest_s = _ANNOUNCED_WAIT_S if announcement is not None else _LONGEST_WAIT_S
                wait_s = min(wait_s, longest_s)
                # Jitter keeps several waiting processes from retrying in lock-step.
                time.sleep(min(wait_s * random.uniform(0.5, 1.0), remaining_s))
                wait_s = min(wait_s * 2, longest_s)
    finally:
        if announcement is not None:
            os.close(announcement)  # closing the descriptor releases the flock


def _join_this_process(path: Path, read_only: bool, exc: duckdb.Error) -> duckdb.DuckDBPyConnection | None:
    """A reader's connection to a file this process already holds open read-only under DuckDB's default
    configuration (a `duckdb.connect(path, read_only=True)` of the user's, as docs/database.md shows):
    DuckDB shares one database per file and process, so it refuses Stash's own configuration but takes the
    default one. None when that is not the case (a writer, or the other connection writes)."""
    if not read_only or not SAME_PROCESS_RE.search(str(exc)):
        return None
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None


def _locked_message(path: Path, exc: duckdb.Error, timeout_s: float, callers: bool) -> str:
    if callers:
        return (
            f"database {path} is open in this process with another mode (a duckdb connection of your own?): "
            "close that connection first"
        )
    if SAME_PROCESS_RE.search(str(exc)):
        return (
            f"database {path} is open in this process with another mode - gave up after {timeout_s:g} s; "
            "close that connection first"
        )
    if _OTHER_THREAD_RE.search(str(exc)):
        return (
            f"database {path} stayed in use by another thread of this process - gave up after {timeout_s:g} s"
        )
    return (
        f"database {path} is locked by another process{_holder(exc)} - gave up after {timeout_s:g} s; try "
        "again when it has finished"
    )


def _holder(exc: duckdb.Error) -> str:
    match = re.search(r"\(PID (\d+)\)", str(exc))
    return f" (PID {match.group(1)})" if match else ""
