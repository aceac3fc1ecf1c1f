"""An export read back as result documents: a completed run needs its phases and stalls, the samples may be
left out."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store.import_export import docs_from_export

RUN_ID = "20261122T080000Z-eeee0006"
FAILED_ID = "20261122T090000Z-ffff0007"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    folder = tmp_path_factory.mktemp("export")
    db = folder / "results.duckdb"
    store.ingest_result(db, result_doc(run_id=RUN_ID, samples=True, telemetry=True, seed=6))
    failed = result_doc(run_id=FAILED_ID, seed=7)
    failed.update(status="failed", error="the workers ran out of memory", phases=[], breakdown=None)
    store.ingest_result(db, failed)
    paths = store.export(db, "parquet", folder / "out")
    return {Path(path).stem: pd.read_parquet(path) for path in paths}


def test_a_completed_run_without_its_phases_and_stalls_is_refused(tables) -> None:
    with pytest.raises(UsageError, match=f"completed run {RUN_ID} needs its phases and stalls"):
        docs_from_export({"runs": tables["runs"]})
    with pytest.raises(UsageError, match="needs its stalls, or it would be stored with no breakdown"):
        docs_from_export({"runs": tables["runs"], "phases": tables["phases"]})


def test_phases_and_stalls_of_another_export_are_refused(tables) -> None:
    other = {name: tables[name].iloc[0:0] for name in ("phases", "stalls")}
    with pytest.raises(UsageError, match=f"hold no row of completed run {RUN_ID}"):
        docs_from_export({"runs": tables["runs"], **other})


def test_a_failed_run_needs_no_breakdown_and_samples_may_be_left_out(tables) -> None:
    failed = tables["runs"][tables["runs"]["run_id"] == FAILED_ID]
    assert [doc["run_id"] for doc in docs_from_export({"runs": failed})] == [FAILED_ID]
    docs = docs_from_export({name: tables[name] for name in ("runs", "phases", "stalls")})
    completed = next(doc for doc in docs if doc["run_id"] == RUN_ID)
    assert set(completed["breakdown"]["stalls"]) == {"compute", "interconnect", "network", "cpu", "disk"}
    assert all(phase["samples"] == {} for phase in completed["phases"])


def test_stalls_of_another_export_beside_the_runs_phases_are_refused(tables) -> None:
    """Half a breakdown is no run either: the phases of the run without its stalls would be stored as a run
    whose iteration is all 'not separated'."""
    other_stalls = tables["stalls"].iloc[0:0]
    with pytest.raises(UsageError, match=f"the stalls table holds no row of completed run {RUN_ID}"):
        docs_from_export({"runs": tables["runs"], "phases": tables["phases"], "stalls": other_stalls})


def test_a_completed_run_stored_without_a_breakdown_comes_back_from_its_own_export(tmp_path) -> None:
    """The store takes a completed run whose file had no breakdown; its export was then refused as 'the
    stalls table holds no row of completed run ...; upload them from the same export', which it was."""
    db = tmp_path / "results.duckdb"
    doc = result_doc(run_id=RUN_ID, seed=8)
    doc["breakdown"] = None
    store.ingest_result(db, doc)
    paths = store.export(db, "parquet", tmp_path / "out")
    read = {Path(path).stem: pd.read_parquet(path) for path in paths}
    assert [back["run_id"] for back in docs_from_export(read)] == [RUN_ID]


