"""Forward migrations of the store: DB_MIGRATIONS[v] upgrades a database at schema version v to v + 1.

A writer that opens a database of an older version runs every step from its version up to DB_SCHEMA_VERSION
and then create_schema (new tables, the view, the comments, the recorded version), all in one transaction:
either the whole migration is stored or nothing. A step describes the change as it was made in that version,
in its own SQL, so that it stays valid whatever later versions change. VERSION_CHANGES says what each version
brought (docs/schema.md shows it).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import duckdb

from stash_core.errors import NewerThanStash, UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store.catalog_seed import builtin_catalog_rows
from stash_core.store.dbfile import refuse_foreign
from stash_core.store.rollback import rollback_if_open
from stash_core.store.schema import (
    DB_SCHEMA_VERSION,
    SCHEMA_DIGEST,
    create_schema,
    missing_objects,
    refuse_damaged,
    stored_columns,
)
from stash_core.store.schema_template import SCHEMA_CHANGE, copy_schema

# Readers take a database of this version or newer as it is, without migrating it: every step since only
# added tables and columns, which readers treat as optional. A step that changes or removes something raises
# it to that step's version: version 3 gave runs.unattributed_s another meaning (the signed remainder), which
# an export or a query of an older file would show as if it were today's.
READABLE_FROM_VERSION = 3

# The runs columns schema versions 2, 3 and 8 added: databases and exports made before them lack them.
_V2_RUN_COLUMNS = {"unattributed_s": "DOUBLE", "network_reference": "VARCHAR", "communication": "JSON"}
_V3_RUN_COLUMNS = {"unattributed_ci95_s": "DOUBLE"}
_V8_RUN_COLUMNS = {"hosts": "JSON"}
LATER_RUN_COLUMNS = {**_V2_RUN_COLUMNS, **_V3_RUN_COLUMNS, **_V8_RUN_COLUMNS}
# Every column a later version added to a table of the first layout: an export made before lacks it and is
# still whole.
LATER_COLUMNS: dict[str, frozenset[str]] = {
    "runs": frozenset(LATER_RUN_COLUMNS),
    "instances": frozenset({"region", "origin"}),  # version 5
    "stalls": frozenset({"raw_s"}),  # version 6
    # the view's remainder (version 3), the intervals per epoch and whether each stall is resolved (version
    # 7), which views of older versions lack
    "stall_breakdown": frozenset(
        {"epoch_ci95_s", *(f"{stall}_epoch_ci95_s" for stall in (*STALL_NAMES, "unattributed"))}
        | {f"unattributed_{part}" for part in ("s", "ci95_s", "share", "epoch_s")}
        | {f"{stall}_resolved" for stall in STALL_NAMES}
    ),
}

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


# Version 3's remainder: the iteration time minus the five stalls (NULL stalls count as 0), a difference
# within float rounding (1e-9 of the iteration time) taken as none, as stash_core.analysis.stalls had it.
_V3_REMAINDER_UPDATE = """
UPDATE runs SET unattributed_s = CASE WHEN abs(remainder) <= 1e-9 * abs(runs.iteration_s) THEN 0.0
    ELSE remainder END
