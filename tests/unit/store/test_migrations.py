"""Migrations: a database file of an older schema version (1 or 2) is migrated forward by the first writer,
in one transaction, with its data intact; readers take it as it is; newer files are refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from noisy_docs import noisy_result_doc

from stash_core import store
from stash_core.analysis.stalls import remainder_of
from stash_core.errors import UsageError
from stash_core.store import migrations
from stash_core.store.schema import DB_SCHEMA_VERSION, SCHEMA_DIGEST
from stash_core.store.schema_docs import COMMENTS_DIGEST, documented_meaning

# The layout of schema version 1 as first released (before the probes table and the later runs columns),
# frozen here: what a results.duckdb of that Stash holds.
_V1_TABLES = """
CREATE TABLE schema_meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, status VARCHAR,
    error VARCHAR, model VARCHAR, model_kind VARCHAR, batch_size INTEGER, workers_per_node INTEGER,
    nodes INTEGER,
    instance VARCHAR, device VARCHAR, backend VARCHAR, dataset VARCHAR, dataset_images BIGINT,
    iterations_per_epoch BIGINT, loader_workers INTEGER, param_count BIGINT, grad_tensor_count INTEGER,
    layer_count INTEGER, grad_bytes BIGINT, iteration_s DOUBLE, iteration_ci95_s DOUBLE, epoch_s DOUBLE,
    reference_phase VARCHAR, hostname VARCHAR, stash_version VARCHAR, schema_version INTEGER, spec JSON,
    fingerprint JSON, warnings JSON, source_file VARCHAR, ingested_at TIMESTAMPTZ
);
CREATE TABLE phases (
    run_id VARCHAR, phase VARCHAR, phase_index INTEGER, description VARCHAR, workers INTEGER, nodes INTEGER,
    data VARCHAR, status VARCHAR, error VARCHAR, warmup_iterations INTEGER, iterations INTEGER, mean_s DOUBLE,
    ci95_s DOUBLE, std_s DOUBLE, median_s DOUBLE, p5_s DOUBLE, p95_s DOUBLE, data_s DOUBLE, forward_s DOUBLE,
    backward_s DOUBLE, optimizer_s DOUBLE, rank_skew_s DOUBLE, resident_fraction_start DOUBLE, wall_s DOUBLE,
    telemetry_interval_s DOUBLE, PRIMARY KEY (run_id, phase)
);
CREATE TABLE iterations (
    run_id VARCHAR, phase VARCHAR, iteration INTEGER, iteration_s DOUBLE, data_s DOUBLE, forward_s DOUBLE,
    backward_s DOUBLE, optimizer_s DOUBLE, slowest_rank INTEGER
);
CREATE TABLE telemetry (run_id VARCHAR, phase VARCHAR, t_s DOUBLE, metric VARCHAR, value DOUBLE);
CREATE TABLE stalls (
    run_id VARCHAR, stall VARCHAR, seconds DOUBLE, ci95_s DOUBLE, share DOUBLE, epoch_s DOUBLE,
    status VARCHAR, note VARCHAR, PRIMARY KEY (run_id, stall)
);
CREATE TABLE models (
    name VARCHAR PRIMARY KEY, kind VARCHAR, param_count BIGINT, grad_tensor_count INTEGER,
    layer_count INTEGER, grad_bytes BIGINT
);
CREATE TABLE instances (
    name VARCHAR PRIMARY KEY, provider VARCHAR, accelerator VARCHAR, accelerator_count INTEGER, vcpus INTEGER,
    memory_gib DOUBLE, network_gbps DOUBLE, interconnect VARCHAR, on_demand_usd_per_h DOUBLE,
    spot_usd_per_h DOUBLE, price_date DATE, source VARCHAR
);
INSERT INTO schema_meta VALUES ('schema_version', '1');
"""
_STALLS = ("compute", "interconnect", "network", "cpu", "disk")
_V1_VIEW = (
    "CREATE VIEW stall_breakdown AS SELECT r.run_id, r.started_at, r.finished_at, r.status, r.error, "
    "r.model, r.model_kind, r.batch_size, r.workers_per_node, r.nodes, r.instance, r.device, r.backend, "
    "r.dataset, r.dataset_images, r.iteration_s, r.iteration_ci95_s, r.epoch_s, r.iterations_per_epoch, "
    "r.reference_phase, "
    + ", ".join(
        f"max(s.seconds) FILTER (WHERE s.stall = '{x}') AS {x}_s, "
        f"max(s.ci95_s) FILTER (WHERE s.stall = '{x}') AS {x}_ci95_s, "
        "max(coalesce(s.share, s.seconds / nullif(r.iteration_s, 0))) "
        f"FILTER (WHERE s.stall = '{x}') AS {x}_share, "
        f"max(s.epoch_s) FILTER (WHERE s.stall = '{x}') AS {x}_epoch_s, "
        f"max(s.status) FILTER (WHERE s.stall = '{x}') AS {x}_status"
        for x in _STALLS
    )
    + " FROM runs AS r LEFT JOIN stalls AS s ON s.run_id = r.run_id GROUP BY ALL"
)
_V1_DATA_TABLES = ("runs", "phases", "iterations", "telemetry", "stalls", "models")
OLD_RUNS = ("20261122T100000Z-00000001", "20261122T110000Z-00000002")


def _v1_database(path: Path, scratch: Path, docs: list[dict]) -> None:
    """A version-1 file holding `docs`: stored by this Stash into `scratch`, copied into the v1 layout."""
    for doc in docs:
        store.ingest_result(scratch, doc)
    with duckdb.connect(str(path)) as con:
        con.execute(_V1_TABLES)
        con.execute(_V1_VIEW)
        con.execute(f"ATTACH '{scratch}' AS current (READ_ONLY)")
        for table in _V1_DATA_TABLES:
            columns = ", ".join(_columns(con, table))
            con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM current.{table}")
        con.execute("DETACH current")


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND table_name = ? ORDER BY column_index",
        [table],
    ).fetchall()
    return [row[0] for row in rows]


def _contents(path: Path, columns_of: dict[str, list[str]]) -> dict[str, pa.Table]:
    """The rows of every v1 table over its v1 columns, in a fixed order."""
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            table: con.sql(f"SELECT {', '.join(cols)} FROM {table} ORDER BY ALL").to_arrow_table()
            for table, cols in columns_of.items()
        }


def _meaning(path: Path, table: str, column: str) -> str:
    return {c["column"]: c["meaning"] for c in store.describe_schema(path)[table]["columns"]}[column]


def _meta(path: Path) -> dict[str, str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return dict(con.execute("SELECT key, value FROM schema_meta").fetchall())


@pytest.fixture(scope="module")
def _v1_template(tmp_path_factory, result_doc_builder) -> Path:
    """Made once for the module (each test migrates a copy, v1_path)."""
    folder = tmp_path_factory.mktemp("v1")
    path = folder / "old.duckdb"
    docs = [
        result_doc_builder(run_id=OLD_RUNS[0]),
        result_doc_builder(run_id=OLD_RUNS[1], status="failed", model="vgg11"),
    ]
    _v1_database(path, folder / "scratch.duckdb", docs)
    return path


@pytest.fixture
def v1_path(_v1_template, tmp_path) -> Path:
    path = tmp_path / "old.duckdb"
    shutil.copyfile(_v1_template, path)
    return path


# Noisy runs for version 2: a third written before the remainder existed, one whose remainder a gap holds.
V2_DOCS = [
    noisy_result_doc(seed, legacy=seed % 3 == 0, run_id=f"20261123T10000{seed}Z-0000000{seed}", samples=True)
    for seed in range(6)
]


@pytest.fixture
def v2_path(_v2_template, tmp_path) -> Path:
    path = tmp_path / "v2.duckdb"
    shutil.copyfile(_v2_template, path)
    return path


@pytest.fixture(scope="module")
def _v2_template(tmp_path_factory) -> Path:
    """A version-2 file: the v1 layout after the frozen 1 -> 2 step, holding V2_DOCS with `unattributed_s` as
    version 2 stored it (the result file's figure, NULL for a file that had none). Made once for the module;
    each test migrates a copy (v2_path)."""
    folder = tmp_path_factory.mktemp("v2")
    path, scratch = folder / "v2.duckdb", folder / "scratch-v2.duckdb"
    _v1_database(path, scratch, V2_DOCS)
    with duckdb.connect(str(path)) as con:
        migrations._v1_to_v2(con)
        con.executemany(
            "UPDATE runs SET unattributed_s = ? WHERE run_id = ?",
            [[doc["breakdown"].get("unattributed_s"), doc["run_id"]] for doc in V2_DOCS],
        )
        con.execute("UPDATE schema_meta SET value = '2' WHERE key = 'schema_version'")
        con.execute("INSERT INTO schema_meta VALUES ('comments_digest', 'v2')")
    return path


def test_a_version_1_file_is_migrated_to_the_current_version_with_its_data_intact(
    v1_path, result_doc
) -> None:
    with duckdb.connect(str(v1_path), read_only=True) as con:
        v1_columns = {table: _columns(con, table) for table in _V1_DATA_TABLES}
    assert "unattributed_s" not in v1_columns["runs"]
    before = _contents(v1_path, v1_columns)
    assert (
        before["runs"].num_rows == 2
        and before["iterations"].num_rows > 100
        and before["telemetry"].num_rows > 100
    )

    newer = result_doc(run_id="20261122T120000Z-00000003")
    newer["breakdown"]["unattributed_s"] = 0.5  # stale: the stalls add up, the store keeps their remainder
    assert store.ingest_result(v1_path, newer) is True  # the first writer migrates

    assert _meta(v1_path) == {
        "schema_version": str(store.DB_SCHEMA_VERSION),
        "comments_digest": SCHEMA_DIGEST,
    }
    after = _contents(v1_path, v1_columns)
    for table, rows in before.items():
        kept = after[table]
        if "run_id" in kept.column_names:  # leave out the rows of the run stored after the migration
            kept = kept.filter(pc.is_in(kept["run_id"], pa.array(OLD_RUNS)))
        assert kept.equals(rows), table
    completed, failed = (store.get_run(v1_path, run_id) for run_id in OLD_RUNS)
    assert completed["unattributed_s"] == 0.0 and completed["unattributed_ci95_s"] is None  # step 2 -> 3
    assert failed["unattributed_s"] is None  # no iteration time
    assert store.get_run(v1_path, newer["run_id"])["unattributed_s"] == 0.0
    assert len(store.list_runs(v1_path)) == 3
    with duckdb.connect(str(v1_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM probes").fetchall() == [(0,)]
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'runs' "
            "AND column_name = 'unattributed_s'"
        ).fetchall()[0][0]
    assert comment == documented_meaning("runs", "unattributed_s") and comment


@pytest.mark.parametrize("old", ["v1_path", "v2_path"])
def test_a_migrated_file_has_the_layout_of_a_new_one(old, tmp_path, request) -> None:
    old_path = request.getfixturevalue(old)
    for path in (tmp_path / "fresh.duckdb", old_path):
        with store.connect(path):  # a writer creates the one and migrates the other
            pass

    def layout(path: Path) -> set[tuple]:
        with duckdb.connect(str(path), read_only=True) as con:
            return set(
                con.execute(
                    "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
                    "WHERE database_name = current_database() AND schema_name = 'main'"
                ).fetchall()
            )

    assert layout(old_path) == layout(tmp_path / "fresh.duckdb")


def test_a_version_1_file_an_older_stash_extended_in_place_migrates_too(v1_path) -> None:
    with duckdb.connect(str(v1_path)) as con:  # what _add_later_additions of an older Stash left behind
        for column, sql_type in migrations._V2_RUN_COLUMNS.items():
            con.execute(f"ALTER TABLE runs ADD COLUMN {column} {sql_type}")
        con.execute(migrations._V2_PROBES_DDL)  # the same table as older Stash releases created
    with store.connect(v1_path):
        pass
    assert _meta(v1_path)["schema_version"] == str(store.DB_SCHEMA_VERSION)
    assert store.get_run(v1_path, OLD_RUNS[0])["network_reference"] is None


def test_a_failing_migration_leaves_the_file_at_version_1(v1_path, monkeypatch) -> None:
    step = migrations.DB_MIGRATIONS[1]

    def step_then_fail(con: duckdb.DuckDBPyConnection) -> None:
        step(con)
        raise RuntimeError("power cut")

    monkeypatch.setitem(migrations.DB_MIGRATIONS, 1, step_then_fail)
    with pytest.raises(RuntimeError, match="power cut"):
        with store.connect(v1_path):
            pass
    assert _meta(v1_path) == {"schema_version": "1"}
    with duckdb.connect(str(v1_path), read_only=True) as con:
        assert "unattributed_s" not in _columns(con, "runs")
        assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'probes'").fetchall()[
            0
        ][0]


def test_readers_refuse_a_file_from_before_the_remainder_and_the_command_they_name_migrates_it(
    v1_path, capsys, monkeypatch
) -> None:
    """Version 3 gave runs.unattributed_s another meaning: an export or the SQL page of a version-1 or 2 file
    read as it was showed the old figure under today's meaning."""
    from support import stash_here

    with pytest.raises(UsageError, match="schema_version 1, older than this Stash reads") as refused:
        store.get_run(v1_path, OLD_RUNS[0])
    assert _meta(v1_path) == {"schema_version": "1"}  # reading changed nothing
    command = str(refused.value).split("`")[1]
    assert command == f"stash instances seed --db {v1_path}"
    done = stash_here(capsys, monkeypatch, *command.split()[1:])
    assert done.returncode == 0, done.stderr
    assert _meta(v1_path)["schema_version"] == str(store.DB_SCHEMA_VERSION)
    assert store.get_run(v1_path, OLD_RUNS[0])["unattributed_s"] == 0.0


def test_readers_refuse_versions_they_cannot_take_and_everyone_refuses_newer_ones(
    v1_path, monkeypatch
) -> None:
    current = store.DB_SCHEMA_VERSION
    with pytest.raises(UsageError, match=f"any writing command\\) once to migrate it to {current}"):
        store.list_runs(v1_path)
    with duckdb.connect(str(v1_path)) as con:
        con.execute(f"UPDATE schema_meta SET value = '{current + 1}' WHERE key = 'schema_version'")
    with pytest.raises(
        UsageError, match=f"schema_version {current + 1}; this Stash reads up to {current} - upgrade"
    ):
        store.list_runs(v1_path)
    with pytest.raises(UsageError, match="upgrade Stash"):
        with store.connect(v1_path):
            pass


def test_a_version_2_file_is_migrated_to_the_current_version_with_its_data_intact(v2_path) -> None:
    tables = (*_V1_DATA_TABLES, "probes")
    with duckdb.connect(str(v2_path), read_only=True) as con:
        v2_columns = {table: _columns(con, table) for table in tables}
    assert "unattributed_s" in v2_columns["runs"] and "unattributed_ci95_s" not in v2_columns["runs"]
    before = _contents(v2_path, v2_columns)
    with store.connect(v2_path):  # the first writer migrates
        pass
    assert _meta(v2_path) == {"schema_version": str(DB_SCHEMA_VERSION), "comments_digest": SCHEMA_DIGEST}
    after = _contents(v2_path, v2_columns)
    for table, rows in before.items():  # all as it was but the remainder, recomputed from the stalls
        keep = [column for column in rows.column_names if (table, column) != ("runs", "unattributed_s")]
        assert after[table].select(keep).equals(rows.select(keep)), table
    assert before["runs"]["unattributed_s"].null_count == 2  # the legacy files
    for doc in V2_DOCS:
        run = store.get_run(v2_path, doc["run_id"])
        assert run["unattributed_s"] == pytest.approx(remainder_of(doc["breakdown"])["seconds"], abs=1e-15)
        assert run["unattributed_ci95_s"] is None  # not in a version-2 database
    view = store.list_runs(v2_path)
    named = view[[f"{stall}_s" for stall in _STALLS]].fillna(0.0).sum(axis=1)
    assert (named + view["unattributed_s"]).tolist() == pytest.approx(view["iteration_s"].tolist(), rel=1e-12)
    assert (view["unattributed_s"] != 0).any()
    with duckdb.connect(str(v2_path), read_only=True) as con:
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'runs' AND column_name = ?",
            ["unattributed_ci95_s"],
        ).fetchall()[0][0]
    assert comment == documented_meaning("runs", "unattributed_ci95_s") and comment


