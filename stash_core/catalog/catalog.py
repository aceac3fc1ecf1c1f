"""The instance catalog: cloud machine shapes and prices in the `instances` table, seeded from instances.csv.

The CSV in the repository is only the starting point. Every new database is created holding its rows (the
store seeds them when it creates the schema, store/catalog_seed.py, which also names the file); users add and
edit rows (`stash instances add/set`, the dashboard). Seeding again (an older database migrated forward)
inserts the CSV rows that are not in the database yet; `stash instances seed` also gives rows still as shipped
(origin 'builtin') this Stash's values and names them; an edited or imported row is never touched, so an
edited price survives every later seed. Readers see the stored rows plus any CSV row not stored yet, so a
database made by an older Stash, or one not created yet, still has a catalog. Every price carries the date
and the source it came from: editing a price without giving them stamps today's date and "user edit". A
refused add or set changes nothing (it is checked before writing, and written in one transaction).

The SQL of the table is in store/instances.py, the one reading of the shipped CSV in store/catalog_seed.py,
the checking of values in fields.py.
"""

from __future__ import annotations

import csv
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from stash_core.catalog.fields import (
    INT_MIN,
    POSITIVE,
    PRICES,
    check_accelerators,
    clean,
    db_value,
    today,
    typed_row,
)
from stash_core.catalog.row_warnings import row_warnings
from stash_core.cells import plain_row
from stash_core.errors import UsageError
from stash_core.store import connect
from stash_core.store.catalog_seed import (
    BUILTIN_CATALOG_CSV,
    builtin_catalog_rows,
    refresh_builtin_rows,
)
from stash_core.store.connection import is_stand_in
from stash_core.store.instances import (
    COLUMNS,
    EDITABLE,
    count_rows,
    insert_row,
    select_rows,
    transaction,
    update_row,
)

CATALOG_CSV = BUILTIN_CATALOG_CSV  # stash_core/catalog/instances.csv


def builtin_instances() -> pd.DataFrame:
    """The catalog shipped in instances.csv (shapes and prices with date and source), one row per instance."""
    try:
        # The store's reading of the file (the one parser): only an empty cell is missing, "none" is a real
        # value of `interconnect`.
        records = [dict(zip(COLUMNS, values, strict=True)) for values in builtin_catalog_rows(CATALOG_CSV)]
    except OSError as exc:
        raise UsageError(f"cannot read the built-in catalog {CATALOG_CSV}: {exc.strerror or exc}") from None
    except (ValueError, csv.Error) as exc:
        raise UsageError(f"the built-in catalog {CATALOG_CSV} holds a bad value: {exc}") from None
    rows = [{**clean(record, partial=False), "origin": "builtin"} for record in records]
    return _frame(rows)


def read_rows(db_path: Path | str, name: str | None = None) -> list[tuple[Any, ...]]:
    """Stored rows (values in COLUMNS order): all of them, or the one named; opens the store read-only.

    A database file that does not exist, or that nothing has written (a DuckDB file without the Stash
    schema), stores nothing: its stand-in's seeded rows are not stored rows.
    """
    if not Path(db_path).exists():
        return []
    with connect(db_path, read_only=True) as con:
        return [] if is_stand_in(con) else select_rows(con, name)


def seed_catalog(db_path: Path | str) -> int:
    """Insert the built-in rows whose name is not stored yet, and refresh stored built-in rows (see
    seed_and_refresh); returns how many were inserted."""
    return seed_and_refresh(db_path)[0]


def seed_and_refresh(db_path: Path | str) -> tuple[int, list[str]]:
    """Insert the built-in rows whose name is not stored yet, and give stored rows still of origin 'builtin'
    the values this Stash ships (an older Stash seeded older prices); returns (how many were inserted, the
    names refreshed).

    Rows a user added or edited (origin 'user') and imported ones ('import') are never changed. A database
    this call creates holds the built-in rows from its creation on: they count as inserted by this call.
    """
    rows = builtin_instances().to_dict(orient="records")
    created = not Path(db_path).exists()
    with connect(db_path) as con, transaction(con):
        inserted = _seed(con, rows)
        refreshed = refresh_builtin_rows(con)
        return (count_rows(con) if created else inserted), refreshed


STALE_WORDS = "built-in instance(s) hold an older Stash's values"  # how a page tells the warning from notes


def is_stale_catalog_warning(text: str) -> bool:
    """Whether a line among an answer's notes is stale_catalog_warning's (a page shows it with its button)."""
    return STALE_WORDS in text


