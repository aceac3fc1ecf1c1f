"""The instance catalog every database starts with: the rows of the CSV file shipped with Stash.

The catalog's meaning, its checks and its editing belong to stash_core.catalog, which keeps the file
(`stash_core/catalog/instances.csv`, package data) and takes its path from here: the store sits below
decide in the layers, so it reads the file by its path and never imports decide. create_schema calls
seed_builtin_catalog, so a new database (and the empty stand-in that readers of a missing file get) holds the
catalog from its first use: `SELECT * FROM instances` returns it and joins on `instances.name` find prices.

Seeding inserts the names not stored yet; `stash instances seed` also gives rows still of origin 'builtin'
the values shipped now (a newer Stash's prices), and says which: a row a user edited or imported is never
touched. Every row says where it comes from
(`origin`): 'builtin' (this file), 'import' (a price catalog, see store/catalog_import.py) or 'user' (added
or edited by the user, never overwritten by an import).
The file is read with the csv module (no pandas: every command opens the store, and `stash` starts fast),
here only: builtin_catalog_rows is the one parser of the shipped file, which stash_core.catalog reads too.
The SQL of the table is in store/instances.py.
"""

from __future__ import annotations

import csv
import functools
import re
from datetime import date
from pathlib import Path
from typing import Any

from stash_core.store.instances import CATALOG_COLUMNS, count_rows, insert_rows, select_rows, update_row

BUILTIN_CATALOG_CSV = Path(__file__).resolve().parent.parent / "catalog" / "instances.csv"

ORIGINS = ("builtin", "import", "user")
# How a CSV cell becomes a value of each column of the instances table (text when not named here).
_WHOLE = ("accelerator_count", "vcpus")
_NUMBER = ("memory_gib", "network_gbps", "on_demand_usd_per_h", "spot_usd_per_h")
# A price read from a provider's catalog names its region in the source ("..., region us-east-1 (default
# region); ..."): the row's region, where the row gives none of its own.
_SOURCE_REGION = re.compile(r"\bregion ([a-z][a-z0-9-]*[a-z0-9])\b")


def source_region(source: object) -> str | None:
    """The region a price's source text names ("region us-east-1"), or None."""
    found = _SOURCE_REGION.search(str(source or ""))
    return found.group(1) if found else None


def seed_builtin_catalog(con: Any, csv_path: Path | None = None) -> int:
    """Insert the shipped catalog rows whose name is not stored yet; returns how many were inserted.

    A missing or unreadable file seeds nothing (a database without a catalog still works: readers fall back
    on the file through stash_core.catalog, which reports the problem).
    """
    try:
        rows = builtin_catalog_rows(csv_path or BUILTIN_CATALOG_CSV)
    except (OSError, ValueError, csv.Error):
        return 0
    if not rows:
        return 0
    before = count_rows(con)
    insert_rows(con, rows, "keep")
    return count_rows(con) - before


def stale_builtin_rows(con: Any) -> list[tuple[Any, ...]]:
    """The shipped rows whose stored row is still of origin 'builtin' but holds other values (an older Stash
    seeded older prices; an edited row is of origin 'user', an imported one 'import')."""
    shipped = {row[0]: row for row in builtin_catalog_rows(BUILTIN_CATALOG_CSV)}
    origin = CATALOG_COLUMNS.index("origin")
    stored = [row for row in select_rows(con) if row[origin] == "builtin"]  # NULL before version 5: none
    return [shipped[row[0]] for row in stored if row[0] in shipped and tuple(row) != shipped[row[0]]]


def refresh_builtin_rows(con: Any) -> list[str]:
    """Give the stale_builtin_rows the shipped values (only `stash instances seed` does, and says which: a
    price never changes under the user unsaid); returns their names."""
    stale = stale_builtin_rows(con)
    for row in stale:
        update_row(con, row[0], list(row[1:]))
    return [row[0] for row in stale]


@functools.cache
def builtin_catalog_rows(csv_path: Path) -> list[tuple[Any, ...]]:
    """The rows of a catalog CSV as typed tuples in CATALOG_COLUMNS order (read once per process).

    ValueError for a cell that is not what its column holds; an empty cell is NULL.
    """
    with open(csv_path, encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    rows = []
    for record in records:
        if not (record.get("name") or "").strip():
            continue
        record = {**record, "origin": "builtin"}
        if not (record.get("region") or "").strip():
            record["region"] = source_region(record.get("source")) or ""
        rows.append(tuple(_typed(column, record.get(column)) for column in CATALOG_COLUMNS))
    return rows


def _typed(column: str, cell: str | None) -> Any:
    text = (cell or "").strip()
    if not text:
        return None
    if column in _WHOLE:
        return int(text)
    if column in _NUMBER:
        return float(text)
    if column == "price_date":
        return date.fromisoformat(text)
    return text