def test_a_version_2_file_that_has_the_interval_column_keeps_it(v2_path) -> None:
    with duckdb.connect(str(v2_path)) as con:
        con.execute("ALTER TABLE runs ADD COLUMN unattributed_ci95_s DOUBLE")
        con.execute("UPDATE runs SET unattributed_ci95_s = 0.25")
    with store.connect(v2_path):
        pass
    assert _meta(v2_path)["schema_version"] == str(DB_SCHEMA_VERSION)
    assert store.get_run(v2_path, V2_DOCS[0]["run_id"])["unattributed_ci95_s"] == 0.25


def test_a_failing_migration_leaves_the_file_at_version_2(v2_path, monkeypatch) -> None:
    step = migrations.DB_MIGRATIONS[2]

    def step_then_fail(con: duckdb.DuckDBPyConnection) -> None:
        step(con)
        raise RuntimeError("power cut")

    monkeypatch.setitem(migrations.DB_MIGRATIONS, 2, step_then_fail)
    with pytest.raises(RuntimeError, match="power cut"):
        with store.connect(v2_path):
            pass
    assert _meta(v2_path) == {"schema_version": "2", "comments_digest": "v2"}
    with duckdb.connect(str(v2_path), read_only=True) as con:
        assert "unattributed_ci95_s" not in _columns(con, "runs")
        assert con.execute("SELECT count(*) FROM runs WHERE unattributed_s IS NULL").fetchall() == [(2,)]


