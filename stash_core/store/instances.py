"""The SQL of the `instances` table (the instance catalog): read, count, insert and update on an open
connection.

The one owner of the table's statements: the seed of the shipped rows (catalog_seed.py), an imported price
catalog (catalog_import.py) and the catalog's own add and set (stash_core.catalog) all write through
insert_rows and update_row, so a column renamed here is renamed for all of them. Every function takes an
open connection (no import of connection.py: the schema's creation seeds through here): the catalog opens
the store once per operation, so that a seed, a check and a write happen on one connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from stash_core.store.rollback import rollback_if_open

# The instances table's columns, in table order.
CATALOG_COLUMNS = (
    "name", "provider", "accelerator", "accelerator_count", "vcpus", "memory_gib", "network_gbps",
    "interconnect", "on_demand_usd_per_h", "spot_usd_per_h", "price_date", "source", "region", "origin",
)  # fmt: skip
COLUMNS = CATALOG_COLUMNS
EDITABLE = COLUMNS[1:]

_SELECT = f"SELECT {', '.join(COLUMNS)} FROM instances"
# Columns later schema versions added: a database of an older version, read without migrating, lacks them.
_LATER = ("region", "origin")
_ROW_PLACEHOLDERS = f"({', '.join('?' for _ in COLUMNS)})"
# What an insert does with a row whose name is stored: fail, keep the stored row, or replace its values.
_ON_CONFLICT = {
    "fail": "",
    "keep": " ON CONFLICT (name) DO NOTHING",
    "replace": f" ON CONFLICT (name) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in EDITABLE)}",
}
# Above this many rows an insert goes through one Arrow-backed statement.
_BULK_ROWS = 256
_UPDATE = f"UPDATE instances SET {', '.join(f'{column} = ?' for column in EDITABLE)} WHERE name = ?"


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
    insert_rows(con, [values], "keep" if keep_stored else "fail")


def insert_rows(
    con: Any, rows: Iterable[Sequence[Any]], on_conflict: Literal["fail", "keep", "replace"] = "fail"
) -> None:
    """Insert rows (values in COLUMNS order); a stored name fails the insert, keeps its row or is replaced."""
    rows = list(rows)
    if on_conflict == "replace":  # one statement updates a name once: the last row of a name wins
        rows = list({row[0]: row for row in rows}.values())
    if len(rows) > _BULK_ROWS:
        _insert_bulk(con, rows, on_conflict)
    elif rows:  # one statement: executemany costs DuckDB ~5 ms a row (the 71 shipped rows of every new store)
        values = ", ".join([_ROW_PLACEHOLDERS] * len(rows))
        statement = f"INSERT INTO instances ({', '.join(COLUMNS)}) VALUES {values}{_ON_CONFLICT[on_conflict]}"
        con.execute(statement, [value for row in rows for value in row])


def _insert_bulk(con: Any, rows: list[Sequence[Any]], on_conflict: str) -> None:
    """One statement for all rows, from an Arrow table: executemany costs milliseconds per row (a
    200,000-row catalog took minutes)."""
    import pyarrow as pa  # only bulk imports pay for loading Arrow

    table = pa.table({name: pa.array([row[i] for row in rows]) for i, name in enumerate(COLUMNS)})
    con.register("_stash_incoming", table)
    try:
        con.execute(
            f"INSERT INTO instances ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM _stash_incoming"
            + _ON_CONFLICT[on_conflict]
        )
    finally:
        con.unregister("_stash_incoming")


def update_row(con: Any, name: str, values: list[Any]) -> None:
    """Replace the EDITABLE values (in that order) of the named row."""
    con.execute(_UPDATE, [*values, name])


@contextmanager
def transaction(con: Any) -> Iterator[None]:
    """All of a change or nothing: a refused edit leaves no seeded or half-written row behind."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        rollback_if_open(con)
        raise
    con.execute("COMMIT")
