"""The instance catalog: cloud machine shapes and prices in the `instances` table, seeded from instances.csv.

The CSV in the repository is only the starting point. Users add and edit rows (`stash instances add/set`, the
dashboard); seeding inserts the CSV rows that are not in the database yet and never touches a stored row, so
an edited price survives every later seed. Readers see the stored rows plus any CSV row not stored yet, so a
fresh (or read-only) database still has a catalog. Every price carries the date and the source it came from:
editing a price without giving them stamps today's date and "user edit".
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.errors import UsageError
from stash_core.store import connect

CATALOG_CSV = Path(__file__).with_name("instances.csv")

COLUMNS = (
    "name", "provider", "accelerator", "accelerator_count", "vcpus", "memory_gib", "network_gbps",
    "interconnect", "on_demand_usd_per_h", "spot_usd_per_h", "price_date", "source",
)  # fmt: skip
EDITABLE = COLUMNS[1:]
_TEXT = ("name", "provider", "accelerator", "interconnect", "source")
_INT_MIN = {"accelerator_count": 0, "vcpus": 1}
_POSITIVE = ("memory_gib", "network_gbps")
_PRICES = ("on_demand_usd_per_h", "spot_usd_per_h")


def builtin_instances() -> pd.DataFrame:
    """The catalog shipped in instances.csv (shapes and prices with date and source), one row per instance."""
    try:
        # Only an empty cell is missing: "none" is a real value of `interconnect`.
        frame = pd.read_csv(CATALOG_CSV, dtype=str, keep_default_na=False, na_values=[""])
    except OSError as exc:
        raise UsageError(f"cannot read the built-in catalog {CATALOG_CSV}: {exc.strerror or exc}") from None
    rows = [_clean(record, partial=False) for record in frame.to_dict(orient="records")]
    return _frame(rows)


def seed_catalog(db_path: Path | str) -> int:
    """Insert the built-in rows whose name is not stored yet; returns how many were inserted.

    Stored rows are never changed, so user edits survive.
    """
    rows = builtin_instances().to_dict(orient="records")
    with connect(db_path) as con:
        return _seed(con, rows)


def list_instances(db_path: Path | str) -> pd.DataFrame:
    """The catalog: stored rows plus built-in rows not stored yet (column `stored` tells which), by name."""
    with connect(db_path, read_only=True) as con:
        stored = con.execute(f"SELECT {', '.join(COLUMNS)} FROM instances").fetchall()
    rows = [_row_from_db(values) for values in stored]
    names = {row["name"] for row in rows}
    for row in rows:
        row["stored"] = True
    for row in builtin_instances().to_dict(orient="records"):
        if row["name"] not in names:
            rows.append({**_none_for_nan(row), "stored": False})
    frame = _frame(rows, extra=("stored",))
    return frame.sort_values(["provider", "name"], na_position="last", kind="stable").reset_index(drop=True)


def get_instance(db_path: Path | str, name: str) -> dict[str, Any] | None:
    """One catalog row as a dict (stored row first, else the built-in one); None when the name is unknown."""
    if not name:
        return None
    with connect(db_path, read_only=True) as con:
        found = con.execute(f"SELECT {', '.join(COLUMNS)} FROM instances WHERE name = ?", [name]).fetchall()
    if found:
        return _row_from_db(found[0])
    builtin = builtin_instances()
    match = builtin[builtin["name"] == name]
    return _none_for_nan(match.iloc[0].to_dict()) if len(match) else None


def add_instance(db_path: Path | str, **fields: Any) -> dict[str, Any]:
    """Add a new instance (name required); UsageError when the name exists or a value is invalid.

    Without price_date the row is dated today; without source it says "user entry".
    """
    row = _clean({column: fields.get(column) for column in COLUMNS} | _unknown(fields), partial=False)
    if not row["name"]:
        raise UsageError("an instance needs a name")
    if row["price_date"] is None and (
        row["on_demand_usd_per_h"] is not None or row["spot_usd_per_h"] is not None
    ):
        row["price_date"] = _today()
    if row["source"] is None:
        row["source"] = "user entry"
    with connect(db_path) as con:
        _seed(con, builtin_instances().to_dict(orient="records"))
        if con.execute("SELECT count(*) FROM instances WHERE name = ?", [row["name"]]).fetchall()[0][0]:
            raise UsageError(
                f"instance {row['name']} is already in the catalog; change it with `stash instances set`"
            )
        _insert(con, row)
    return row


def set_instance(db_path: Path | str, name: str, **fields: Any) -> dict[str, Any]:
    """Change fields of a catalog instance; returns the updated row.

    UsageError for an unknown instance, an unknown field or an invalid value (negative price, zero vCPUs...).
    A price change without price_date/source stamps today's date and "user edit".
    """
    if not fields:
        raise UsageError("nothing to change: give at least one field")
    changes = _clean(fields, partial=True)
    with connect(db_path) as con:
        _seed(con, builtin_instances().to_dict(orient="records"))
        found = con.execute(f"SELECT {', '.join(COLUMNS)} FROM instances WHERE name = ?", [name]).fetchall()
        if not found:
            raise UsageError(f"unknown instance {name!r}: see `stash instances list`, or add it")
        row = _row_from_db(found[0])
        price_changed = any(key in changes and changes[key] != row[key] for key in _PRICES)
        row.update(changes)
        if price_changed and "price_date" not in changes:
            row["price_date"] = _today()
        if price_changed and "source" not in changes:
            row["source"] = "user edit"
        assignments = ", ".join(f"{column} = ?" for column in EDITABLE)
        con.execute(
            f"UPDATE instances SET {assignments} WHERE name = ?",
            [row[column] for column in EDITABLE] + [name],
        )
    return row


def apply_catalog_edits(
    db_path: Path | str, before: pd.DataFrame, after: pd.DataFrame
) -> tuple[list[str], list[str]]:
    """Store the differences between two versions of the catalog table (e.g. from a dashboard editor).

    Rows whose name was in `before` get set_instance with the changed fields; new names get add_instance.
    Every value is checked first, so a bad one (UsageError, naming the instance) stores nothing.
    Returns (names changed, names added).
    """
    old = {row["name"]: _none_for_nan(row) for row in before.to_dict(orient="records")}
    edits: list[tuple[str, dict[str, Any]]] = []
    additions: list[dict[str, Any]] = []
    for raw in after.to_dict(orient="records"):
        row = _none_for_nan({column: raw.get(column) for column in COLUMNS})
        if not row["name"]:
            continue
        try:
            if row["name"] not in old:
                additions.append(
                    _clean({key: value for key, value in row.items() if value is not None}, True)
                )
                continue
            # Compare cleaned values, so that a date shown as text or 8 shown as 8.0 is no change.
            previous = _clean({key: old[row["name"]].get(key) for key in EDITABLE}, partial=True)
            current = _clean({key: row[key] for key in EDITABLE}, partial=True)
            changed = {key: value for key, value in current.items() if value != previous[key]}
            if changed:
                edits.append((row["name"], changed))
        except UsageError as exc:
            raise UsageError(f"instance {row['name']}: {exc}") from None
    for name, fields in edits:
        set_instance(db_path, name, **fields)
    for fields in additions:
        add_instance(db_path, **fields)
    return [name for name, _ in edits], [fields["name"] for fields in additions]


def _seed(con: Any, rows: list[dict[str, Any]]) -> int:
    before = con.execute("SELECT count(*) FROM instances").fetchall()[0][0]
    for row in rows:
        placeholders = ", ".join("?" for _ in COLUMNS)
        con.execute(
            f"INSERT INTO instances ({', '.join(COLUMNS)}) VALUES ({placeholders}) "
            "ON CONFLICT (name) DO NOTHING",
            [_db_value(row.get(column)) for column in COLUMNS],
        )
    return con.execute("SELECT count(*) FROM instances").fetchall()[0][0] - before


def _insert(con: Any, row: dict[str, Any]) -> None:
    placeholders = ", ".join("?" for _ in COLUMNS)
    con.execute(
        f"INSERT INTO instances ({', '.join(COLUMNS)}) VALUES ({placeholders})",
        [_db_value(row[column]) for column in COLUMNS],
    )


def _unknown(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if key not in COLUMNS}


def _clean(fields: dict[str, Any], partial: bool) -> dict[str, Any]:
    """Validated, typed values; UsageError (one line) for an unknown field or a bad value."""
    unknown = [key for key in fields if key not in COLUMNS]
    if unknown:
        raise UsageError(f"unknown instance field {', '.join(unknown)}; fields are {', '.join(COLUMNS)}")
    cleaned: dict[str, Any] = {} if partial else {column: None for column in COLUMNS}
    for key, value in fields.items():
        if key in _TEXT:
            cleaned[key] = None if _nan(value) else (str(value).strip() or None)
            continue
        value = None if _missing(value) else value
        if key in _INT_MIN:
            cleaned[key] = _whole(key, value, _INT_MIN[key])
        elif key in _POSITIVE:
            cleaned[key] = _number(key, value, strictly_positive=True)
        elif key in _PRICES:
            cleaned[key] = _number(key, value, strictly_positive=False)
        elif key == "price_date":
            cleaned[key] = _date(value)
    return cleaned


def _nan(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _missing(value: Any) -> bool:
    """No value: None, NaN, or (for numbers and dates typed on a command line) "", "none", "null", "-"."""
    return _nan(value) or (isinstance(value, str) and value.strip().lower() in ("", "none", "null", "-"))


def _whole(key: str, value: Any, minimum: int) -> int | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{key} must be a whole number, got {value!r}") from None
    if isinstance(value, bool) or not number.is_integer() or number < minimum:
        raise UsageError(f"{key} must be a whole number >= {minimum}, got {value!r}")
    return int(number)


def _number(key: str, value: Any, strictly_positive: bool) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{key} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise UsageError(f"{key} must be a finite number, got {value!r}")
    if strictly_positive and number <= 0:
        raise UsageError(f"{key} must be positive, got {value!r}")
    if number < 0:
        raise UsageError(f"{key} must not be negative, got {value!r}")
    return number


def _date(value: Any) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, pd.Timestamp):
        return value.date()
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise UsageError(f"price_date must be a date like 2025-01-31, got {value!r}") from None


def _today() -> date:
    return datetime.now(UTC).date()


def _db_value(value: Any) -> Any:
    return None if _nan(value) else value


def _row_from_db(values: tuple[Any, ...]) -> dict[str, Any]:
    return _none_for_nan(dict(zip(COLUMNS, values, strict=True)))


def _none_for_nan(row: dict[str, Any]) -> dict[str, Any]:
    clean = {}
    for key, value in row.items():
        if key in _INT_MIN and not _nan(value):
            value = int(value)
        elif key == "price_date" and isinstance(value, pd.Timestamp):
            value = value.date()
        clean[key] = None if _nan(value) else value
    return clean


def _frame(rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*COLUMNS, *extra])
    for column in _INT_MIN:
        frame[column] = frame[column].astype("Int64")
    for column in (*_POSITIVE, *_PRICES):
        frame[column] = frame[column].astype("float64")
    return frame