def _probe_section(run_id: str) -> list[dict]:
    """One probe set as a two-worker profile writes it (fields the table keeps no column for left out)."""
    measure = {"repetitions": 20, "time_s": 0.002, "time_min_s": 0.001, "algbw_gbps": 4.5, "busbw_gbps": 4.5}
    return [{
        "probe_id": f"{run_id}-R1", "run_id": run_id, "phase": "R1", "instance": None, "link_gbps": None,
        "started_at": "2026-11-22T08:00:05+00:00", "hostname": "vm", "backend": "gloo", "device": "cpu",
        "world_size": 2, "nodes": 1, "workers_per_node": 2,
        "allreduce": [{"size_bytes": 4096, **measure}, {"size_bytes": 65536, **measure}],
        "gradient_allreduce": {"size_bytes": 21675168, **measure},
        "p2p": [{"size_bytes": 8, "scope": "intra_node", **measure}],
    }]  # fmt: skip


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_an_export_gives_back_telemetry_holes_probes_and_a_script_s_loader(tmp_path, fmt) -> None:
    """Read back and stored again, an export holds every row it was made of: a telemetry metric never
    sampled and a moment when none was (NULL values: the pivot dropped them), the probes the profile
    measured (never rebuilt), what each remote host reported, and a script's unrecorded DataLoader (stored
    as 2 workers, the spec's default)."""
    import duckdb

    run_id = "20261122T080000Z-eeee0010"
    doc = result_doc(run_id=run_id, samples=True, telemetry=True, seed=10)
    series = doc["phases"][0]["telemetry"]["metrics"]
    first = sorted(series)[0]
    series[first] = [None] * len(series[first])  # never sampled
    for values in series.values():
        values[1] = None  # a moment when no metric was
    doc["probes"] = _probe_section(run_id)
    reported = (("a", 2), ("b", 4))
    doc["hosts"] = [{"host": name, "hostname": name, "cpu_count": cores} for name, cores in reported]
    script = result_doc(run_id="20261122T080000Z-eeee0011", seed=11, spec_extra={"loader_workers": 2})
    script["spec"]["model"] = script["model"]["name"] = "script:train.py"
    for phase in script["phases"]:
        phase["script"] = {"loader_used": False}
    source, copy = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for each in (doc, script):
        store.ingest_result(source, each)
    paths = store.export(source, fmt, tmp_path / "out")
    read = {Path(path).stem: _read(path, fmt) for path in paths}
    for rebuilt in docs_from_export(read):
        store.ingest_result(copy, rebuilt)
    queries = {
        "telemetry": "SELECT count(*), count(value) FROM telemetry",
        "probes": "SELECT kind, scope, size_bytes, busbw_gbps, world_size FROM probes ORDER BY ALL",
        "loader": "SELECT run_id, loader_workers FROM runs ORDER BY run_id",
        "hosts": "SELECT run_id, CAST(hosts AS VARCHAR) FROM runs ORDER BY run_id",
    }
    for name, sql in queries.items():
        with duckdb.connect(str(source), read_only=True) as a, duckdb.connect(str(copy), read_only=True) as b:
            assert b.execute(sql).fetchall() == a.execute(sql).fetchall(), name
    with duckdb.connect(str(copy), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM probes").fetchall() == [(4,)]
        assert con.execute("SELECT count(hosts) FROM runs").fetchall() == [(1,)]
        script_loader = "SELECT loader_workers FROM runs WHERE model LIKE 'script:%'"
        assert con.execute(script_loader).fetchall() == [(None,)]


def _read(path, fmt: str) -> pd.DataFrame:
    if fmt == "csv":
        return pd.read_csv(path)
    if fmt == "json":
        return pd.read_json(path, lines=True) if Path(path).stat().st_size else pd.DataFrame()
    return pd.read_parquet(path)


def test_samples_without_their_phases_are_refused_not_dropped(tmp_path) -> None:
    """A failed run's samples need no breakdown, but they hang on their phases: without the phases table they
    were left out without a word."""
    run_id = "20261122T090000Z-ffff0012"
    failed = result_doc(run_id=run_id, samples=True, seed=12)
    failed.update(status="failed", error="stopped", breakdown=None)
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, failed)
    read = {Path(path).stem: pd.read_parquet(path) for path in store.export(db, "parquet", tmp_path / "out")}
    every = "R0, R1, R2, R3"
    with pytest.raises(UsageError, match=f"run {run_id} has iterations rows of {every} but no phases row"):
        docs_from_export({"runs": read["runs"], "iterations": read["iterations"]})
    # one phase's row left out of the phases table: its samples were dropped without a word
    without_r0 = read["phases"][read["phases"]["phase"] != "R0"]
    with pytest.raises(UsageError, match=f"run {run_id} has iterations rows of R0 but no phases row of it"):
        docs_from_export({"runs": read["runs"], "phases": without_r0, "iterations": read["iterations"]})
    (doc,) = docs_from_export({name: read[name] for name in ("runs", "phases", "iterations")})
    assert doc["phases"][0]["samples"]["iteration_s"]


def test_a_runs_spec_that_is_not_an_object_is_said_so(tables) -> None:
    """A hand-edited spec of [1, 2] was refused as "AttributeError: 'list' object has no attribute 'get'"."""
    runs = tables["runs"].copy()
    runs["spec"] = "[1, 2]"
    with pytest.raises(UsageError, match=r"^run \S+ spec is not a JSON object$"):
        docs_from_export({**tables, "runs": runs})


