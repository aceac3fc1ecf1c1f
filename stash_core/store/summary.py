"""What a database holds: its counts (runs, models, instances, iterations, the newest run), the instance
names of its catalog, and every table and view with its columns and their meanings."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

import duckdb

from stash_core.store.connection import connect
from stash_core.store.schema import DB_SCHEMA_VERSION, TABLES, VIEWS
from stash_core.store.schema_docs import documented_meaning


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


def catalog_names(db_path: Path | str) -> set[str]:
    """The instance names the database's catalog holds (empty for a database without one)."""
    with connect(db_path, read_only=True) as con:
        try:
            return {row[0] for row in con.execute("SELECT name FROM instances").fetchall()}
        except duckdb.CatalogException:
            return set()


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
