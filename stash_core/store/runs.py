"""Read-only queries over the store; each opens the database, reads and closes it again.

Every function tolerates a database file that does not exist yet (it reads as empty). Times come back as
timezone-aware UTC values.

The frames (pandas) serve the pages; `run_rows` and `run_record` give the same rows as plain Python values for
the CLI, whose `stash runs` and `stash show` then start without pandas: pandas is imported only by the
functions that build frames (imports inside functions, to keep the CLI's start-up short).
"""

from __future__ import annotations

import json
import math
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store.connection import connect
from stash_core.store.schema import DB_SCHEMA_VERSION, TABLES, VIEWS
from stash_core.store.schema_docs import documented_meaning

if TYPE_CHECKING:
    import pandas as pd

_JSON_RUN_COLUMNS = ("spec", "fingerprint", "warnings", "communication")
_STALLS_SQL = (
    f"SELECT * FROM stalls WHERE run_id = ? ORDER BY list_position({list(STALL_NAMES)}, stall)"
    " NULLS LAST, stall"
)
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
            f'CAST("{_quoted(column)}" AS TIMESTAMP) AS "{_quoted(column)}"'
            if column in zoned
            else f'"{_quoted(column)}"'
            for column in relation.columns
        )
        frame = relation.project(select).df()
        for column in zoned:
            frame[column] = frame[column].dt.tz_localize("UTC")
        return frame
    return relation.df()


def resolve_run_id(db_path: Path | str, run_id: str) -> str | None:
    """The stored run id equal to `run_id`, else the only one starting with it, else the only one holding it
    anywhere (e.g. the short suffix "a1b2c3d4" that the pages show); None when none matches.

    UsageError when the text matches several runs (and is none's full id).
    """
    with connect(db_path, read_only=True) as con:
        return _resolve(con, run_id)


def list_runs(db_path: Path | str, limit: int | None = None) -> pd.DataFrame:
    """One row per run from the stall_breakdown view, newest first."""
    sql = "SELECT * FROM stall_breakdown ORDER BY started_at DESC NULLS LAST, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {_count(limit, 'limit')}"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql))


def run_rows(db_path: Path | str, limit: int | None = None) -> list[dict[str, Any]]:
    """list_runs as plain rows (dicts of Python values, None for missing), newest first."""
    sql = "SELECT * FROM stall_breakdown ORDER BY started_at DESC NULLS LAST, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {_count(limit, 'limit')}"
    with connect(db_path, read_only=True) as con:
        return relation_rows(con.sql(sql))


def run_record(db_path: Path | str, run_id: str) -> dict[str, Any] | None:
    """get_run as plain rows: the same dict, read without pandas (for the CLI)."""
    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, run_id)
        if full_id is None:
            return None
        run = relation_rows(con.sql("SELECT * FROM runs WHERE run_id = ?", params=[full_id]))[0]
        phases = relation_rows(
            con.sql("SELECT * FROM phases WHERE run_id = ? ORDER BY phase_index, phase", params=[full_id])
        )
        stalls = relation_rows(con.sql(_STALLS_SQL, params=[full_id]))
    for column in _JSON_RUN_COLUMNS:
        if run.get(column) is not None:
            run[column] = json.loads(run[column])
    run["phases"] = phases
    run["stalls"] = stalls
    return run


def catalog_names(db_path: Path | str) -> set[str]:
    """The instance names the database's catalog holds (empty for a database without one)."""
    with connect(db_path, read_only=True) as con:
        try:
            return {row[0] for row in con.execute("SELECT name FROM instances").fetchall()}
        except duckdb.CatalogException:
            return set()


def relation_rows(relation: duckdb.DuckDBPyRelation) -> list[dict[str, Any]]:
    """A relation as dicts of plain values: TIMESTAMPTZ as UTC-aware datetimes (read as plain TIMESTAMP, the
    session time zone being UTC, since DuckDB's own conversion needs pytz), NaN as None."""
    columns = relation.columns
    zoned = {column for column, kind in zip(columns, relation.types, strict=True) if str(kind) == _TZ_TYPE}
    if zoned and len(set(columns)) == len(columns):
        relation = relation.project(
            ", ".join(
                f'CAST("{_quoted(c)}" AS TIMESTAMP) AS "{_quoted(c)}"' if c in zoned else f'"{_quoted(c)}"'
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


def breakdown_frame(db_path: Path | str, run_ids: list[str] | None = None) -> pd.DataFrame:
    """stall_breakdown rows of the given run ids (all runs when None), newest first."""
    sql = "SELECT * FROM stall_breakdown"
    params: list[Any] = []
    if run_ids is not None:
        sql += " WHERE list_contains(CAST(? AS VARCHAR[]), run_id)"
        params.append(list(run_ids))
    sql += " ORDER BY started_at DESC NULLS LAST, run_id DESC"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql, params=params or None))


def get_run(db_path: Path | str, run_id: str) -> dict[str, Any] | None:
    """One run: its runs row as a dict (spec, fingerprint, warnings parsed) plus "phases" and "stalls" lists.

    `run_id` may be any unique part of a run id (see resolve_run_id). None when no run matches; UsageError
    when the part is ambiguous.
    """
    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, run_id)
        if full_id is None:
            return None
        run = _records(relation_frame(con.sql("SELECT * FROM runs WHERE run_id = ?", params=[full_id])))[0]
        phases = relation_frame(
            con.sql("SELECT * FROM phases WHERE run_id = ? ORDER BY phase_index, phase", params=[full_id])
        )
        stalls = relation_frame(con.sql(_STALLS_SQL, params=[full_id]))
    for column in _JSON_RUN_COLUMNS:
        if run.get(column) is not None:
            run[column] = json.loads(run[column])
    run["phases"] = _records(phases)
    run["stalls"] = _records(stalls)
    return run


