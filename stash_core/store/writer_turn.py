"""A writer's turn at a busy database: DuckDB's lock does not queue, so readers that open and close in a loop
could keep a writer out until it gives up. A writer that finds the file busy holds an exclusive flock on the
side file `<db>.writer-waiting` (announce_waiting_writer), and a reader about to open steps aside while it is
held, for at most READER_YIELD_S (step_aside_for_waiting_writer). A reader that finds the file busy holds a
shared flock on `<db>.reader-waiting` (announce_waiting_reader), and a writer that works in turns lets it in
between them (give_way). The side files are empty and may be deleted whenever nothing uses the database."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on POSIX: no writer announcement, plain retries only
    fcntl = None  # type: ignore[assignment]

READER_YIELD_S = 2.0
WRITER_GIVES_WAY_S = 2.0  # the most a writer working in turns waits between them for announced others
_READER_STEP_S = 0.05
WAITING_SUFFIX = ".writer-waiting"
READERS_SUFFIX = ".reader-waiting"


def _waiting_file(path: Path, suffix: str = WAITING_SUFFIX) -> Path:
    return path.with_name(path.name + suffix)


def announce_waiting_writer(path: Path) -> int | None:
    """Hold an exclusive flock on the side file; None when another writer already waits or flock fails."""
    return _announce(path, WAITING_SUFFIX, exclusive=True)


def announce_waiting_reader(path: Path) -> int | None:
    """A reader that found the file busy holds a shared flock on `<db>.reader-waiting` while it retries, so
    that a writer working in turns (store.ingest.ingest_files) lets it in between them (give_way); None when
    the side file cannot be made or locked."""
    return _announce(path, READERS_SUFFIX, exclusive=False)


def _announce(path: Path, suffix: str, exclusive: bool) -> int | None:
    """The descriptor holding a flock on the side file `suffix` (closing it withdraws); None if it cannot."""
    if fcntl is None:
        return None
    fd = _open_side_file(path, os.O_RDWR | os.O_CREAT, suffix)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def give_way(path: Path, most_s: float = WRITER_GIVES_WAY_S) -> None:
    """Between a writer's turns, its connection closed: wait (bounded) while a reader or another writer is
    announced. Reopening at once left a gap of milliseconds, which readers backing off never hit: a folder's
    ingest kept them out for all of its minutes."""
    give_up_at = time.monotonic() + most_s
    while _someone_waits(path) and time.monotonic() < give_up_at:
        time.sleep(_READER_STEP_S)


def _someone_waits(path: Path) -> bool:
    """Whether a reader holds `<db>.reader-waiting` or a writer `<db>.writer-waiting` (a lock test fails)."""
    if fcntl is None:
        return False
    for suffix, test in ((READERS_SUFFIX, fcntl.LOCK_EX), (WAITING_SUFFIX, fcntl.LOCK_SH)):
        fd = _open_side_file(path, os.O_RDONLY, suffix)
        if fd is None:
            continue
        try:
            fcntl.flock(fd, test | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            return True
        except OSError:
            continue
        finally:
            os.close(fd)
    return False


def _open_side_file(path: Path, flags: int, suffix: str = WAITING_SUFFIX) -> int | None:
    """A side file, opened without blocking; None when it is not there or is not a regular file (a pipe of
    that name would block every reader)."""
    try:
        fd = os.open(_waiting_file(path, suffix), flags | os.O_NONBLOCK, 0o666)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def step_aside_for_waiting_writer(path: Path, deadline: float) -> None:
    """Before a reader opens: while a writer is announced, wait (bounded) so that it gets its turn."""
    if fcntl is None:
        return
    fd = _open_side_file(path, os.O_RDONLY)
    if fd is None:  # no side file: no writer ever had to wait
        return
    try:
        give_up_at = min(deadline, time.monotonic() + READER_YIELD_S)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= give_up_at:
                    return
                time.sleep(_READER_STEP_S)
                continue
            except OSError:
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
    finally:
        os.close(fd)
