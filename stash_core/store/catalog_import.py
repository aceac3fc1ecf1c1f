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
from stash_core.store.instances import CATALOG_COLUMNS, insert_rows, transaction


@dataclass
class ImportOutcome:
    inserted: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # stored with other values: now the imported ones
    unchanged: list[str] = field(default_factory=list)  # an earlier import of the same values
    kept_user: list[str] = field(default_factory=list)


def write_imported_rows(db_path: Path | str, rows: list[dict[str, Any]]) -> ImportOutcome:
    """Insert or replace the rows (origin 'import'), leaving rows of origin 'user' alone."""
    outcome = ImportOutcome()
    with connect(db_path) as con, transaction(con):
        # every stored row once, in CATALOG_COLUMNS order: its origin (the last) and its values
        stored = {row[0]: row for row in con.execute(
            f"SELECT {', '.join(CATALOG_COLUMNS)} FROM instances").fetchall()}  # fmt: skip
        values = []
        for row in rows:
            name = row["name"]
            if name in stored and stored[name][-1] == "user":
                outcome.kept_user.append(name)
                continue
            written = [row.get(column) for column in CATALOG_COLUMNS[:-1]] + ["import"]
            if name not in stored:
                outcome.inserted.append(name)
            elif _comparable(stored[name]) == _comparable(written):  # imported twice: nothing to update
                outcome.unchanged.append(name)
                continue
            else:
                outcome.replaced.append(name)
            values.append(written)
        insert_rows(con, values, "replace")
    return outcome


def _comparable(values: Any) -> tuple:
    """A row's values as the store gives them back: numbers as floats, a date as its ISO text."""
    return tuple(
        float(value) if isinstance(value, int | float) and not isinstance(value, bool)
        else None if value is None else str(value)[:10] if hasattr(value, "isoformat") else str(value)
        for value in values
    )