def stale_catalog_warning(db_path: Path | str, rows: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """A line naming the instances of `rows` (catalog rows by name as list_instances gives them, `stored`
    included; every row of the database when None) whose stored row still holds an older Stash's values,
    with the command that gives them this Stash's; "" when there are none.

    Said wherever those rows decide an answer: a newer Stash may ship a price, a GPU link or a network for
    them that the database does not have yet, and `stash instances seed` never runs unasked. Rows already
    read are compared in memory: predict and recommend open the database once."""
    if rows is None:
        rows = {row["name"]: row for row in list_instances(db_path).to_dict(orient="records")}
    shipped = {row["name"]: plain_row(row) for row in builtin_instances().to_dict(orient="records")}
    stale: dict[str, list[str]] = {}  # name: the columns whose values differ from this Stash's
    for name, row in rows.items():
        if bool(row.get("stored")) and row.get("origin") == "builtin" and name in shipped:
            stored = plain_row({key: value for key, value in row.items() if key != "stored"})
            if differ := [column for column in COLUMNS if stored.get(column) != shipped[name].get(column)]:
                stale[name] = differ
    if not stale:
        return ""
    named = ", ".join(f"{name} ({', '.join(differ[:3])}{', ...' if len(differ) > 3 else ''})"
                      for name, differ in list(stale.items())[:5])  # fmt: skip
    named += ", ..." if len(stale) > 5 else ""
    seed = f"stash instances seed --db {shlex.quote(str(db_path))}"
    return (
        f"{len(stale)} {STALE_WORDS}: {named}; `{seed}` gives them "
        "this Stash's values"
    )


def list_instances(db_path: Path | str) -> pd.DataFrame:
    """The catalog: stored rows plus built-in rows not stored yet (column `stored` tells which), by name."""
    rows = [{**_row_from_db(values), "stored": True} for values in read_rows(db_path)]
    names = {row["name"] for row in rows}
    for row in builtin_instances().to_dict(orient="records"):
        if row["name"] not in names:
            rows.append({**typed_row(row), "stored": False})
    frame = _frame(rows, extra=("stored",))
    return frame.sort_values(["provider", "name"], na_position="last", kind="stable").reset_index(drop=True)


def get_instance(db_path: Path | str, name: str) -> dict[str, Any] | None:
    """One catalog row as a dict (stored row first, else the built-in one); None when the name is unknown.
    The name is read as add_instance stores it: without surrounding blanks."""
    name = (name or "").strip()
    if not name:
        return None
    found = read_rows(db_path, name)
    if found:
        return _row_from_db(found[0])
    builtin = builtin_instances()
    match = builtin[builtin["name"] == name]
    return typed_row(match.iloc[0].to_dict()) if len(match) else None


def add_instance(db_path: Path | str, **fields: Any) -> dict[str, Any]:
    """Add a new instance (name required, origin 'user'); UsageError when the name exists or a value is
    invalid.

    Without price_date the row is dated today; without source it says "user entry".
    """
    row = _new_row(fields)
    if get_instance(db_path, row["name"]) is not None:  # refused before the database is opened for writing
        raise _already_there(row["name"])
    _refuse_case_twin(row["name"], list(list_instances(db_path)["name"]))
    with connect(db_path) as con, transaction(con):
        _seed(con, builtin_instances().to_dict(orient="records"))
        _insert_new(con, row)
    return row


def _new_row(fields: dict[str, Any]) -> dict[str, Any]:
    """A checked row for add_instance: origin user, dated today where a price has no date."""
    row = clean({column: fields.get(column) for column in COLUMNS} | _unknown(fields), partial=False)
    row["origin"] = "user"
    if not row["name"]:
        raise UsageError("an instance needs a name")
    check_accelerators(row)
    if row["price_date"] is None and (
        row["on_demand_usd_per_h"] is not None or row["spot_usd_per_h"] is not None
    ):
        row["price_date"] = today()
    if row["source"] is None:
        row["source"] = "user entry"
    return row


def _refuse_case_twin(name: str, names: list[Any]) -> None:
    """UsageError for a name that differs from one of `names` only in case: G5.XLARGE beside g5.xlarge would
    be two rows a reader takes for one."""
    folded = name.casefold()
    twin = next((other for other in names if other != name and str(other).casefold() == folded), None)
    if twin is not None:
        raise UsageError(
            f"instance {name} differs from {twin}, already in the catalog, only in case; change that one "
            "instead"
        )


def _already_there(name: str) -> UsageError:
    return UsageError(f"instance {name} is already in the catalog; change it with `stash instances set`")


def _insert_new(con: Any, row: dict[str, Any]) -> None:
    if count_rows(con, row["name"]):
        raise _already_there(row["name"])
    insert_row(con, [db_value(row[column]) for column in COLUMNS])


def set_instance(db_path: Path | str, name: str, **fields: Any) -> dict[str, Any]:
    """Change fields of a catalog instance; returns the updated row, now of origin 'user' (no later import
    overwrites it).

    UsageError for an unknown instance, an unknown field or an invalid value (negative price, zero vCPUs...).
    A price change without price_date/source stamps today's date and "user edit".
    """
    if not fields:
        raise UsageError("nothing to change: give at least one field")
    name = name.strip()  # as add_instance stored it
    changes = clean(fields, partial=True)
    if get_instance(db_path, name) is None:  # refused before the database is opened for writing
        raise _unknown_instance(name)
    with connect(db_path) as con, transaction(con):
        _seed(con, builtin_instances().to_dict(orient="records"))
        return _update(con, name, changes)


def _unknown_instance(name: str) -> UsageError:
    return UsageError(f"unknown instance {name!r}: see `stash instances list`, or add it")


def _update(con: Any, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    found = select_rows(con, name)
    if not found:
        raise _unknown_instance(name)
    row = _row_from_db(found[0])
    price_changed = any(key in changes and changes[key] != row[key] for key in PRICES)
    row.update(changes)
    check_accelerators(row)
    priced = any(row[key] is not None for key in PRICES)
    if price_changed and "price_date" not in changes:
        row["price_date"] = today() if priced else None  # no price left: no date of one
    if price_changed and "source" not in changes:
        row["source"] = "user edit"
    if price_changed and "region" not in changes:
        row["region"] = None  # the region was the old price's; the user's own is for the region they give
    row["origin"] = "user"
    update_row(con, name, [row[column] for column in EDITABLE])
    return row


class CatalogEdits(NamedTuple):
    changed: list[str]  # names of the instances changed
    added: list[str]  # names of the instances added
    warnings: list[str]  # what the rows stored as given may get wrong later (row_warnings)


def apply_catalog_edits(db_path: Path | str, before: pd.DataFrame, after: pd.DataFrame) -> CatalogEdits:
    """Store the differences between two versions of the catalog table (e.g. from a dashboard editor).

    Rows are matched by their index: a row of `after` whose index is in `before` is that instance (its
    changed fields are set; its name cannot change, so a retyped name never overwrites another instance),
    any other row with a name is added. Every value and name is checked first and all is written in one
    transaction, so a bad one (UsageError, naming the instance) stores nothing. Returns the names changed
    and added, and the warnings of the rows as stored (a $0 price, an unknown GPU, ...), of the fields given.
    """
    edits: list[tuple[str, dict[str, Any]]] = []
    additions: list[dict[str, Any]] = []
    for label, raw in zip(after.index, after.to_dict(orient="records"), strict=True):
        row = typed_row({column: raw.get(column) for column in COLUMNS})
        if label not in before.index:
            if any(value is not None for value in row.values()):
                additions.append(_added(row))
            continue
        old = typed_row(before.loc[label].to_dict())
        name = old["name"]
        if row["name"] != name:
            raise UsageError(
                f"instance {name}: a name cannot be changed here (add a row for {row['name']!r} instead)"
                if row["name"]
                else f"instance {name}: its name cannot be emptied"
            )
        try:
            # Compare values read alike, so that a date shown as text or 8 shown as 8.0 is no change; only
            # a changed value is checked as new (a row an older version stored blocks no other edit).
            previous = clean({key: old.get(key) for key in EDITABLE}, partial=True, stored=True)
            shown = clean({key: row[key] for key in EDITABLE}, partial=True, stored=True)
            changed = clean({key: row[key] for key in EDITABLE if shown[key] != previous[key]}, partial=True)
        except UsageError as exc:
            raise UsageError(f"instance {name}: {exc}") from None
        if changed:
            edits.append((name, changed))
    names = [row["name"] for row in additions]
    shown = set(before["name"])
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"instance {name}: added twice (one row a name)")
        if name in shown or get_instance(db_path, name) is not None:
            raise _already_there(name)
        _refuse_case_twin(name, [*shown, *names])
    if edits or additions:
        with connect(db_path) as con, transaction(con):
            _seed(con, builtin_instances().to_dict(orient="records"))
            for name, fields in edits:
                _update(con, name, fields)
            for row in additions:
                _insert_new(con, row)
    given = [(name, set(fields)) for name, fields in edits] + [(name, None) for name in names]  # None: all
    warnings = [said for name, fields in given for said in row_warnings(get_instance(db_path, name), fields)]
    return CatalogEdits([name for name, _ in edits], names, warnings)


def _added(row: dict[str, Any]) -> dict[str, Any]:
    """A new row of an editor, checked (its name first: a row with values and no name is refused)."""
    if not row["name"]:
        raise UsageError("a new row needs a name")
    try:
        return _new_row({key: value for key, value in row.items() if value is not None})
    except UsageError as exc:
        raise UsageError(f"instance {row['name']}: {exc}") from None


def _seed(con: Any, rows: list[dict[str, Any]]) -> int:
    before = count_rows(con)
    for row in rows:
        insert_row(con, [db_value(row.get(column)) for column in COLUMNS], keep_stored=True)
    return count_rows(con) - before


def _unknown(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if key not in COLUMNS}


def _row_from_db(values: tuple[Any, ...]) -> dict[str, Any]:
    return typed_row(dict(zip(COLUMNS, values, strict=True)))


def _frame(rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*COLUMNS, *extra])
    for column in INT_MIN:
        frame[column] = frame[column].astype("Int64")
    for column in (*POSITIVE, *PRICES):
        frame[column] = frame[column].astype("float64")
    return frame
