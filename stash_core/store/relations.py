"""A read of the store as the rest of Stash takes it: a relation as a DataFrame (relation_frame) or as plain
rows (relation_rows), TIMESTAMPTZ as UTC-aware times, NaN as None; and query_readonly, one read-only query
whose rows come back as a frame (the store's modules that read with SQL of their own use it)."""

from __future__ import annotations

import math
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from stash_core.errors import UsageError
from stash_core.store.connection import connect
from stash_core.store.sql_names import quoted_name

if TYPE_CHECKING:
    import pandas as pd

_TZ_TYPE = "TIMESTAMP WITH TIME ZONE"


def relation_frame(relation: duckdb.DuckDBPyRelation, max_rows: int | None = None) -> pd.DataFrame:
    """A relation as a DataFrame; TIMESTAMPTZ columns become UTC-aware datetimes.

    DuckDB's own conversion of TIMESTAMPTZ to pandas warns under pandas 3 (and needs pytz for tuples), so
    those columns are cast to plain TIMESTAMP (the session time zone is UTC) and localised to UTC here.
    """
    if max_rows is not None:
        relation = relation.limit(max_rows)
    kinds = zip(relation.columns, relation.types, strict=True)
    zoned = [column for column, kind in kinds if str(kind) == _TZ_TYPE]
    if zoned and len(set(relation.columns)) == len(relation.columns):
        select = ", ".join(
            f"CAST({quoted_name(column)} AS TIMESTAMP) AS {quoted_name(column)}"
            if column in zoned
            else quoted_name(column)
            for column in relation.columns
        )
        frame = relation.project(select).df()
        for column in zoned:
            frame[column] = frame[column].dt.tz_localize("UTC")
        return frame
    return relation.df()


def relation_rows(relation: duckdb.DuckDBPyRelation) -> list[dict[str, Any]]:
    """A relation as dicts of plain values: TIMESTAMPTZ as UTC-aware datetimes (read as plain TIMESTAMP, the
    session time zone being UTC, since DuckDB's own conversion needs pytz), NaN as None."""
    columns = relation.columns
    zoned = {column for column, kind in zip(columns, relation.types, strict=True) if str(kind) == _TZ_TYPE}
    if zoned and len(set(columns)) == len(columns):
        relation = relation.project(
            ", ".join(
                f"CAST({quoted_name(c)} AS TIMESTAMP) AS {quoted_name(c)}" if c in zoned else quoted_name(c)
                for c in columns
            )
        )
    else:
        zoned = set()
    rows = []
    for values in relation.fetchall():
        row = {}
        for column, value in zip(columns, values, strict=True):
            if column in zoned and value is not None:
                value = value.replace(tzinfo=UTC)
            elif isinstance(value, float) and math.isnan(value):
                value = None
            row[column] = value
        rows.append(row)
    return rows


def query_readonly(
    db_path: Path | str,
    sql: str,
    params: list[Any] | dict[str, Any] | None = None,
    max_rows: int | None = None,
) -> pd.DataFrame:
    """Run one read-only SQL query and return at most `max_rows` rows.

    The database is opened read-only, so statements that write fail. Any SQL error is a UsageError with
    DuckDB's first line. When rows were cut off, `frame.attrs["truncated"]` is True.
    """
    limit = None if max_rows is None else row_limit(max_rows, "max_rows")
    with connect(db_path, read_only=True) as con:
        try:
            relation = con.sql(sql, params=params)
            if relation is None:
                import pandas as pd

                return pd.DataFrame()
            frame = relation_frame(relation, None if limit is None else limit + 1)
        except duckdb.Error as exc:
            text = str(exc).strip() or type(exc).__name__
            raise UsageError(f"query failed: {text.splitlines()[0]}") from None
    truncated = limit is not None and len(frame) > limit
    if truncated:
        frame = frame.iloc[:limit].reset_index(drop=True)
    frame.attrs["truncated"] = truncated
    return frame


def row_limit(value: int, what: str) -> int:
    """`value` as a LIMIT (a whole number >= 0); UsageError naming `what` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{what} must be a whole number >= 0, got {value!r}")
    return value
