"""Forward migrations of the store: DB_MIGRATIONS[v] upgrades a database at schema version v to v + 1.

A writer that opens a database of an older version runs every step from its version up to DB_SCHEMA_VERSION
and then create_schema (new tables, the view, the comments, the recorded version), all in one transaction:
either the whole migration is stored or nothing. A step describes the change as it was made in that version,
in its own SQL, so that it stays valid whatever later versions change. VERSION_CHANGES says what each version
brought (docs/schema.md shows it).
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from stash_core.errors import UsageError
from stash_core.store.schema import DB_SCHEMA_VERSION, create_schema
from stash_core.store.schema_docs import COMMENTS_DIGEST

# Readers take a database of this version or newer as it is, without migrating it: every step since only
# added tables and columns, which readers treat as optional. A step that changes or removes something raises
# it to that step's version.
READABLE_FROM_VERSION = 1

# The runs columns schema version 2 added: databases and exports made before it lack them.
LATER_RUN_COLUMNS = {"unattributed_s": "DOUBLE", "network_reference": "VARCHAR", "communication": "JSON"}

_V2_PROBES_DDL = """
CREATE TABLE IF NOT EXISTS probes (
    probe_id VARCHAR,
    run_id VARCHAR,
    phase VARCHAR,
    started_at TIMESTAMPTZ,
    hostname VARCHAR,
    instance VARCHAR,
    backend VARCHAR,
    device VARCHAR,
    world_size INTEGER,
    nodes INTEGER,
    workers_per_node INTEGER,
    kind VARCHAR,
    scope VARCHAR,
    size_bytes BIGINT,
    repetitions INTEGER,
    time_s DOUBLE,
    time_min_s DOUBLE,
    algbw_gbps DOUBLE,
    busbw_gbps DOUBLE,
    link_gbps DOUBLE
)
"""


def _v1_to_v2(con: duckdb.DuckDBPyConnection) -> None:
    """Add the probes table and the later runs columns where an older Stash has not added them yet."""
    con.execute(_V2_PROBES_DDL)
    present = {
        row[0]
        for row in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' "
            "AND table_name = 'runs'"
        ).fetchall()
    }
    for column, sql_type in LATER_RUN_COLUMNS.items():
        if column not in present:
            con.execute(f"ALTER TABLE runs ADD COLUMN {column} {sql_type}")


DB_MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {1: _v1_to_v2}

VERSION_CHANGES = {
    1: "the first layout",
    2: "the `probes` table and the `runs` columns `unattributed_s`, `network_reference` and `communication` "
    "(NULL for runs stored before); a comment on every table, view and column. Earlier Stash releases added "
    "the table and the columns to version-1 databases in place; the step adds whichever is missing",
}


def stored_meta(con: duckdb.DuckDBPyConnection) -> dict[str, str] | None:
    """The schema_meta settings of the open database, or None when it has no Stash schema yet."""
    # Asking directly is much faster than listing the catalog through duckdb_tables().
    # fetchall, never fetchone: DuckDB 2 refuses further relation work while a result is half read.
    try:
        rows = con.execute("SELECT key, value FROM main.schema_meta").fetchall()
    except duckdb.CatalogException:
        return None
    return dict(rows)


def stored_schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The schema version recorded in the open database, or None when it has no Stash schema yet."""
    meta = stored_meta(con)
    return None if meta is None or "schema_version" not in meta else int(meta["schema_version"])


def ensure_schema(con: duckdb.DuckDBPyConnection, db_label: str) -> None:
    """Create the schema in a new database, or migrate an older one forward (writers only).

    A database of the current version whose comments differ from this Stash's gets them re-applied.
    """
    meta = stored_meta(con) or {}
    version = int(meta["schema_version"]) if "schema_version" in meta else None
    if version == DB_SCHEMA_VERSION and meta.get("comments_digest") == COMMENTS_DIGEST:
        return
    check_readable_version(version, db_label)
    con.execute("BEGIN TRANSACTION")
    try:
        while version is not None and version < DB_SCHEMA_VERSION:
            if version not in DB_MIGRATIONS:
                raise UsageError(f"database {db_label} has schema_version {version}, which no Stash wrote")
            DB_MIGRATIONS[version](con)
            version += 1
        create_schema(con)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def check_readable_version(version: int | None, db_label: str) -> None:
    """Refuse a database written by a newer Stash."""
    if version is not None and version > DB_SCHEMA_VERSION:
        raise UsageError(
            f"database {db_label} has schema_version {version}; this Stash reads up to {DB_SCHEMA_VERSION}"
            " - upgrade Stash"
        )


def check_reader_can_take(version: int, db_label: str) -> None:
    """Refuse to read, without migrating, a database older than READABLE_FROM_VERSION or newer than this
    Stash."""
    check_readable_version(version, db_label)
    if version < READABLE_FROM_VERSION:
        raise UsageError(
            f"database {db_label} has schema_version {version}; run a writing command (e.g. ingest) once"
            f" to migrate it to {DB_SCHEMA_VERSION}"
        )
