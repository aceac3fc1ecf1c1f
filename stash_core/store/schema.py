"""DuckDB schema of the Stash store: the tables and the stall_breakdown view of the current version.

The schema is a public interface: change it only together with DB_SCHEMA_VERSION, a numbered step in
stash_core/store/migrations.py and the descriptions in stash_core/store/schema_docs.py (which become the
COMMENT ON metadata of every table, view and column, and docs/schema.md).
"""

from __future__ import annotations

import functools
import hashlib

import duckdb

from stash_core.analysis.stalls import ROUNDING_SHARE
from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store.catalog_seed import seed_builtin_catalog
from stash_core.store.schema_docs import COMMENTS_DIGEST, comment_script, described_comments

DB_SCHEMA_VERSION = 8

TABLES = (
    "runs", "phases", "iterations", "telemetry", "stalls", "models", "instances", "probes", "simulations",
)  # fmt: skip
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
    unattributed_ci95_s DOUBLE,
    network_reference VARCHAR,
    communication JSON,
    hosts JSON,
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
    raw_s DOUBLE,
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
    source VARCHAR,
    region VARCHAR,
    origin VARCHAR
);
CREATE TABLE IF NOT EXISTS simulations (
    simulation_id VARCHAR,
    policy VARCHAR,
    created_at TIMESTAMPTZ,
    trace VARCHAR,
    trace_format VARCHAR,
    jobs INTEGER,
    switches INTEGER,
    nodes_per_switch INTEGER,
    gpus_per_node INTEGER,
    cluster_gpus INTEGER,
    fabric JSON,
    settings JSON,
    tuning VARCHAR,
    makespan_s DOUBLE,
    avg_jct_s DOUBLE,
    p95_jct_s DOUBLE,
    avg_queue_s DOUBLE,
    comm_overhead_s DOUBLE,
    preemptions INTEGER,
    spread_jobs INTEGER,
    gpu_busy_share DOUBLE,
    jct_cdf JSON,
    timeline JSON,
    stash_version VARCHAR,
    source_file VARCHAR,
    ingested_at TIMESTAMPTZ,
    PRIMARY KEY (simulation_id, policy)
);
"""


# A stall row whose figure is no valid one (analysis/stalls.stall_fault: not a finite number, or a 'measured'
# one below 0, as a hand edit leaves it) shows no figure here and its time stays in the remainder, as
# `stash show` and the Python API have it.
VALID_FIGURE = "isfinite(s.seconds) AND NOT (s.status = 'measured' AND s.seconds < 0)"


def _stall_columns() -> str:
    parts = []
    for stall in STALL_NAMES:
        picked = f"FILTER (WHERE s.stall = '{stall}')"
        valid = f"FILTER (WHERE s.stall = '{stall}' AND {VALID_FIGURE})"
        parts += [
            f"max(s.seconds) {valid} AS {stall}_s",
            f"max(s.ci95_s) {valid} AS {stall}_ci95_s",
            # from the seconds (as ingest stores them): a stall edited by hand reads alike in every column
            f"max(s.seconds) {valid} / nullif(any_value(r.iteration_s), 0) AS {stall}_share",
            f"max(s.seconds) {valid} * any_value(r.iterations_per_epoch) AS {stall}_epoch_s",
            # the interval per epoch: ci95_s times the iterations of an epoch, as analysis/epochs.per_epoch
            f"max(s.ci95_s) {valid} * any_value(r.iterations_per_epoch) AS {stall}_epoch_ci95_s",
            f"max(s.status) {picked} AS {stall}_status",
            # as analysis/stalls.stall_resolved: a figure whose 95% interval is no wider than it
            f"CASE WHEN max(s.seconds) {valid} IS NULL THEN NULL "
            f"WHEN max(s.status) {picked} IN ('clamped_zero', 'within_noise') THEN false "
            f"ELSE coalesce(isfinite(max(s.ci95_s) {valid}) "
            f"AND abs(max(s.seconds) {valid}) >= max(s.ci95_s) {valid}, false) END "
            f"AS {stall}_resolved",
        ]
    return ",\n    ".join(parts)


def _remainder_columns() -> str:
    """The signed remainder: the iteration time minus the five stalls (NULL stalls count as 0), so that the
    stalls and the remainder add up to iteration_s in every row; its interval is the one runs stores.
    (Run columns go through any_value, one value per run: GROUP BY ALL takes no mixed expressions.)"""
    named = ", ".join(f"'{stall}'" for stall in STALL_NAMES)
    iteration = "any_value(r.iteration_s)"
    named_valid = f"s.stall IN ({named}) AND {VALID_FIGURE}"
    raw = f"({iteration} - coalesce(sum(s.seconds) FILTER (WHERE {named_valid}), 0))"
    # floating-point dust of the subtraction is 0, as remainder_of makes it (the result file and `stash show`)
    remainder = f"(CASE WHEN abs({raw}) <= {ROUNDING_SHARE!r} * abs({iteration}) THEN 0.0 ELSE {raw} END)"
    return ",\n    ".join(
        [
            f"{remainder} AS unattributed_s",
            "any_value(r.unattributed_ci95_s) AS unattributed_ci95_s",
            f"{remainder} / nullif({iteration}, 0) AS unattributed_share",
            f"{remainder} * any_value(r.iterations_per_epoch) AS unattributed_epoch_s",
            "any_value(r.unattributed_ci95_s * r.iterations_per_epoch) AS unattributed_epoch_ci95_s",
        ]
    )


# One row per run: the runs columns people filter on, the five stalls pivoted out of `stalls`, then the
# signed remainder.
STALL_BREAKDOWN_VIEW = f"""
CREATE OR REPLACE VIEW stall_breakdown AS
SELECT
    r.run_id, r.started_at, r.finished_at, r.status, r.error, r.model, r.model_kind, r.batch_size,
    r.workers_per_node, r.nodes, r.instance, r.device, r.backend, r.dataset, r.dataset_images,
    r.iteration_s, r.iteration_ci95_s, r.epoch_s, r.iterations_per_epoch, r.reference_phase,
    r.iteration_ci95_s * r.iterations_per_epoch AS epoch_ci95_s,
    {_stall_columns()},
    {_remainder_columns()}
