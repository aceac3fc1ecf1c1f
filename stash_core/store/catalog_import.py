"""Write imported catalog rows (a price catalog read elsewhere, e.g. SkyPilot's) into the `instances` table.

The store takes plain rows: dicts keyed by the instances columns (catalog_seed.CATALOG_COLUMNS), already
checked. A row whose stored origin is 'user' is left as it is (a user's edit wins over any import); every
other row of the same name ('builtin' or an earlier 'import') is replaced, and new names are inserted. All
rows are written in one transaction: an import is stored whole or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from stash_core.store.catalog_seed import CATALOG_COLUMNS
from stash_core.store.connection import connect

# One statement for all rows, from an Arrow table: executemany costs milliseconds per row (a 200,000-row
# catalog took minutes).
_INSERT = (
    f"INSERT INTO instances ({', '.join(CATALOG_COLUMNS)}) "
    f"SELECT {', '.join(CATALOG_COLUMNS)} FROM _stash_incoming "
    f"ON CONFLICT (name) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in CATALOG_COLUMNS[1:])}"
)


@dataclass
class ImportOutcome:
    inserted: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept_user: list[str] = field(default_factory=list)


def write_imported_rows(db_path: Path | str, rows: list[dict[str, Any]]) -> ImportOutcome:
    """Insert or replace the rows (origin 'import'), leaving rows of origin 'user' alone."""
    outcome = ImportOutcome()
    with connect(db_path) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            origins = dict(con.execute("SELECT name, origin FROM instances").fetchall())
            values = []
            for row in rows:
                name = row["name"]
                if origins.get(name) == "user":
                    outcome.kept_user.append(name)
                    continue
                (outcome.replaced if name in origins else outcome.inserted).append(name)
                values.append([row.get(column) for column in CATALOG_COLUMNS[:-1]] + ["import"])
            if values:
                columns = {name: [value[i] for value in values] for i, name in enumerate(CATALOG_COLUMNS)}
                con.register(
                    "_stash_incoming", pa.table({name: pa.array(cells) for name, cells in columns.items()})
                )
                try:
                    con.execute(_INSERT)
                finally:
                    con.unregister("_stash_incoming")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    return outcome
