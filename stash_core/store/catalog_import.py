"""Write imported catalog rows (a price catalog read elsewhere, e.g. SkyPilot's) into the `instances` table.

The store takes plain rows: dicts keyed by the instances columns (instances.CATALOG_COLUMNS), already
checked. A row whose stored origin is 'user' is left as it is (a user's edit wins over any import); every
other row of the same name ('builtin' or an earlier 'import') is replaced, and new names are inserted. All
rows are written in one transaction: an import is stored whole or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stash_core.store.connection import connect
from stash_core.store.instances import CATALOG_COLUMNS, insert_rows, stored_origins, transaction


@dataclass
class ImportOutcome:
    inserted: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept_user: list[str] = field(default_factory=list)


def write_imported_rows(db_path: Path | str, rows: list[dict[str, Any]]) -> ImportOutcome:
    """Insert or replace the rows (origin 'import'), leaving rows of origin 'user' alone."""
    outcome = ImportOutcome()
    with connect(db_path) as con, transaction(con):
        origins = stored_origins(con)
        values = []
        for row in rows:
            name = row["name"]
            if origins.get(name) == "user":
                outcome.kept_user.append(name)
                continue
            (outcome.replaced if name in origins else outcome.inserted).append(name)
            values.append([row.get(column) for column in CATALOG_COLUMNS[:-1]] + ["import"])
        insert_rows(con, values, "replace")
    return outcome
