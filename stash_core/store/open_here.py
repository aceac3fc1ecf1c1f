"""Which connections of this process hold a database file: Stash's own, counted here, or the caller's.

DuckDB shares one database per file and process, and refuses a connection in the other mode ("different
configuration") while any connection of this process holds the file. When none of Stash's does, the holder is
a connection of the caller's (a notebook's duckdb.connect), which waiting does not close.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

NO_EXTENSION_FETCH = {"autoinstall_known_extensions": False}
SAME_PROCESS_RE = re.compile(r"different configuration")

# The files this process's own connect() holds open or is opening, by real path.
_OPEN_HERE: Counter[str] = Counter()
# How many connect() calls ever began on each file: a refusal is the caller's only when no other began or
# ended during the refused try (one that closed meanwhile refused it, then let go).
_OPENS_BEGUN: Counter[str] = Counter()
OPEN_HERE_LOCK = threading.Lock()


@contextmanager
def counted(path: Path) -> Iterator[None]:
    """Stash's connection to `path`, counted from its first try to open until it is closed: a thread
    refused meanwhile waits for this one."""
    key = os.path.realpath(path)
    with OPEN_HERE_LOCK:
        _OPEN_HERE[key] += 1
        _OPENS_BEGUN[key] += 1
    try:
        yield
    finally:
        with OPEN_HERE_LOCK:
            _OPEN_HERE[key] -= 1


def stash_connections(path: Path) -> tuple[int, int]:
    """Stash's connections to `path` in this process: how many are open or opening, how many ever began."""
    key = os.path.realpath(path)
    with OPEN_HERE_LOCK:
        return _OPEN_HERE[key], _OPENS_BEGUN[key]


def callers_own(path: Path, exc: duckdb.Error, stash_before: tuple[int, int]) -> bool:
    """Whether DuckDB refused for a connection of this process in another mode that Stash does not hold:
    none of Stash's but the one now opening was open, opening or closing at any moment of the refused try
    (`stash_before` is stash_connections from just before it)."""
    if not SAME_PROCESS_RE.search(str(exc)):
        return False
    return stash_before[0] <= 1 and stash_connections(path) == (1, stash_before[1])


def held_by_caller(path: Path) -> bool:
    """Whether a connection of this process that is not Stash's holds the file: DuckDB then refuses a
    connection of Stash's configuration beside it (read-only, which writes nothing)."""
    # The probe runs under the lock: a connection of Stash's opening meanwhile in another thread would be
    # taken for the caller's, and the probe's own would refuse it.
    with OPEN_HERE_LOCK:
        if _OPEN_HERE[os.path.realpath(path)]:
            return False  # Stash's own, open for this moment only
        try:
            duckdb.connect(str(path), read_only=True, config=NO_EXTENSION_FETCH).close()
        except duckdb.Error as exc:
            return bool(SAME_PROCESS_RE.search(str(exc)))
        return False
