"""A writer's turn at a busy database: DuckDB's lock does not queue, so readers that open and close in a loop
could keep a writer out until it gives up. A writer that finds the file busy holds an exclusive flock on the
side file `<db>.writer-waiting` (announce_waiting_writer), and a reader about to open steps aside while it is
held, for at most READER_YIELD_S (step_aside_for_waiting_writer). The side file is empty and may be deleted
whenever nothing uses the database."""

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
_READER_STEP_S = 0.05
WAITING_SUFFIX = ".writer-waiting"


def _waiting_file(path: Path) -> Path:
    return path.with_name(path.name + WAITING_SUFFIX)


def announce_waiting_writer(path: Path) -> int | None:
    """Hold an exclusive flock on the side file; None when another writer already waits or flock fails."""
    if fcntl is None:
        return None
    fd = _open_side_file(path, os.O_RDWR | os.O_CREAT)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _open_side_file(path: Path, flags: int) -> int | None:
    """The waiting writer's side file, opened without blocking; None when it is not there or is not a regular
    file (a pipe of that name would block every reader)."""
    try:
        fd = os.open(_waiting_file(path), flags | os.O_NONBLOCK, 0o666)
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
