"""DuckDB schema of the Stash store: DDL, the stall_breakdown view and forward migrations.

The schema is a public interface (docs/schema.md documents every column); change it only together with
DB_SCHEMA_VERSION, a migration step in DB_MIGRATIONS and the documentation.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES

DB_SCHEMA_VERSION = 1

TABLES = ("runs", "phases", "iterations", "telemetry", "stalls", "models", "instances", "probes")
VIEWS = ("stall_breakdown",)

_TABLE_DDL = """
CREATE TABLE IF NOT EXISTS schema_meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR
);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    status VARCHAR,
    error VARCHAR,
    model VARCHAR,
    model_kind VARCHAR,
    batch_size INTEGER,
    workers_per_node INTEGER,
    nodes INTEGER,
    instance VARCHAR,
    device VARCHAR,
    backend VARCHAR,
    dataset VARCHAR,
    dataset_images BIGINT,
    iterations_per_epoch BIGINT,
    loader_workers INTEGER,
    param_count BIGINT,
    grad_tensor_count INTEGER,
    layer_count INTEGER,
    grad_bytes BIGINT,
    iteration_s DOUBLE,
    iteration_ci95_s DOUBLE,
    epoch_s DOUBLE,
    reference_phase VARCHAR,
    hostname VARCHAR,
    stash_version VARCHAR,
    schema_version INTEGER,
    spec JSON,
    fingerprint JSON,
    warnings JSON,
    unattributed_s DOUBLE,
    network_reference VARCHAR,
    communication JSON,
    source_file VARCHAR,
    ingested_at TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS phases (
    run_id VARCHAR,
    phase VARCHAR,
    phase_index INTEGER,
    description VARCHAR,
    workers INTEGER,
    nodes INTEGER,
    data VARCHAR,
    status VARCHAR,
    error VARCHAR,
    warmup_iterations INTEGER,
    iterations INTEGER,
    mean_s DOUBLE,
    ci95_s DOUBLE,
    std_s DOUBLE,
    median_s DOUBLE,
    p5_s DOUBLE,
    p95_s DOUBLE,
    data_s DOUBLE,
    forward_s DOUBLE,
    backward_s DOUBLE,
    optimizer_s DOUBLE,
    rank_skew_s DOUBLE,
    resident_fraction_start DOUBLE,
    wall_s DOUBLE,
    telemetry_interval_s DOUBLE,
    PRIMARY KEY (run_id, phase)
);
-- iterations and telemetry can hold tens of millions of rows: no key or index, so bulk inserts stay cheap.
CREATE TABLE IF NOT EXISTS iterations (
    run_id VARCHAR,
    phase VARCHAR,
    iteration INTEGER,
    iteration_s DOUBLE,
    data_s DOUBLE,
    forward_s DOUBLE,
    backward_s DOUBLE,
    optimizer_s DOUBLE,
    slowest_rank INTEGER
);
CREATE TABLE IF NOT EXISTS telemetry (
    run_id VARCHAR,
    phase VARCHAR,
    t_s DOUBLE,
    metric VARCHAR,
    value DOUBLE
);
CREATE TABLE IF NOT EXISTS stalls (
    run_id VARCHAR,
    stall VARCHAR,
    seconds DOUBLE,
    ci95_s DOUBLE,
    share DOUBLE,
    epoch_s DOUBLE,
    status VARCHAR,
    note VARCHAR,
    PRIMARY KEY (run_id, stall)
);
CREATE TABLE IF NOT EXISTS models (
    name VARCHAR PRIMARY KEY,
    kind VARCHAR,
    param_count BIGINT,
    grad_tensor_count INTEGER,
    layer_count INTEGER,
    grad_bytes BIGINT
);
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
);
CREATE TABLE IF NOT EXISTS instances (
    name VARCHAR PRIMARY KEY,
    provider VARCHAR,
    accelerator VARCHAR,
    accelerator_count INTEGER,
    vcpus INTEGER,
    memory_gib DOUBLE,
    network_gbps DOUBLE,
    interconnect VARCHAR,
    on_demand_usd_per_h DOUBLE,
    spot_usd_per_h DOUBLE,
    price_date DATE,
    source VARCHAR
);
"""


def _stall_columns() -> str:
    parts = []
    for stall in STALL_NAMES:
        picked = f"FILTER (WHERE s.stall = '{stall}')"
        parts += [
            f"max(s.seconds) {picked} AS {stall}_s",
            f"max(s.ci95_s) {picked} AS {stall}_ci95_s",
            f"max(coalesce(s.share, s.seconds / nullif(r.iteration_s, 0))) {picked} AS {stall}_share",
            f"max(s.epoch_s) {picked} AS {stall}_epoch_s",
            f"max(s.status) {picked} AS {stall}_status",
        ]
    return ",\n    ".join(parts)


# One row per run: the runs columns people filter on, then the five stalls pivoted out of `stalls`.
STALL_BREAKDOWN_VIEW = f"""
CREATE OR REPLACE VIEW stall_breakdown AS
SELECT
    r.run_id, r.started_at, r.finished_at, r.status, r.error, r.model, r.model_kind, r.batch_size,
    r.workers_per_node, r.nodes, r.instance, r.device, r.backend, r.dataset, r.dataset_images,
    r.iteration_s, r.iteration_ci95_s, r.epoch_s, r.iterations_per_epoch, r.reference_phase,
    {_stall_columns()}
