"""The DuckDB store of Stash results: schema, migrations, ingest, queries and export.

Every function opens the database for one operation and closes it again (DuckDB allows one writing process or
many reading ones per file). Every table, view and column carries its meaning as a COMMENT ON
(stash_core/store/schema_docs.py, also rendered as docs/schema.md).
"""

import importlib
from typing import Any

# `export` is also the name of a submodule: importing stash_core.store.export anywhere would bind the module
# to this package's attribute and hide the lazy function, so the function is bound here at once (the module
# needs only duckdb, which every store command loads anyway).
from stash_core.store.export import EXPORT_FORMATS, export

# Each name from its module on first use: a command that only lists runs does not pay for the ingest's
# pandas, numpy and Arrow imports (and `import stash_core.store` itself stays cheap).
_NAMES = {
    "LOCK_TIMEOUT_S": "stash_core.store.connection",
    "connect": "stash_core.store.connection",
    "ingest_files": "stash_core.store.ingest",
    "ingest_result": "stash_core.store.ingest",
    "DB_MIGRATIONS": "stash_core.store.migrations",
    "LATER_COLUMNS": "stash_core.store.migrations",
    "READABLE_FROM_VERSION": "stash_core.store.migrations",
    "breakdown_frame": "stash_core.store.runs",
    "database_summary": "stash_core.store.summary",
    "describe_schema": "stash_core.store.summary",
    "get_run": "stash_core.store.runs",
    "iterations_frame": "stash_core.store.runs",
    "list_runs": "stash_core.store.runs",
    "query_readonly": "stash_core.store.relations",
    "relation_frame": "stash_core.store.relations",
    "resolve_run_id": "stash_core.store.runs",
    "stalls_frame": "stash_core.store.runs",
    "telemetry_frame": "stash_core.store.runs",
    "DB_SCHEMA_VERSION": "stash_core.store.schema",
    "TABLES": "stash_core.store.schema",
    "VIEWS": "stash_core.store.schema",
    "ingest_simulation": "stash_core.store.simulations",
    "simulations_frame": "stash_core.store.simulations",
}


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'stash_core.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DB_MIGRATIONS",
    "DB_SCHEMA_VERSION",
    "EXPORT_FORMATS",
    "LATER_COLUMNS",
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
    "ingest_simulation",
    "iterations_frame",
    "list_runs",
    "query_readonly",
    "relation_frame",
    "resolve_run_id",
    "simulations_frame",
    "stalls_frame",
    "telemetry_frame",
]