FROM runs AS r
LEFT JOIN stalls AS s ON s.run_id = r.run_id
GROUP BY ALL
"""


# Recorded in schema_meta as `comments_digest`: the comments and the view's definition, so that a writer
# re-applies both where this Stash's differ from the ones stored (a view changed within a schema version).
SCHEMA_DIGEST = hashlib.sha256((COMMENTS_DIGEST + STALL_BREAKDOWN_VIEW).encode("utf-8")).hexdigest()[:16]


Columns = dict[str, dict[str, str]]  # {table or view: {column: its type}}


def missing_objects(con: duckdb.DuckDBPyConnection, present: Columns | None = None) -> list[str]:
    """The tables and views of the current schema that the database lacks (dropped by hand, or damaged), and
    the view where its columns are not this Stash's (replaced by hand): a writer makes each again. `present`:
    stored_columns(con), where the caller has it."""
    present = stored_columns(con) if present is None else present
    expected = _expected_columns()
    missing = [name for name in (*TABLES, *VIEWS) if name not in present]
    return missing + [name for name in VIEWS if name in present and set(present[name]) != set(expected[name])]


def damaged_tables(con: duckdb.DuckDBPyConnection, present: Columns | None = None) -> list[str]:
    """The tables of the current schema that lack columns of theirs (dropped by hand) or hold one of another
    type (altered by hand), each as "name (lacks a, b)" or "name (a is VARCHAR, not DOUBLE)": no writer can
    make their figures again."""
    present = stored_columns(con) if present is None else present
    expected, types = _expected_columns(), _expected_types()
    damaged = []
    for name in (name for name in TABLES if name in present):
        lacking = [column for column in expected[name] if column not in present[name]]
        if lacking:
            damaged.append(f"{name} (lacks {', '.join(lacking[:4])}{', ...' if len(lacking) > 4 else ''})")
        retyped = [
            f"{column} is {found}, not {types[name][column]}"
            for column, found in present[name].items()
            if column in types[name] and found != types[name][column]
        ]
        if retyped:
            damaged.append(f"{name} ({'; '.join(retyped[:3])}{'; ...' if len(retyped) > 3 else ''})")
    return damaged


def refuse_damaged(con: duckdb.DuckDBPyConnection, db_label: str,
                   present: Columns | None = None) -> None:  # fmt: skip
    """UsageError naming the tables that lack columns of theirs or hold one of another type: read, they fail
    in the middle of a query; no writer can make their figures again."""
    damaged = damaged_tables(con, present)
    if damaged:
        raise UsageError(
            f"database {db_label}: table {'; '.join(damaged)}, changed by hand? Stash cannot read or write "
            "it so: add a dropped column back or give a column its type back (ALTER TABLE ... ADD COLUMN or "
            "ALTER ... TYPE, the types in docs/schema.md) or use a copy made before"
        )


def stored_columns(con: duckdb.DuckDBPyConnection) -> Columns:
    """{table or view: {column: its type} in order} of the open database (one catalog query, some 5 ms)."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' "
        "AND NOT internal ORDER BY table_name, column_index"
    ).fetchall()
    columns: Columns = {}
    for table, column, data_type in rows:
        columns.setdefault(table, {})[column] = data_type
    return columns


@functools.cache
def _expected_types() -> Columns:
    """Every table's {column: type} as this Stash makes them (its tables made in memory, a few ms once)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(_TABLE_DDL)
        return stored_columns(con)
    finally:
        con.close()


@functools.cache
def _expected_columns() -> dict[str, list[str]]:
    """Every table's and view's columns in order, as schema_docs.py describes them (its tests keep the two
    the same)."""
    described = described_comments()
    return {name: [column for column in comments if column] for name, comments in described.items()}


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table and view of the current version (tables that exist are kept), comment every table,
    view and column, store the shipped instance catalog's rows not stored yet (store/catalog_seed.py), and
    record the schema version and the comments' digest in schema_meta."""
    con.execute(_TABLE_DDL)
    con.execute(STALL_BREAKDOWN_VIEW)
    seed_builtin_catalog(con)
    con.execute(comment_script())
    con.execute(
        "INSERT INTO schema_meta VALUES ('schema_version', ?), ('comments_digest', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [str(DB_SCHEMA_VERSION), SCHEMA_DIGEST],
    )