def test_readers_refuse_a_version_2_file_and_take_a_version_5_file_as_it_is(v2_path) -> None:
    with pytest.raises(UsageError, match="schema_version 2, older than this Stash reads"):
        store.get_run(v2_path, V2_DOCS[1]["run_id"])
    with duckdb.connect(str(v2_path)) as con:  # the steps to version 5, as that Stash stored them
        for version in (2, 3, 4):
            migrations.DB_MIGRATIONS[version](con)
        con.execute("UPDATE schema_meta SET value = '5' WHERE key = 'schema_version'")
    run = store.get_run(v2_path, V2_DOCS[1]["run_id"])
    assert "unattributed_ci95_s" in run
    assert "raw_s" not in store.stalls_frame(v2_path, V2_DOCS[1]["run_id"]).columns  # added by version 6
    assert _meta(v2_path)["schema_version"] == "5"


def test_changed_descriptions_are_reapplied_by_the_next_writer(db_path, result_doc) -> None:
    store.ingest_result(db_path, result_doc())
    with duckdb.connect(str(db_path)) as con:
        con.execute("COMMENT ON COLUMN runs.iteration_s IS 'an older wording'")
        con.execute("UPDATE schema_meta SET value = 'older' WHERE key = 'comments_digest'")
    assert _meaning(db_path, "runs", "iteration_s") == "an older wording"  # read from the database
    store.ingest_result(db_path, result_doc())  # already stored: only the comments change
    assert _meaning(db_path, "runs", "iteration_s") == documented_meaning("runs", "iteration_s")
    assert _meta(db_path)["comments_digest"] == SCHEMA_DIGEST


