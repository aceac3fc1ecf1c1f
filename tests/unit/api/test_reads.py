"""runs(), breakdown() and load_result(): stored runs as frames, a result file as a Result; the stall rows of
a Result and of its stored run are the same rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from result_docs import result_doc

import stash_core as stash
from stash_core import store


@pytest.fixture()
def stored(tmp_path):
    """A database with a completed and a failed run, and the completed one's result file."""
    db = tmp_path / "r.duckdb"
    done = result_doc("resnet18", run_id="20261124T100000Z-aaaa0001")
    failed = result_doc("resnet18", run_id="20261124T110000Z-bbbb0002", status="failed")
    for doc in (done, failed):
        store.ingest_result(db, doc)
    path = tmp_path / "done.json"
    path.write_text(json.dumps(done))
    return db, path, done, failed


def test_runs_lists_every_stored_run_newest_first(stored):
    db, *_ = stored
    frame = stash.runs(db)
    assert list(frame["run_id"]) == ["20261124T110000Z-bbbb0002", "20261124T100000Z-aaaa0001"]
    assert {"iteration_s", "compute_s", "compute_share"} <= set(frame.columns)


def test_runs_marks_a_breakdown_not_to_be_read_as_stalls_as_stash_runs_does(stored, capsys):
    """`stash runs` marked an impossible breakdown; runs() gave its shares without a word."""
    from stash_core.analysis.coherence import IMPOSSIBLE
    from stash_core.cli import main

    db, *_ = stored
    said = f"{IMPOSSIBLE}: R0 took 920.0 ms per iteration and R1 220.0 ms"
    warned = result_doc("resnet18", run_id="20261124T130000Z-dddd0004", warnings=[said])
    store.ingest_result(db, warned)
    figures = stash.runs(db).set_index("run_id")["figures"]
    assert figures["20261124T130000Z-dddd0004"] == "impossible"
    assert figures["20261124T100000Z-aaaa0001"] is None
    assert main(["runs", "--format", "json", "--db", str(db)]) == 0
    printed = {row["run_id"]: row["figures"] for row in json.loads(capsys.readouterr().out)["runs"]}
    assert printed == figures.to_dict()


def test_a_breakdown_is_the_results_own_rows(stored):
    db, path, done, _ = stored
    result = stash.load_result(path)
    assert (result.run_id, result.status, result.result_file) == (done["run_id"], "completed", path)
    assert result.db is None  # read from its file
    assert result.iteration_s == pytest.approx(done["breakdown"]["iteration_s"])
    read = stash.breakdown("aaaa0001", db)  # any unique part of the id
    assert list(read["stall"]) == ["compute", "interconnect", "network", "cpu", "disk", "unattributed"]
    pd.testing.assert_frame_equal(read, result.to_frame(), check_dtype=False)
    # the remainder's row makes the rows add up to the iteration, as `stash show` has them
    assert read["seconds"].sum() == pytest.approx(result.iteration_s)
    assert read.loc[read["stall"] == "compute", "seconds"].item() == pytest.approx(0.2)


def test_each_stall_says_whether_it_is_resolved_as_runs_does(stored):
    """Only runs() had <stall>_resolved: a stall of one run was "measured" in its breakdown, the note the
    one word of it not being resolved."""
    db, *_ = stored
    wide = result_doc("resnet18", run_id="20261124T120000Z-cccc0003")
    wide["breakdown"]["stalls"]["cpu"]["ci95_s"] = 2 * wide["breakdown"]["stalls"]["cpu"]["seconds"]
    store.ingest_result(db, wide)  # its CPU stall's interval wider than its value: not resolved
    wide_read = stash.breakdown("cccc0003", db).set_index("stall")
    cpu, compute = wide_read.loc["cpu", "resolved"], wide_read.loc["compute", "resolved"]
    assert not pd.isna(cpu) and not cpu and not pd.isna(compute) and compute
    assert bool(stash.runs(db).set_index("run_id").loc["20261124T120000Z-cccc0003", "cpu_resolved"]) is False
    read = stash.breakdown("aaaa0001", db).set_index("stall")
    run = stash.runs(db).set_index("run_id").loc["20261124T100000Z-aaaa0001"]
    for stall in ("compute", "interconnect", "network", "cpu", "disk"):
        said = read.loc[stall, "resolved"]
        assert (None if pd.isna(said) else bool(said)) == (
            None if pd.isna(run[f"{stall}_resolved"]) else bool(run[f"{stall}_resolved"])), stall
    assert pd.isna(read.loc["unattributed", "resolved"])  # what is left over: not a stall resolved or not
    assert read["resolved"].dtype == "boolean"


