"""Queries over a small store of three runs (two completed, one failed), opened read-only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store.catalog_seed import BUILTIN_CATALOG_CSV, builtin_catalog_rows

BASE = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def populated(tmp_path_factory, result_doc_builder):
    path = tmp_path_factory.mktemp("queries") / "results.duckdb"
    docs = [
        result_doc_builder(run_id="20261122T100000Z-aaaa0001", started_at=BASE, seed=1),
        result_doc_builder(
            run_id="20261122T110000Z-aaaa0002",
            started_at=BASE + timedelta(hours=1),
            model="vgg11",
            batch_size=64,
            seed=2,
        ),
        result_doc_builder(
            run_id="20261122T120000Z-bbbb0003", started_at=BASE + timedelta(hours=2), status="failed", seed=3
        ),
    ]
    # A start time given in another offset is the same instant in UTC.
    docs[1]["started_at"] = (
        (BASE + timedelta(hours=1))
        .astimezone(datetime.fromisoformat("2026-01-01T00:00:00+02:00").tzinfo)
        .isoformat()
    )
    for doc in docs:
        store.ingest_result(path, doc)
    return path, docs


def test_list_runs_is_newest_first_and_limited(populated) -> None:
    path, docs = populated
    runs = store.list_runs(path)
    assert list(runs["run_id"]) == [doc["run_id"] for doc in reversed(docs)]
    assert list(store.list_runs(path, limit=2)["run_id"]) == [docs[2]["run_id"], docs[1]["run_id"]]
    assert runs["started_at"].dt.tz is not None
    assert runs.loc[runs["run_id"] == docs[1]["run_id"], "started_at"].iloc[0] == pd.Timestamp(
        BASE + timedelta(hours=1)
    )
    with pytest.raises(UsageError):
        store.list_runs(path, limit=-1)


def test_get_run_by_prefix(populated) -> None:
    path, docs = populated
    run = store.get_run(path, "20261122T12")
    assert run["run_id"] == docs[2]["run_id"] and run["status"] == "failed"
    assert run["started_at"] == BASE + timedelta(hours=2)
    full = store.get_run(path, docs[1]["run_id"])
    assert full["model"] == "vgg11" and full["batch_size"] == 64
    assert [phase["phase"] for phase in full["phases"]] == ["R0", "R1", "R3", "R2"]  # run order, not by name
    stalls = [stall["stall"] for stall in full["stalls"]]
    assert stalls == ["compute", "interconnect", "network", "cpu", "disk"]
    assert full["stalls"][2]["seconds"] is None and full["fingerprint"]["hostname"] == "box1"
    assert store.get_run(path, "2030") is None
    with pytest.raises(UsageError, match="matches several runs"):
        store.get_run(path, "20261122T1")
    with pytest.raises(UsageError, match="must not be empty"):
        store.get_run(path, "")
    assert store.resolve_run_id(path, "20261122T11") == docs[1]["run_id"]


def test_any_unique_part_of_a_run_id_finds_the_run(populated) -> None:
    path, docs = populated
    # The pages show the id's last part; `stash show` takes it, or any other part found in one id only.
    assert store.resolve_run_id(path, "bbbb0003") == docs[2]["run_id"]
    assert store.get_run(path, "aaaa0002")["model"] == "vgg11"
    assert store.resolve_run_id(path, "110000Z-aa") == docs[1]["run_id"]
    with pytest.raises(UsageError, match="matches several runs"):
        store.resolve_run_id(path, "aaaa000")  # in two ids
    assert store.resolve_run_id(path, "cccc") is None


def test_breakdown_frame_filters_by_run_ids(populated) -> None:
    path, docs = populated
    wanted = [docs[0]["run_id"], docs[2]["run_id"], "not-a-run"]
    frame = store.breakdown_frame(path, wanted)
    assert list(frame["run_id"]) == [docs[2]["run_id"], docs[0]["run_id"]]
    assert len(store.breakdown_frame(path)) == 3
    assert store.breakdown_frame(path, []).empty


def test_iterations_frame_in_phase_order(populated) -> None:
    path, docs = populated
    run_id = docs[0]["run_id"]
    frame = store.iterations_frame(path, run_id)
    assert list(dict.fromkeys(frame["phase"])) == ["R0", "R1", "R3", "R2"]
    for _, group in frame.groupby("phase"):
        assert list(group["iteration"]) == list(range(len(group)))
    r2 = store.iterations_frame(path, run_id, phase="R2")
    assert set(r2["phase"]) == {"R2"} and len(r2) == docs[0]["phases"][3]["iterations"]
    # R2 (cold data) is slower per iteration than R0 (synthetic, one worker) in the fixture, and the slowest
    # rank's time is never below the data + compute parts it was built from.
    r0 = store.iterations_frame(path, run_id, phase="R0")
    assert r2["iteration_s"].mean() > r0["iteration_s"].mean()
    parts = r2[["data_s", "forward_s", "backward_s", "optimizer_s"]].sum(axis=1)
    assert (r2["iteration_s"] - parts).abs().max() < 1e-12
    assert store.iterations_frame(path, "no-such-run").empty


def test_telemetry_frame_is_long_format(populated) -> None:
    path, docs = populated
    frame = store.telemetry_frame(path, docs[0]["run_id"], phase="R1")
    metrics = docs[0]["phases"][1]["telemetry"]["metrics"]
    assert list(frame.columns) == ["run_id", "phase", "t_s", "metric", "value"]
    assert sorted(set(frame["metric"])) == sorted(metrics)
    cpu = frame[frame["metric"] == "cpu_util_pct"]
    assert list(cpu["value"]) == pytest.approx(metrics["cpu_util_pct"])
    assert list(cpu["t_s"]) == sorted(cpu["t_s"])


def test_database_summary_counts(populated) -> None:
    path, docs = populated
    summary = store.database_summary(path)
    counts = (summary["runs"], summary["completed_runs"], summary["models"], summary["instances"])
    assert counts == (3, 2, 2, len(builtin_catalog_rows(BUILTIN_CATALOG_CSV)))  # the catalog from the start
    assert summary["last_run_at"] == BASE + timedelta(hours=2)
    assert summary["iterations"] == sum(len(p["samples"]["iteration_s"]) for d in docs for p in d["phases"])


def test_query_readonly(populated) -> None:
    path, _ = populated
    frame = store.query_readonly(path, "SELECT run_id, batch_size FROM runs WHERE batch_size = ?", [64])
    assert list(frame["batch_size"]) == [64] and frame.attrs["truncated"] is False
    cut = store.query_readonly(path, "SELECT * FROM iterations", max_rows=7)
    assert len(cut) == 7 and cut.attrs["truncated"] is True
    whole = store.query_readonly(path, "SELECT * FROM runs", max_rows=3)
    assert len(whole) == 3 and whole.attrs["truncated"] is False
    assert str(store.query_readonly(path, "SELECT max(started_at) AS t FROM runs")["t"].dt.tz) == "UTC"
    with pytest.raises(UsageError, match="query failed"):
        store.query_readonly(path, "DELETE FROM runs")
    with pytest.raises(UsageError, match="query failed"):
        store.query_readonly(path, "SELEC nonsense")
    assert store.database_summary(path)["runs"] == 3


def test_plain_rows_are_the_frames_rows(populated) -> None:
    """run_rows and run_record (the CLI's, without pandas) hold what list_runs and get_run hold."""
    from stash_core.store.runs import run_record, run_rows

    path, _ = populated
    rows = run_rows(path, limit=2)
    frame = store.list_runs(path, limit=2)
    assert [row["run_id"] for row in rows] == frame["run_id"].tolist()
    assert rows[0]["started_at"] == frame["started_at"].iloc[0].to_pydatetime()
    assert rows[0]["started_at"].tzinfo is not None and rows[0]["started_at"].utcoffset() == timedelta(0)
    for column in ("iteration_s", "epoch_s", "batch_size", "model"):
        assert rows[1][column] == frame[column].iloc[1]
    for run_id in ("aaaa0001", "bbbb0003"):
        assert run_record(path, run_id) == store.get_run(path, run_id)
    assert run_record(path, "no-such-run") is None
    with pytest.raises(UsageError, match="several runs"):
        run_record(path, "aaaa")


def test_a_timestamp_column_queried_directly_with_duckdb_comes_back_as_the_docs_show(populated) -> None:
    """database.md queries results.duckdb with duckdb.connect(...): a TIMESTAMPTZ column needs pytz in
    DuckDB's own conversion, which the environment lacked (ModuleNotFoundError)."""
    import duckdb

    path, _ = populated
    with duckdb.connect(str(path), read_only=True) as con:
        [(run_id, started_at)] = con.execute(
            "SELECT run_id, started_at FROM runs WHERE run_id = '20261122T100000Z-aaaa0001'"
        ).fetchall()
    assert started_at.astimezone(UTC) == BASE