FROM (
    SELECT r.run_id, r.iteration_s - coalesce(sum(s.seconds) FILTER (WHERE s.stall IN
        ('compute', 'interconnect', 'network', 'cpu', 'disk')), 0) AS remainder
    FROM runs AS r LEFT JOIN stalls AS s ON s.run_id = r.run_id
    WHERE r.iteration_s IS NOT NULL
    GROUP BY r.run_id, r.iteration_s
) AS computed
WHERE runs.run_id = computed.run_id
"""


def _add_run_columns(con: duckdb.DuckDBPyConnection, columns: dict[str, str]) -> None:
    """Add those of `columns` ({name: SQL type}) that runs does not have yet."""
    present = {
        row[0]
        for row in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' "
            "AND table_name = 'runs'"
        ).fetchall()
    }
    for column, sql_type in columns.items():
        if column not in present:
            con.execute(f"ALTER TABLE runs ADD COLUMN {column} {sql_type}")


def _v1_to_v2(con: duckdb.DuckDBPyConnection) -> None:
    """Add the probes table and the later runs columns where an older Stash has not added them yet."""
    con.execute(_V2_PROBES_DDL)
    _add_run_columns(con, _V2_RUN_COLUMNS)


def _v2_to_v3(con: duckdb.DuckDBPyConnection) -> None:
    """Add runs.unattributed_ci95_s where missing (NULL for the runs stored before: their result files'
    interval is not in the database), and make runs.unattributed_s of every run with an iteration time the
    signed remainder, iteration time minus the five stalls, which it means from this version on."""
    _add_run_columns(con, _V3_RUN_COLUMNS)
    con.execute(_V3_REMAINDER_UPDATE)


def _v3_to_v4(con: duckdb.DuckDBPyConnection) -> None:
    """Nothing to change: version 4 only adds the simulations table, which create_schema makes."""


# The catalog every Stash that wrote versions 1 to 4 shipped (one file, unchanged until version 5): what the
# step compares a stored row with. Today's catalog has renamed accelerators and new prices, which would make
# rows an older Stash seeded, and nobody touched, look like the user's.
CATALOG_BEFORE_V5_CSV = Path(__file__).resolve().parent / "catalog_before_v5.csv"
# The instances columns of version 4, in table order: what a row of the shipped catalog is compared on.
_V4_INSTANCE_COLUMNS = (
    "name", "provider", "accelerator", "accelerator_count", "vcpus", "memory_gib", "network_gbps",
    "interconnect", "on_demand_usd_per_h", "spot_usd_per_h", "price_date", "source",
)  # fmt: skip


def _v4_to_v5(con: duckdb.DuckDBPyConnection) -> None:
    """Add instances.region (NULL: no row said its region before) and instances.origin: 'builtin' for a row
    that is still exactly as Stash shipped it before version 5, 'user' for every other row (added with `stash
    instances add`, or a shipped row the user edited), so that no later import overwrites a user's values."""
    for column in ("region", "origin"):
        con.execute(f"ALTER TABLE instances ADD COLUMN IF NOT EXISTS {column} VARCHAR")
    shipped = {row[0]: tuple(row[: len(_V4_INSTANCE_COLUMNS)]) for row in _shipped_catalog_rows()}
    stored = con.execute(f"SELECT {', '.join(_V4_INSTANCE_COLUMNS)} FROM instances").fetchall()
    builtin = [row[0] for row in stored if shipped.get(row[0]) == tuple(row)]
    con.execute("UPDATE instances SET origin = 'user'")
    if builtin:
        con.executemany(
            "UPDATE instances SET origin = 'builtin' WHERE name = ?", [[name] for name in builtin]
        )


def _v5_to_v6(con: duckdb.DuckDBPyConnection) -> None:
    """Add stalls.raw_s (NULL for the stalls stored before: their result files' differences are not in the
    database)."""
    con.execute("ALTER TABLE stalls ADD COLUMN IF NOT EXISTS raw_s DOUBLE")


def _v6_to_v7(con: duckdb.DuckDBPyConnection) -> None:
    """Nothing to change in the tables: the view's new columns (`<stall>_resolved`) come with create_schema,
    which every migration ends with."""


def _v7_to_v8(con: duckdb.DuckDBPyConnection) -> None:
    """Add runs.hosts (NULL for the runs stored before: what their hosts reported is in their result files,
    and ingesting one again fills it in: store/ingest_fill.py)."""
    _add_run_columns(con, _V8_RUN_COLUMNS)


def _shipped_catalog_rows() -> list[tuple]:
    try:
        return builtin_catalog_rows(CATALOG_BEFORE_V5_CSV)
    except (OSError, ValueError):
        return []  # no shipped file to compare with: every stored row counts as the user's


DB_MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
}

