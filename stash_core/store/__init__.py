"""The DuckDB store of Stash results: schema, ingest, queries and export.

Every function opens the database for one operation and closes it again (DuckDB allows one writing process or
many reading ones per file). The schema is documented in docs/schema.md.
"""

from stash_core.store.connection import DEFAULT_DB_PATH, LOCK_TIMEOUT_S, connect
from stash_core.store.export import EXPORT_FORMATS, export
from stash_core.store.ingest import ingest_files, ingest_result
from stash_core.store.queries import (
    breakdown_frame,
    database_summary,
    get_run,
    iterations_frame,
    list_runs,
    query_readonly,
    relation_frame,
    resolve_run_id,
    telemetry_frame,
)
from stash_core.store.schema import DB_SCHEMA_VERSION, LATER_RUN_COLUMNS, TABLES, VIEWS

__all__ = [
    "DB_SCHEMA_VERSION",
    "DEFAULT_DB_PATH",
    "EXPORT_FORMATS",
    "LATER_RUN_COLUMNS",
    "LOCK_TIMEOUT_S",
    "TABLES",
    "VIEWS",
    "breakdown_frame",
    "connect",
    "database_summary",
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
