"""Is this file, and this database, Stash's? Checked before DuckDB opens a file and once it has.

Before opening: a path that is a FIFO or a device is refused (DuckDB would block on it or read it), and a
file that is not a DuckDB database (an SQLite file, text) is refused by its header, so that DuckDB never
tries to load, or download, an extension to read it. Once opened: a DuckDB database that holds tables but no
`schema_meta` belongs to another program, and no command adds Stash's tables to it or reads it as empty.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import duckdb

from stash_core.errors import UsageError
from stash_core.userfiles import file_kind

DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of every DuckDB database file
SQLITE_MAGIC = b"SQLite format 3\x00"


_TEXT_BYTES = frozenset(range(32, 127)) | {9, 10, 13}  # printable ASCII, tab, newlines


def is_duckdb_file(path: Path) -> bool:
    """Whether `path` is a regular file with DuckDB's header (False where it cannot be read: a FIFO is
    not opened)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as handle:
            return handle.read(16)[8:12] == DUCKDB_MAGIC
    except OSError:
        return False


def check_duckdb_path(path: Path, what: str = "database") -> None:
    """Refuse a path DuckDB would open under another name: DuckDB takes a path as UTF-8 text, so where the
    locale's file names are another encoding (ISO-8859-1) a non-ASCII name becomes other bytes, and a new
    database or an export went to a file the user never named."""
    text = str(path)
    if os.fsencode(text) != text.encode("utf-8", "surrogateescape"):
        encoding = sys.getfilesystemencoding()
        raise UsageError(
            f"{what} {text!r}: DuckDB opens file names as UTF-8 and this locale's are {encoding}, so it "
            "would use another name: give an ASCII name, or run in a UTF-8 locale (LC_ALL=C.UTF-8)"
        )


def check_database_file(path: Path) -> None:
    """Refuse an existing `path` that is not a regular file or whose header is not DuckDB's (a file too
    short to have a header is left to DuckDB: it may be a database another process is creating), and a name
    DuckDB would read as another (check_duckdb_path)."""
    check_duckdb_path(path)
    try:
        info = os.stat(path)
    except OSError:
        return  # missing (created by a writer) or unreadable (DuckDB says why)
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"database {path} is a directory, not a DuckDB file")
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"database {path} is a {file_kind(info.st_mode)}, not a DuckDB file")
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError:
        return
    if 0 < len(head) < 12 and all(byte in _TEXT_BYTES for byte in head):
        # DuckDB opens a short text file named like a CSV as an in-memory database: every write lost.
        raise UsageError(
            f"cannot open database {path}: it is corrupt or not a DuckDB database (a short text file)"
        )
    if len(head) < 12 or head[8:12] == DUCKDB_MAGIC:
        return
    what = "an SQLite database" if head == SQLITE_MAGIC else "corrupt or not a DuckDB database"
    raise UsageError(f"cannot open database {path}: it is {what} (no DuckDB header)")


def refuse_foreign(con: duckdb.DuckDBPyConnection, db_label: str) -> None:
    """Called when the open database has no schema_meta: refuse it when it holds any table or view."""
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
        "ORDER BY table_name LIMIT 4"
    ).fetchall()
    if rows:
        names = ", ".join(str(row[0])[:40] for row in rows[:3]) + (", ..." if len(rows) > 3 else "")
        raise UsageError(
            f"database {db_label} is not Stash's: it holds other tables ({names}) and no schema_meta; "
            "give another --db"
        )
