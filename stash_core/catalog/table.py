"""The SQL of the `instances` table: read, count, insert and update catalog rows on an open connection.

The catalog functions open the store once per operation (stash_core.store.connect) and do their reads and
writes through these, so that a seed, a check and a write happen on one connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stash_core.store import connect
from stash_core.store.catalog_seed import CATALOG_COLUMNS

COLUMNS = CATALOG_COLUMNS  # the columns of the instances table, in table order
EDITABLE = COLUMNS[1:]

_SELECT = f"SELECT {', '.join(COLUMNS)} FROM instances"
# Columns later schema versions added: a database of an older version, read without migrating, lacks them.
_LATER = ("region", "origin")
_INSERT = f"INSERT INTO instances ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
_UPDATE = f"UPDATE instances SET {', '.join(f'{column} = ?' for column in EDITABLE)} WHERE name = ?"


def read_rows(db_path: Path | str, name: str | None = None) -> list[tuple[Any, ...]]:
    """Stored rows (values in COLUMNS order): all of them, or the one named; opens the store read-only.

    A database file that does not exist stores nothing (its stand-in's seeded rows are not stored rows).
    """
    if not Path(db_path).exists():
        return []
    with connect(db_path, read_only=True) as con:
        return select_rows(con, name)


def select_rows(con: Any, name: str | None = None) -> list[tuple[Any, ...]]:
    """Stored rows (values in COLUMNS order): all of them, or the one named; NULL for a later column the
    database does not have yet."""
    present = {column[0] for column in con.execute("SELECT * FROM instances LIMIT 0").description}
    select = _SELECT
    if not present.issuperset(_LATER):
        parts = [column if column in present else f"NULL AS {column}" for column in COLUMNS]
        select = f"SELECT {', '.join(parts)} FROM instances"
    if name is None:
        return con.execute(select).fetchall()
    return con.execute(f"{select} WHERE name = ?", [name]).fetchall()


def count_rows(con: Any, name: str | None = None) -> int:
    """How many rows are stored (with this name)."""
    if name is None:
        return con.execute("SELECT count(*) FROM instances").fetchall()[0][0]
    return con.execute("SELECT count(*) FROM instances WHERE name = ?", [name]).fetchall()[0][0]


def insert_row(con: Any, values: list[Any], keep_stored: bool = False) -> None:
    """Insert one row (values in COLUMNS order); keep_stored leaves a stored row of that name alone."""
    con.execute(f"{_INSERT} ON CONFLICT (name) DO NOTHING" if keep_stored else _INSERT, values)


def update_row(con: Any, name: str, values: list[Any]) -> None:
    """Replace the EDITABLE values (in that order) of the named row."""
    con.execute(_UPDATE, [*values, name])