def stalls_frame(db_path: Path | str, run_id: str) -> pd.DataFrame | None:
    """The stalls rows of one run (`run_id` any unique part of its id, see resolve_run_id) in stall order,
    with the table's columns and types even when the run has none; None when no run matches."""
    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, run_id)
        if full_id is None:
            return None
        return relation_frame(con.sql(_STALLS_SQL, params=[full_id]))


def iterations_frame(db_path: Path | str, run_id: str, phase: str | None = None) -> pd.DataFrame:
    """Per-iteration samples (slowest rank) of one run, optionally one phase, in phase and iteration order."""
    sql = (
        "SELECT i.* FROM iterations AS i LEFT JOIN phases AS p ON p.run_id = i.run_id AND p.phase = i.phase "
        "WHERE i.run_id = ?"
    )
    params: list[Any] = [run_id]
    if phase is not None:
        sql += " AND i.phase = ?"
        params.append(phase)
    sql += " ORDER BY p.phase_index, i.phase, i.iteration"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql, params=params))


def telemetry_frame(db_path: Path | str, run_id: str, phase: str | None = None) -> pd.DataFrame:
    """Telemetry of one run in long format (run_id, phase, t_s, metric, value), optionally one phase."""
    sql = (
        "SELECT t.* FROM telemetry AS t LEFT JOIN phases AS p ON p.run_id = t.run_id AND p.phase = t.phase "
        "WHERE t.run_id = ?"
    )
    params: list[Any] = [run_id]
    if phase is not None:
        sql += " AND t.phase = ?"
        params.append(phase)
    sql += " ORDER BY p.phase_index, t.phase, t.metric, t.t_s"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql, params=params))


def database_summary(db_path: Path | str) -> dict[str, Any]:
    """Counts of runs (all and completed), models, instances, stored iterations and the newest run's start."""
    path = Path(db_path)
    with connect(path, read_only=True) as con:
        row = con.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM runs WHERE status = 'completed'), "
            "(SELECT count(*) FROM models), (SELECT count(*) FROM instances), "
            "(SELECT count(*) FROM iterations), "
            "(SELECT CAST(max(started_at) AS TIMESTAMP) FROM runs)"
        ).fetchall()[0]
    runs, completed, models, instances, iterations, last_run = row
    return {
        "db_path": str(path),
        "exists": path.exists(),
        "schema_version": DB_SCHEMA_VERSION,
        "runs": runs,
        "completed_runs": completed,
        "models": models,
        "instances": instances,
        "iterations": iterations,
        "last_run_at": None if last_run is None else last_run.replace(tzinfo=UTC),
    }


def describe_schema(db_path: Path | str) -> dict[str, dict[str, Any]]:
    """Every table and view of the store, read from the database's catalog:
    {name: {"kind": "table" | "view", "rows": estimated rows (tables) or None, "about": its comment,
    "columns": [{"column", "type", "meaning": its comment}]}}, in TABLES then VIEWS order.

    The meanings are the database's own COMMENT ON metadata. A database of an older version that a reader
    takes as it is may have none yet (a writer adds them when it migrates); this Stash's descriptions
    stand in for the missing ones.
    """
    names = [*TABLES, *VIEWS]
    with connect(db_path, read_only=True) as con:
        relations = con.execute(
            "SELECT table_name, 'table', estimated_size, comment FROM duckdb_tables() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "UNION ALL SELECT view_name, 'view', NULL, comment FROM duckdb_views() "
            "WHERE database_name = current_database() AND schema_name = 'main'"
        ).fetchall()
        columns = con.execute(
            "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "AND list_contains(?, table_name) ORDER BY table_name, column_index",
            [names],
        ).fetchall()
    found = {name: (kind, rows, comment) for name, kind, rows, comment in relations}
    described: dict[str, dict[str, Any]] = {}
    for name in names:
        kind, rows, comment = found.get(name, ("view" if name in VIEWS else "table", None, None))
        described[name] = {
            "kind": kind,
            "rows": None if rows is None else int(rows),
            "about": comment or documented_meaning(name),
            "columns": [],
        }
    for table, column, data_type, comment in columns:
        meaning = comment or documented_meaning(table, column)
        described[table]["columns"].append({"column": column, "type": data_type, "meaning": meaning})
    return described


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
    limit = None if max_rows is None else _count(max_rows, "max_rows")
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


def _resolve(con: duckdb.DuckDBPyConnection, run_id: str) -> str | None:
    if not run_id:
        raise UsageError("run id must not be empty")
    if con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]:
        return run_id
    # A prefix first (it may be unique where the same text also occurs inside other ids), then any part.
    for condition in ("starts_with(run_id, ?)", "contains(run_id, ?)"):
        matches = [
            row[0]
            for row in con.execute(
                f"SELECT run_id FROM runs WHERE {condition} ORDER BY run_id LIMIT 6", [run_id]
            ).fetchall()
        ]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
            raise UsageError(f"run id {run_id!r} matches several runs ({shown}); give more characters")
    return None


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain Python values: None for missing, datetime for timestamps."""
    from stash_core.cells import plain_records  # pandas: only where a frame is read

    return plain_records(frame, times="datetime")


def _count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{what} must be a whole number >= 0, got {value!r}")
    return value


def _quoted(column: str) -> str:
    return column.replace('"', '""')