def test_a_file_written_before_the_remainder_gives_one_remainder_everywhere(tmp_path):
    """Such a file (the shipped examples) holds `unattributed_s` 0.0 of the old meaning: `.breakdown` and
    `.to_dict()` gave it, `.to_frame()`, `stash show` and the store the recomputed -0.011 s."""
    from support import REPO

    path = REPO / "examples" / "results" / "shufflenet_v2_x0_5-b16-2workers-vm-2vcpu.json"
    raw = json.loads(path.read_text())["breakdown"]
    assert raw["unattributed_s"] == 0.0 and "unattributed" not in raw
    result = stash.load_result(path)
    frame = result.to_frame().set_index("stall")
    remainder_s = frame.loc["unattributed", "seconds"]
    named_s = sum(entry["seconds"] or 0.0 for entry in raw["stalls"].values())
    assert remainder_s == pytest.approx(raw["iteration_s"] - named_s) and remainder_s < -0.01
    said = (result.breakdown["unattributed_s"], result.to_dict()["breakdown"]["unattributed_s"])
    assert said == (remainder_s, remainder_s)
    assert result.breakdown["unattributed_ci95_s"] == pytest.approx(frame.loc["unattributed", "ci95_s"])
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, stash.load_result(path).doc)
    stored = store.query_readonly(db, "SELECT unattributed_s FROM runs")["unattributed_s"].item()
    assert stored == pytest.approx(remainder_s)


def test_a_failed_run_has_no_stall_rows_but_the_columns(stored):
    db, _, _, failed = stored
    read = stash.breakdown(failed["run_id"], db)
    assert read.empty and list(read.columns) == list(stash.Result.from_document(failed).to_frame().columns)


def test_what_cannot_be_read_is_a_usage_error(stored, tmp_path):
    db, *_ = stored
    with pytest.raises(stash.UsageError, match="no run 'zzzz' in "):
        stash.breakdown("zzzz", db)
    with pytest.raises(stash.UsageError, match="matches several runs"):
        stash.breakdown("2026", db)
    with pytest.raises(stash.UsageError, match="no database at"):
        stash.runs(tmp_path / "missing.duckdb")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(stash.UsageError, match="bad.json"):
        stash.load_result(tmp_path / "bad.json")
    with pytest.raises(stash.UsageError, match="run_id: expected a run id"):
        stash.breakdown("", db)


@pytest.mark.parametrize(
    ("where", "value", "says"),
    [("batch_size", "8", "must be an integer"), ("batch_size", 8.5, "must be an integer"),
     ("batch_size", -8, "is -8; expected at least 1"), ("batch_size", 0, "is 0; expected at least 1")],
)  # fmt: skip
def test_load_result_refuses_what_ingest_refuses(stored, tmp_path, where, value, says):
    _, _, done, _ = stored
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**done, "spec": {**done["spec"], where: value}}))
    with pytest.raises(stash.UsageError, match=f"spec.{where} {says}"):
        stash.load_result(path)


def test_runs_takes_the_commands_limit(stored):
    db, *_ = stored
    assert list(stash.runs(db, limit=1)["run_id"]) == ["20261124T110000Z-bbbb0002"]  # the newest
    with pytest.raises(stash.UsageError, match="limit: must be a positive integer"):
        stash.runs(db, limit=0)


@pytest.mark.parametrize(
    ("call", "message"),
    [(lambda db: stash.breakdown("aaaa0001", db, foo=1), "breakdown: unknown option 'foo'"),
     (lambda db: stash.runs(db, limt=1), "runs: unknown option 'limt' \\(did you mean 'limit'\\?\\)"),
     (lambda db: stash.load_result(), "load_result: missing a required argument: 'path'"),
     (lambda db: stash.breakdown(), "breakdown: missing a required argument: 'run_id'")],
)  # fmt: skip
def test_a_wrong_argument_is_a_usage_error_not_a_type_error(stored, call, message):
    db, *_ = stored
    with pytest.raises(stash.UsageError, match=message):
        call(db)


@pytest.mark.parametrize("stored_s", [-0.05, None], ids=["below-zero", "no-value"])
def test_a_stall_row_edited_to_no_valid_figure_loses_it_and_the_rows_still_add_up(stored, stored_s):
    """A 'measured' row edited by hand to -0.05 s (or NULL) kept its figure (or its stale share) beside a
    remainder that already counted its time: the rows added up to 0.155 s of a 0.205 s iteration, where
    `stash show` says the stall's time is counted in "not separated"."""
    import duckdb

    db, _, done, _ = stored
    with duckdb.connect(str(db)) as con:
        edit = "UPDATE stalls SET seconds = ? WHERE run_id = ? AND stall = 'cpu'"
        con.execute(edit, [stored_s, done["run_id"]])
    read = stash.breakdown(done["run_id"], db)
    cpu = read.loc[read["stall"] == "cpu"].iloc[0]
    assert pd.isna(cpu["seconds"]) and pd.isna(cpu["share"]) and pd.isna(cpu["epoch_s"])
    assert 'its time is counted in "not separated"' in cpu["note"]
    assert read["seconds"].sum() == pytest.approx(done["breakdown"]["iteration_s"])
    assert read["share"].sum() == pytest.approx(1.0)
    # the stall_breakdown view people query says the same: no figure, its time in the remainder
    with duckdb.connect(str(db), read_only=True) as con:
        cpu_s, remainder_s = con.execute(
            "SELECT cpu_s, unattributed_s FROM stall_breakdown WHERE run_id = ?", [done["run_id"]]
        ).fetchone()
    api_remainder_s = read.loc[read["stall"] == "unattributed", "seconds"].iloc[0]
    assert cpu_s is None and remainder_s == pytest.approx(api_remainder_s)
