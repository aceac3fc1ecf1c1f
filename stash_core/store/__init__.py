"""The DuckDB store of Stash results: schema, migrations, ingest, queries and export.

Every function opens the database for one operation and closes it again (DuckDB allows one writing process or
many reading ones per file). Every table, view and column carries its meaning as a COMMENT ON
(stash_core/store/schema_docs.py, also rendered as docs/schema.md).
"""

from stash_core.store.connection import DEFAULT_DB_PATH, LOCK_TIMEOUT_S, connect
from stash_core.store.export import EXPORT_FORMATS, export
from stash_core.store.ingest import ingest_files, ingest_result
from stash_core.store.migrations import DB_MIGRATIONS, LATER_RUN_COLUMNS, READABLE_FROM_VERSION
from stash_core.store.queries import (
    breakdown_frame,
    database_summary,
    describe_schema,
    get_run,
    iterations_frame,
    list_runs,
    query_readonly,
    relation_frame,
    resolve_run_id,
    telemetry_frame,
)
from stash_core.store.schema import DB_SCHEMA_VERSION, TABLES, VIEWS

__all__ = [
    "DB_MIGRATIONS",
    "DB_SCHEMA_VERSION",
    "DEFAULT_DB_PATH",
    "EXPORT_FORMATS",
    "LATER_RUN_COLUMNS",
    "LOCK_TIMEOUT_S",
    "READABLE_FROM_VERSION",
    "TABLES",
    "VIEWS",
    "breakdown_frame",
    "connect",
    "database_summary",
    "describe_schema",
    "export",
    "get_run",
    "ingest_files",
    "ingest_result",
    "iterations_frame",
    "list_runs",
    "query_readonly",
    "relation_frame",
    "resolve_run_id",
    "telemetry_frame",
]