@pytest.mark.parametrize(
    ("column", "value"), [("batch_size", -8), ("workers_per_node", 3), ("device", "cuda")]
)
def test_a_runs_column_edited_apart_from_its_spec_is_refused_not_dropped(tables, column, value) -> None:
    """The document is built from the spec: a batch size edited to -8 in the runs table was stored as 8."""
    runs = tables["runs"].copy()
    runs[column] = runs[column].astype(object)
    runs.loc[runs["run_id"] == RUN_ID, column] = value
    said = rf"^run {RUN_ID}: its {column} column \({value}\) differs from its spec's"
    with pytest.raises(UsageError, match=said):
        docs_from_export({**tables, "runs": runs})
    assert docs_from_export(tables)  # as exported, it reads back


def test_a_spec_holding_whole_numbers_as_decimals_reads_back(tables) -> None:
    """A file's batch_size 8.0 (stored as 8 in the runs table) was refused as edited: 8 differs from 8.0."""
    runs = tables["runs"].copy()
    row = runs["run_id"] == RUN_ID
    spec = json.loads(runs.loc[row, "spec"].iloc[0])
    spec["batch_size"] = float(spec["batch_size"])
    runs.loc[row, "spec"] = json.dumps(spec)
    assert [doc["run_id"] for doc in docs_from_export({**tables, "runs": runs})] == [RUN_ID, FAILED_ID]


def test_a_run_id_holding_a_terminal_escape_is_refused_before_a_message_shows_it(tables) -> None:
    """The Upload page said "no row of completed run 2026<ESC>[31m" with the escape in its text."""
    runs = tables["runs"].copy()
    runs.loc[runs["run_id"] == RUN_ID, "run_id"] = f"{RUN_ID}\x1b[31m"
    with pytest.raises(UsageError, match=r"^export: run_id holds the control character U\+001B$"):
        docs_from_export({**tables, "runs": runs})


@pytest.mark.parametrize("table", ["runs", "phases", "models", "instances"])
def test_a_json_export_of_one_row_given_to_ingest_is_said_to_be_one(tmp_path, table) -> None:
    """Was "not a Stash result file (no kind)": a table of two rows or more was said to be an export's."""
    db = tmp_path / "r.duckdb"
    doc = result_doc()
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    store.ingest_files(db, [path])
    out = tmp_path / "export"
    store.export(db, "json", out)
    one = tmp_path / f"{table}.json"
    first = (out / f"{table}.json").read_text(encoding="utf-8").splitlines()[0]
    one.write_text(first + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=f"one row of the {table} table") as refused:
        store.ingest_files(tmp_path / "other.duckdb", [one])
    assert "\n" not in str(refused.value) and not (tmp_path / "other.duckdb").exists()


def test_a_flat_object_that_is_no_table_row_is_still_not_a_result_file(tmp_path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": 1, "b": 2}', encoding="utf-8")
    with pytest.raises(UsageError, match='not a Stash result file'):
        store.ingest_files(tmp_path / "r.duckdb", [path])


def test_a_completed_run_stored_without_stalls_comes_back_from_its_own_export(tmp_path) -> None:
    """A completed run whose breakdown named no stall (all of its iteration not separated) has phases but no
    stall row; its own export was refused as 'the stalls table holds no row of completed run ...'."""
    db = tmp_path / "results.duckdb"
    doc = result_doc(run_id=RUN_ID, seed=9)
    doc["breakdown"]["stalls"] = None
    store.ingest_result(db, doc)
    paths = store.export(db, "parquet", tmp_path / "out")
    read = {Path(path).stem: pd.read_parquet(path) for path in paths}
    (back,) = docs_from_export(read)
    assert back["run_id"] == RUN_ID and back["breakdown"]["stalls"] in ({}, None)
    assert back["breakdown"]["iteration_s"] == pytest.approx(doc["breakdown"]["iteration_s"])
    store.ingest_result(tmp_path / "again.duckdb", back)  # and it is stored again


def test_a_hosts_cell_edited_into_anything_but_a_list_of_objects_is_left_out_not_refused(tables) -> None:
    """stash show takes such a cell without a note; read back from an export, the run was refused whole."""
    for cell in ('{"a": 1}', '["a", "b"]', "7"):
        runs = tables["runs"].assign(hosts=cell)
        docs = docs_from_export({"runs": runs, "phases": tables["phases"], "stalls": tables["stalls"]})
        assert docs and all("hosts" not in doc for doc in docs), cell
    good = tables["runs"].assign(hosts='[{"host": "a", "cpu_count": 2}]')
    docs = docs_from_export({"runs": good, "phases": tables["phases"], "stalls": tables["stalls"]})
    assert all(doc["hosts"] == [{"host": "a", "cpu_count": 2}] for doc in docs)