def test_a_changed_view_is_made_again_by_the_next_writer(db_path, result_doc) -> None:
    """The digest held the comments only: a view changed within a schema version stayed as an older Stash
    made it, in every database made before."""
    store.ingest_result(db_path, result_doc())
    with duckdb.connect(str(db_path)) as con:
        con.execute("CREATE OR REPLACE VIEW stall_breakdown AS SELECT 1 AS older")
        con.execute(f"UPDATE schema_meta SET value = '{COMMENTS_DIGEST}' WHERE key = 'comments_digest'")
    store.ingest_result(db_path, result_doc())  # already stored: only the view changes
    with duckdb.connect(str(db_path), read_only=True) as con:
        assert "compute_share" in [row[0] for row in con.execute("DESCRIBE stall_breakdown").fetchall()]
    assert _meta(db_path)["comments_digest"] == SCHEMA_DIGEST


def test_the_registry_has_one_step_per_version() -> None:
    assert sorted(store.DB_MIGRATIONS) == list(range(1, store.DB_SCHEMA_VERSION))
    assert sorted(migrations.VERSION_CHANGES) == list(range(1, store.DB_SCHEMA_VERSION + 1))
    assert 1 <= store.READABLE_FROM_VERSION <= store.DB_SCHEMA_VERSION