VERSION_CHANGES = {
    1: "the first layout",
    2: "the `probes` table and the `runs` columns `unattributed_s`, `network_reference` and `communication` "
    "(NULL for runs stored before); a comment on every table, view and column. Earlier Stash releases added "
    "the table and the columns to version-1 databases in place; the step adds whichever is missing",
    3: "the signed remainder: `runs.unattributed_s` is now iteration time minus the five stalls (the step "
    "recomputes it for every stored run), the `runs` column `unattributed_ci95_s` (NULL for runs stored "
    "before) and the `stall_breakdown` columns `unattributed_s`, `unattributed_ci95_s`, `unattributed_share` "
    "and `unattributed_epoch_s`, so that the five stalls and the remainder add up to `iteration_s`",
    4: "the `simulations` table (cluster-scheduling simulations, one row per policy)",
    5: "the `instances` columns `region` and `origin` (`builtin`, `import` or `user`): the step marks a row "
    "`builtin` when it is exactly as Stash shipped it before version 5 and `user` otherwise, so that imports "
    "of a price catalog (`stash instances import`) never overwrite a user's values",
    6: "the `stalls` column `raw_s`, the signed difference a stall within the noise reports as 0 (NULL for "
    "stalls stored before), so that `stash show` names what the remainder holds stall by stall",
    7: "the `stall_breakdown` columns `<stall>_resolved`: whether each stall is resolved, its 95 % CI no "
    "wider than its value, as `stash show` says it",
    8: "the `runs` column `hosts`: what each host of a run on remote hosts or the emulated cluster reported "
    "(its CPU count gives `stash show` the note on workers sharing its cores); NULL for runs stored before, "
    "filled in by ingesting a run's result file again",
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


def stored_schema_version(con: duckdb.DuckDBPyConnection, db_label: str = "the database") -> int | None:
    """The schema version recorded in the open database, or None when it has no Stash schema yet."""
    meta = stored_meta(con)
    return None if meta is None else _version(meta, db_label)


def _version(meta: dict[str, str], db_label: str) -> int:
    """schema_meta's schema_version as a number; UsageError where it is missing (every Stash writes it with
    the table, in one transaction) or another text."""
    if "schema_version" not in meta:
        raise UsageError(
            f"{db_label} has a schema_meta table without its schema_version: damaged, or not a Stash database"
        )
    try:
        return int(meta["schema_version"])
    except (TypeError, ValueError):
        shown = str(meta["schema_version"])[:40]
        raise UsageError(
            f"{db_label} has schema_version {shown!r}, which no Stash wrote: not a Stash database"
        ) from None


def ensure_schema(con: duckdb.DuckDBPyConnection, db_label: str) -> None:
    """Create the schema in a new database, or migrate an older one forward (writers only).

    A database of the current version whose comments or view differ from this Stash's gets them re-applied.
    """
    meta = stored_meta(con)
    present = None
    if meta is not None and meta.get("schema_version") == str(DB_SCHEMA_VERSION):
        present = stored_columns(con)
        refuse_damaged(con, db_label, present)  # a table lacking columns: no writer can make them again
    if _up_to_date(con, db_label, present):
        return
    # Threads of this process that open one database share DuckDB's instance of it: one at a time creates or
    # migrates a schema, and each looks again once its turn comes (another may have done it meanwhile).
    # Processes never meet here: DuckDB lets one process at a time write a file.
    with SCHEMA_CHANGE:
        if not _up_to_date(con, db_label):
            _create_or_migrate(con, db_label)


def _up_to_date(con: duckdb.DuckDBPyConnection, db_label: str, present: dict | None = None) -> bool:
    meta = stored_meta(con)
    if meta is None:
        return False
    current = _version(meta, f"database {db_label}") == DB_SCHEMA_VERSION
    # one dropped by hand is made again (empty), the rest kept
    return current and meta.get("comments_digest") == SCHEMA_DIGEST and not missing_objects(con, present)


def _create_or_migrate(con: duckdb.DuckDBPyConnection, db_label: str) -> None:
    stored = stored_meta(con)
    version = None if stored is None else _version(stored, f"database {db_label}")
    check_readable_version(version, db_label)
    if stored is None:
        refuse_foreign(con, db_label)  # another program's tables get no Stash tables beside them
        copy_schema(con)  # the same schema, copied in one transaction (store/schema_template.py)
        return
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
        rollback_if_open(con)  # a failed COMMIT (a full disk) says why, not "no transaction is active"
        raise


def check_readable_version(version: int | None, db_label: str) -> None:
    """Refuse a database written by a newer Stash."""
    if version is not None and version > DB_SCHEMA_VERSION:
        raise NewerThanStash(
            f"database {db_label} has schema_version {version}; this Stash reads up to {DB_SCHEMA_VERSION}"
            " - upgrade Stash"
        )


def check_reader_can_take(version: int, db_label: str) -> None:
    """Refuse to read, without migrating, a database older than READABLE_FROM_VERSION or newer than this
    Stash."""
    check_readable_version(version, db_label)
    if version < min(DB_MIGRATIONS, default=DB_SCHEMA_VERSION):  # below the first version any Stash wrote
        raise UsageError(f"database {db_label} has schema_version {version}, which no Stash wrote")
    if version < READABLE_FROM_VERSION:
        raise UsageError(
            f"database {db_label} has schema_version {version}, older than this Stash reads as it is: run"
            f" `stash instances seed --db {shlex.quote(db_label)}` (or any writing command) once to migrate"
            f" it to {DB_SCHEMA_VERSION}"
        )