FROM runs AS r
LEFT JOIN stalls AS s ON s.run_id = r.run_id
GROUP BY ALL
"""

# DB_MIGRATIONS[v] upgrades a database at schema version v to v + 1 inside the caller's transaction.
DB_MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {}


def stored_schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The schema version recorded in the open database, or None when it has no Stash schema yet."""
    # Asking directly is much faster than listing the catalog through duckdb_tables().
    # fetchall, never fetchone: DuckDB 2 refuses further relation work while a result is half read.
    try:
        rows = con.execute("SELECT value FROM main.schema_meta WHERE key = 'schema_version'").fetchall()
    except duckdb.CatalogException:
        return None
    return int(rows[0][0]) if rows else None


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table and view of the current version (no-op for the ones that exist)."""
    con.execute(_TABLE_DDL)
    con.execute(STALL_BREAKDOWN_VIEW)
    con.execute(
        "INSERT INTO schema_meta VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [str(DB_SCHEMA_VERSION)],
    )


def ensure_schema(con: duckdb.DuckDBPyConnection, db_label: str) -> None:
    """Create the schema in a new database, or migrate an older one forward (writers only)."""
    version = stored_schema_version(con)
    if version == DB_SCHEMA_VERSION:
        _add_later_additions(con)
        return
    check_readable_version(version, db_label)
    con.execute("BEGIN TRANSACTION")
    try:
        if version is None:
            create_schema(con)
        else:
            while version < DB_SCHEMA_VERSION:
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


# Columns that joined schema version 1 after its first release (added, nothing else changed, so every
# version-1 file and reader stays valid; readers treat them as optional).
LATER_RUN_COLUMNS = {"unattributed_s": "DOUBLE", "network_reference": "VARCHAR", "communication": "JSON"}


def _add_later_additions(con: duckdb.DuckDBPyConnection) -> None:
    """Bring a version-1 database made before the later additions up to date: the `probes` table and the
    runs columns of LATER_RUN_COLUMNS."""
    try:
        con.execute("SELECT 1 FROM main.probes LIMIT 0").fetchall()
    except duckdb.CatalogException:
        con.execute(_PROBES_DDL)
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


_PROBES_DDL = _TABLE_DDL[_TABLE_DDL.index("CREATE TABLE IF NOT EXISTS probes") :].split(";")[0] + ";"