def test_version_4_adds_an_empty_simulations_table(v2_path) -> None:
    with store.connect(v2_path):
        pass
    with duckdb.connect(str(v2_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM simulations").fetchall() == [(0,)]
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() "
            "WHERE table_name = 'simulations' AND column_name = 'p95_jct_s'"
        ).fetchall()[0][0]
    assert comment == documented_meaning("simulations", "p95_jct_s") and comment


def test_version_5_marks_where_each_catalog_row_comes_from(v2_path) -> None:
    """A row is `builtin` when it is as the Stash that seeded it shipped it: today's catalog renamed
    accelerators ("NVIDIA T4" is "NVIDIA T4 16 GB") and changed prices, which marked untouched rows the
    user's, so that no import refreshed them."""
    from stash_core.catalog import get_instance
    from stash_core.store.catalog_seed import BUILTIN_CATALOG_CSV, builtin_catalog_rows

    shipped = [row[:12] for row in builtin_catalog_rows(migrations.CATALOG_BEFORE_V5_CSV)]
    today = {row[0]: row[:12] for row in builtin_catalog_rows(BUILTIN_CATALOG_CSV)}
    untouched = next(row for row in shipped if row != today.get(row[0]))  # as shipped then, changed since
    other = next(row for row in shipped if row[0] != untouched[0])
    edited = (other[0], *other[1:8], 0.01, *other[9:])  # a shipped row with the user's price
    mine = ("my-box", "local", None, 0, 8, 32.0, None, None, None, None, None, "user entry")
    with duckdb.connect(str(v2_path)) as con:
        con.executemany("INSERT INTO instances VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [untouched, edited, mine])  # fmt: skip
    with store.connect(v2_path):
        pass
    with duckdb.connect(str(v2_path), read_only=True) as con:
        origins = dict(con.execute("SELECT name, origin FROM instances").fetchall())
        kept = [untouched[0], edited[0], "my-box"]  # the rows stored before the step gain no region
        assert con.execute("SELECT count(*) FROM instances WHERE region IS NOT NULL AND name IN (?, ?, ?)",
                           kept).fetchall() == [(0,)]  # fmt: skip
    assert origins[untouched[0]] == "builtin"
    assert origins[edited[0]] == "user" and origins["my-box"] == "user"
    assert {origins[name] for name in today.keys() - {untouched[0], edited[0]}} == {"builtin"}  # seeded later
    assert get_instance(v2_path, edited[0])["on_demand_usd_per_h"] == 0.01


def test_a_schema_version_that_is_no_number_is_one_line_for_readers_and_writers(db_path, result_doc) -> None:
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("UPDATE schema_meta SET value = 'abc' WHERE key = 'schema_version'")
    for call in (lambda: store.list_runs(db_path), lambda: store.ingest_result(db_path, result_doc(run_id="b"))):
        with pytest.raises(UsageError, match="schema_version 'abc', which no Stash wrote"):
            call()


def test_a_table_or_view_dropped_by_hand_is_said_to_readers_and_made_again_by_a_writer(
    db_path, result_doc
) -> None:
    store.ingest_result(db_path, result_doc(run_id="20261122T080000Z-aaaa0001"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("DROP VIEW stall_breakdown")
        con.execute("DROP TABLE stalls")
    # It was a CatalogException traceback from `stash runs`, `stash.runs()` and the pages.
    with pytest.raises(UsageError, match="lacks stalls, stall_breakdown of its schema") as raised:
        store.list_runs(db_path)
    assert len(str(raised.value).splitlines()) == 1
    with store.connect(db_path):  # a writer: the schema made whole, the runs kept
        pass
    assert list(store.list_runs(db_path)["run_id"]) == ["20261122T080000Z-aaaa0001"]
    # ingest too is a writer: it makes them again rather than refusing with the message above
    with duckdb.connect(str(db_path)) as con:
        con.execute("DROP VIEW stall_breakdown")
    store.ingest_files(db_path, [_written(db_path.parent, result_doc(run_id="20261122T080000Z-aaaa0002"))])
    assert len(store.list_runs(db_path)) == 2


def test_a_view_replaced_by_hand_is_said_to_readers_and_made_again_by_a_writer(db_path, result_doc) -> None:
    """`CREATE OR REPLACE VIEW stall_breakdown AS SELECT run_id, model FROM runs` left the schema's digest as
    it was: `stash runs` printed a Binder Error traceback and no writer ever made the view again."""
    store.ingest_result(db_path, result_doc(run_id="20261122T080000Z-aaaa0001"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("CREATE OR REPLACE VIEW stall_breakdown AS SELECT run_id, model FROM runs")
    with pytest.raises(UsageError, match="lacks stall_breakdown of its schema"):
        store.list_runs(db_path)
    with store.connect(db_path):  # a writer
        pass
    assert list(store.list_runs(db_path)["run_id"]) == ["20261122T080000Z-aaaa0001"]


@pytest.mark.parametrize(("table", "column"), [("runs", "unattributed_ci95_s"), ("instances", "origin"),
                                               ("stalls", "raw_s")])  # fmt: skip
def test_a_table_lacking_a_column_of_its_is_said_in_one_line_to_readers_and_writers(
    db_path, result_doc, table, column
) -> None:
    """A dropped column was a Binder Error traceback (`stash runs`, `instances add`) or every ingest refused
    without a word on what to do."""
    store.ingest_result(db_path, result_doc(run_id="20261122T080000Z-aaaa0001"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("DROP VIEW stall_breakdown")  # it may read the column
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    said = f"table {table} \\(lacks {column}\\), changed by hand\\? Stash cannot read or write it so"
    another = result_doc(run_id="b")
    for use in (lambda: store.list_runs(db_path), lambda: store.ingest_result(db_path, another)):
        with pytest.raises(UsageError, match=said) as raised:
            use()
        assert len(str(raised.value).splitlines()) == 1


def _written(folder: Path, doc: dict) -> Path:
    import json

    path = folder / f"{doc['run_id']}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("version", ["0", "-3"])
def test_a_schema_version_below_any_stash_s_is_said_so_by_readers_and_writers_alike(
    db_path, result_doc, version
) -> None:
    """Readers told the user to migrate it with a writer, which then refused it as no Stash's."""
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    with duckdb.connect(str(db_path)) as con:
        con.execute(f"UPDATE schema_meta SET value = '{version}' WHERE key = 'schema_version'")
    calls = (lambda: store.list_runs(db_path), lambda: store.ingest_result(db_path, result_doc(run_id="b")))
    for call in calls:
        with pytest.raises(UsageError, match=f"schema_version {version}, which no Stash wrote"):
            call()


def test_a_schema_meta_without_its_version_is_refused_by_readers_and_writers_alike(
    db_path, result_doc
) -> None:
    """Readers called it a database with no schema_meta; a writer stamped it current without migrating it."""
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("DELETE FROM schema_meta WHERE key = 'schema_version'")
    calls = (lambda: store.list_runs(db_path), lambda: store.ingest_result(db_path, result_doc(run_id="b")))
    for call in calls:
        with pytest.raises(UsageError, match="schema_meta table without its schema_version") as raised:
            call()
        assert str(db_path) in str(raised.value)
    with duckdb.connect(str(db_path), read_only=True) as con:
        assert "schema_version" not in dict(con.execute("SELECT key, value FROM schema_meta").fetchall())


class _CommitFails:
    """A connection whose COMMIT fails as on a full disk (DuckDB then has no transaction to roll back)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def execute(self, sql: str, *args):
        if sql.strip().upper() == "COMMIT":
            self.con.execute("ROLLBACK")
            raise duckdb.IOException("Could not write file: No space left on device")
        return self.con.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self.con, name)


def test_a_schema_update_whose_commit_fails_says_why_not_that_no_transaction_is_active(tmp_path) -> None:
    db = tmp_path / "r.duckdb"
    with store.connect(db):
        pass
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE schema_meta SET value = 'older' WHERE key = 'comments_digest'")
        with pytest.raises(duckdb.IOException, match="No space left on device"):
            migrations.ensure_schema(_CommitFails(con), "r.duckdb")


def test_version_6_adds_the_stalls_raw_difference_empty_for_stalls_stored_before(v2_path) -> None:
    with duckdb.connect(str(v2_path), read_only=True) as con:
        before = con.execute("SELECT count(*) FROM stalls").fetchall()[0][0]
    with store.connect(v2_path):
        pass
    with duckdb.connect(str(v2_path), read_only=True) as con:
        counts = con.execute("SELECT count(*), count(raw_s) FROM stalls").fetchall()[0]
    assert before > 0 and counts == (before, 0)  # nothing invented for the stalls stored before


def test_a_run_stored_before_a_column_existed_gets_its_files_figures_when_ingested_again(
    tmp_path, result_doc
) -> None:
    """A migration adds runs.communication, runs.unattributed_ci95_s and stalls.raw_s as NULL (the figures
    were in the result files): ingesting the run's own file again was refused as "other communication"."""
    doc = result_doc(run_id=OLD_RUNS[0])
    doc["breakdown"]["communication"] = {"interconnect": {"allreduce_s": 0.02, "world_size": 2}}
    doc["breakdown"]["stalls"]["compute"]["raw_s"] = doc["breakdown"]["stalls"]["compute"]["seconds"]
    doc["hosts"] = [{"host": "a", "hostname": "a", "cpu_count": 4}]  # version 8 keeps what the hosts reported
    path = tmp_path / "old.duckdb"
    _v1_database(path, tmp_path / "scratch.duckdb", [doc])

    assert store.ingest_result(path, doc) is True  # migrated, then the gaps filled in
    run = store.get_run(path, OLD_RUNS[0])
    assert run["communication"] == doc["breakdown"]["communication"]
    assert run["unattributed_ci95_s"] is not None and run["hosts"] == doc["hosts"]
    with duckdb.connect(str(path), read_only=True) as con:
        raw = con.execute("SELECT raw_s FROM stalls WHERE run_id = ? AND stall = 'compute'", [OLD_RUNS[0]])
        assert raw.fetchall() == [(doc["breakdown"]["stalls"]["compute"]["seconds"],)]
    assert store.ingest_result(path, doc) is False  # the same run, nothing left to fill in
    doc["breakdown"]["communication"]["interconnect"]["allreduce_s"] = 0.5
    with pytest.raises(UsageError, match="other communication;"):  # a stored value is never replaced
        store.ingest_result(path, doc)
    doc["breakdown"]["communication"]["interconnect"]["allreduce_s"] = 0.02
    doc["hosts"][0]["cpu_count"] = 8
    with pytest.raises(UsageError, match="other hosts;"):
        store.ingest_result(path, doc)
