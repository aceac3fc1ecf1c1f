"""Ingest: idempotent, atomic, faithful to the document, and refusing bad input without writing anything."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from result_docs import without_iteration_time

from stash_core import store
from stash_core.errors import StashError, UsageError
from stash_core.results.file import write_result_atomic
from stash_core.store import ingest as ingest_module


def test_ingesting_twice_stores_once(db_path, result_doc, row_counts) -> None:
    doc = result_doc()
    assert store.ingest_result(db_path, doc) is True
    first = row_counts(db_path)
    assert store.ingest_result(db_path, doc) is False
    assert row_counts(db_path) == first
    assert first["runs"] == 1 and first["stalls"] == 5 and first["phases"] == 4


def test_a_stall_wider_than_its_value_says_so_in_its_stored_note(db_path, result_doc) -> None:
    doc = result_doc()
    interconnect = doc["breakdown"]["stalls"]["interconnect"]
    interconnect["ci95_s"] = 2 * interconnect["seconds"]
    store.ingest_result(db_path, doc)
    notes = dict(store.stalls_frame(db_path, doc["run_id"])[["stall", "note"]].itertuples(index=False))
    assert notes["interconnect"] == "not resolved: its 95% interval is wider than its value"  # as stash show
    assert notes["compute"] == ""  # resolved: nothing to say


def test_a_run_on_remote_hosts_is_stored_under_the_host_that_ran_rank_0(db_path, result_doc) -> None:
    """Its fingerprint is the launching machine's: the run was stored under the laptop that started it, where
    the schema says the machine that ran rank 0 (R0 and R1 run on the first host)."""
    doc = result_doc()
    doc["hosts"] = [{"host": "10.0.0.1", "hostname": "gpu-a\x1b[31m"},
                    {"host": "10.0.0.2", "hostname": "gpu-b"}]
    store.ingest_result(db_path, doc)
    assert store.get_run(db_path, doc["run_id"])["hostname"] == "gpu-a\\x1b[31m"
    local = result_doc(run_id="local-run")
    store.ingest_result(db_path, local)
    assert store.get_run(db_path, "local-run")["hostname"] == local["fingerprint"]["hostname"] == "box1"


def test_rows_match_the_document(db_path, result_doc) -> None:
    # 1024 images per worker make 32 full batches of 32.
    doc = result_doc(dataset_images=2048, warnings=["R2: page cache held 3% of the data set at phase start"])
    doc["phases"][2]["samples"]["slowest_rank"][4] = None  # a value the profiler could not record
    doc["phases"][2]["samples"]["data_s"][4] = None
    store.ingest_result(db_path, doc, source_file="/tmp/run.json")
    run = store.get_run(db_path, doc["run_id"])
    assert run["source_file"] == "/tmp/run.json"
    assert run["model"] == "resnet18" and run["grad_bytes"] == 46758048 and run["instance"] == "my-laptop"
    assert run["hostname"] == "box1" and run["workers_per_node"] == 2 and run["iterations_per_epoch"] == 32
    assert run["spec"] == doc["spec"] and run["warnings"] == doc["breakdown"]["warnings"]
    assert run["iteration_s"] == pytest.approx(doc["breakdown"]["iteration_s"])

    iterations = store.iterations_frame(db_path, doc["run_id"])
    assert len(iterations) == sum(len(p["samples"]["iteration_s"]) for p in doc["phases"])
    r1 = iterations[iterations["phase"] == "R1"]
    source = doc["phases"][1]["samples"]
    assert list(r1["slowest_rank"]) == source["slowest_rank"]
    assert list(r1["iteration_s"]) == pytest.approx(source["iteration_s"])
    assert set(r1["slowest_rank"]) == {0, 1}  # two ranks, each the slowest sometimes
    r3 = iterations[iterations["phase"] == "R3"].reset_index(drop=True)
    assert r3["slowest_rank"].isna().tolist() == [i == 4 for i in range(len(r3))]
    assert r3["data_s"].isna().sum() == 1 and pd.isna(r3.loc[4, "data_s"])

    telemetry = store.telemetry_frame(db_path, doc["run_id"])
    expected_rows = sum(len(p["telemetry"]["t_s"]) * len(p["telemetry"]["metrics"]) for p in doc["phases"])
    assert len(telemetry) == expected_rows
    disk = telemetry[(telemetry["phase"] == "R0") & (telemetry["metric"] == "disk_read_mbps")]
    assert disk["value"].isna().tolist() == [True] + [False] * (len(disk) - 1)  # null stays null


def test_failed_run_without_breakdown_is_stored(db_path, result_doc) -> None:
    doc = result_doc(run_id="failed-run", status="failed")
    assert doc["breakdown"] is None
    assert store.ingest_result(db_path, doc) is True
    row = store.breakdown_frame(db_path, ["failed-run"]).iloc[0]
    assert row["status"] == "failed" and "R1 failed" in row["error"]
    assert row[["iteration_s", "compute_s", "disk_s", "epoch_s"]].isna().all()
    run = store.get_run(db_path, "failed-run")
    assert [(p["phase"], p["status"]) for p in run["phases"]] == [("R0", "completed"), ("R1", "failed")]
    assert run["stalls"] == []


def test_view_stalls_add_up_to_the_iteration_time(db_path, result_doc) -> None:
    store.ingest_result(db_path, result_doc())
    row = store.list_runs(db_path).iloc[0]
    parts = row["compute_s"] + row["interconnect_s"] + row["cpu_s"] + row["disk_s"]
    assert parts == pytest.approx(row["iteration_s"], rel=1e-12)
    shares = row["compute_share"] + row["interconnect_share"] + row["cpu_share"] + row["disk_share"]
    assert shares == pytest.approx(1.0, rel=1e-12)
    assert row["epoch_s"] == pytest.approx(row["iteration_s"] * row["iterations_per_epoch"])
    assert row["network_status"] == "not_measured"
    assert row["network_s"] != row["network_s"]  # NaN: not measured


def test_models_are_upserted_without_losing_known_values(db_path, result_doc) -> None:
    partial = result_doc(run_id="a", status="failed")
    partial["model"] = None  # died before the model was built: only the spec names it
    store.ingest_result(db_path, partial)
    store.ingest_result(db_path, result_doc(run_id="b"))
    later = result_doc(run_id="c", status="failed")
    later["model"] = None
    store.ingest_result(db_path, later)
    models = store.query_readonly(db_path, "SELECT * FROM models")
    assert len(models) == 1
    assert models.loc[0, "name"] == "resnet18" and models.loc[0, "param_count"] == 11689512


def test_failure_inside_the_transaction_leaves_nothing(db_path, result_doc, row_counts, monkeypatch) -> None:
    store.ingest_result(db_path, result_doc(run_id="kept"))
    before = row_counts(db_path)
    real_insert = ingest_module._insert_frame

    def insert_then_fail(con, table, frame, constants=None):
        if table == "telemetry":  # runs, models, phases, stalls and iterations are already in
            raise RuntimeError("disk full")
        real_insert(con, table, frame, constants)

    monkeypatch.setattr(ingest_module, "_insert_frame", insert_then_fail)
    with pytest.raises(RuntimeError):
        store.ingest_result(db_path, result_doc(run_id="half", model="other-model"))
    assert row_counts(db_path) == before
    assert store.get_run(db_path, "half") is None


def test_bad_documents_are_refused_before_writing(db_path, result_doc, row_counts) -> None:
    store.ingest_result(db_path, result_doc(run_id="kept"))
    before = row_counts(db_path)
    newer = result_doc(run_id="newer")
    newer["schema_version"] = 3
    wrong_type = result_doc(run_id="wrong")
    wrong_type["spec"]["batch_size"] = "thirty-two"
    bad_samples = result_doc(run_id="samples")
    bad_samples["phases"][0]["samples"]["forward_s"][3] = "fast"
    bad_rank = result_doc(run_id="rank")
    bad_rank["phases"][1]["samples"]["slowest_rank"][2] = 1.5  # Arrow alone would truncate this to 1
    for doc, message in [
        (newer, "upgrade Stash"),
        (wrong_type, "spec.batch_size must be an integer"),
        (bad_samples, "samples.forward_s holds non-numeric values"),
        (bad_rank, "samples.slowest_rank must hold ranks: whole numbers from 0 to 2,147,483,647"),
        ({"kind": "other"}, "not a Stash result"),
        *edited_series(result_doc),
    ]:
        with pytest.raises(UsageError, match=message):
            store.ingest_result(db_path, doc)
    assert row_counts(db_path) == before


def edited_series(result_doc) -> list[tuple[dict, str]]:
    """Series a file edited by hand could carry, stored as measured: an iteration of 1e300 s (the stored
    samples then averaged 1.7e298 s beside the phase's 0.18 s), a rank past int32, a CPU busy 1e308%."""
    huge = result_doc(run_id="huge")
    huge["phases"][0]["samples"]["iteration_s"][0] = 1e300
    rank = result_doc(run_id="rank-far")
    rank["phases"][1]["samples"]["slowest_rank"][0] = 2**40
    busy = result_doc(run_id="busy")
    busy["phases"][0]["telemetry"] = {"t_s": [0.0, 1.0], "metrics": {"cpu_util_pct": [50.0, 1e308]}}
    rate = result_doc(run_id="rate")
    rate["phases"][0]["telemetry"] = {"t_s": [0.0, 1.0], "metrics": {"disk_read_mbps": [-1.0, 2.0]}}
    return [
        (huge, r"phase R0 samples.iteration_s average .* s, far from the phase's mean, 0.2 s, though"),
        (rank, "samples.slowest_rank must hold ranks"),
        (busy, "telemetry metric cpu_util_pct holds 1e[+]308; a measured value lies between 0 and 100"),
        (rate, "telemetry metric disk_read_mbps holds -1.0; a measured value lies between 0 and 1e[+]18"),
    ]


def test_ingest_files_reports_each_file_and_is_idempotent(tmp_path, db_path, result_doc) -> None:
    paths = [write_result_atomic(tmp_path / f"r{i}.json", result_doc(run_id=f"run-{i}")) for i in range(3)]
    outcome = store.ingest_files(db_path, paths)
    assert [(path, run_id, inserted) for path, run_id, inserted in outcome] == [
        (paths[0], "run-0", True),
        (paths[1], "run-1", True),
        (paths[2], "run-2", True),
    ]
    assert [inserted for _, _, inserted in store.ingest_files(db_path, paths)] == [False, False, False]
    assert store.get_run(db_path, "run-1")["source_file"] == str(paths[1].resolve())


@pytest.mark.parametrize(("turn_s", "connections"), [(0.0, 4), (60.0, 1)])
def test_files_share_a_connection_until_readers_are_due_a_turn(
    tmp_path, db_path, result_doc, monkeypatch, turn_s, connections
) -> None:
    paths = [write_result_atomic(tmp_path / f"r{i}.json", result_doc(run_id=f"run-{i}")) for i in range(4)]
    store.ingest_result(db_path, result_doc(run_id="first"))  # the database exists: only the batch counts
    opened = []
    real_connect = ingest_module.connect

    def counting(*args, **kwargs):
        opened.append(kwargs.get("read_only", False))
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "READER_TURN_S", turn_s)
    monkeypatch.setattr(ingest_module, "connect", counting)
    outcome = store.ingest_files(db_path, paths)
    assert [inserted for _, _, inserted in outcome] == [True] * 4
    assert opened.count(False) == connections  # writers (the first also checks for conflicts)
    assert [store.get_run(db_path, f"run-{i}")["run_id"] for i in range(4)] == [f"run-{i}" for i in range(4)]


def _corrupt(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc)[:200])


def _foreign(path: Path, doc: dict) -> None:
    path.write_text(json.dumps({"name": "some other tool", "values": [1, 2]}))


def _newer(path: Path, doc: dict) -> None:
    path.write_text(json.dumps({**doc, "schema_version": 3}))


def _missing_key(path: Path, doc: dict) -> None:
    path.write_text(json.dumps({key: value for key, value in doc.items() if key != "phases"}))


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_corrupt, "not valid JSON"),
        (_foreign, "not a Stash result file"),
        (_newer, "schema_version 3"),
        (_missing_key, "missing required key"),
        (lambda path, doc: None, "does not exist"),
    ],
)
def test_a_bad_second_file_stops_the_whole_batch(
    tmp_path, db_path, result_doc, row_counts, spoil, message
) -> None:
    store.ingest_result(db_path, result_doc(run_id="already-there"))
    before = row_counts(db_path)
    good = write_result_atomic(tmp_path / "good.json", result_doc(run_id="good"))
    bad = tmp_path / "bad.json"
    spoil(bad, result_doc(run_id="bad"))
    with pytest.raises(UsageError, match=message) as caught:
        store.ingest_files(db_path, [good, bad])
    assert str(bad) in str(caught.value)
    # the good file was not stored either, and the refusal says so: it named the bad file alone
    assert str(caught.value).endswith(
        "; nothing stored: every file is checked before any is stored, so the other was not stored either"
    )
    assert row_counts(db_path) == before
    assert store.get_run(db_path, "good") is None


def test_unusable_database_paths_are_usage_errors(tmp_path, result_doc) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="plain-file is a file, not a folder"):  # it said "File exists"
        store.ingest_result(blocker / "results.duckdb", result_doc())
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database" * 1000)
    with pytest.raises(UsageError, match="cannot open database"):
        store.ingest_result(junk, result_doc())
    with pytest.raises(UsageError, match="cannot open database"):
        store.list_runs(junk)


def test_reading_a_missing_database_is_empty_and_creates_nothing(tmp_path) -> None:
    path = tmp_path / "never-written.duckdb"
    runs = store.list_runs(path)
    assert runs.empty and {"run_id", "compute_s", "disk_share", "iteration_ci95_s"} <= set(runs.columns)
    assert store.get_run(path, "anything") is None
    assert store.database_summary(path)["runs"] == 0
    assert not path.exists()


def test_communication_and_unseparated_time_are_stored_for_show(db_path, result_doc) -> None:
    doc = result_doc()
    disk_s = doc["breakdown"]["stalls"]["disk"]["seconds"]
    doc["breakdown"]["stalls"]["disk"].update(seconds=None, share=None, epoch_s=None, ci95_s=None,
                                             status="not_separable")
    doc["breakdown"]["unattributed_s"] = 0.012  # stale: the store keeps the remainder of the stalls
    doc["breakdown"]["network_reference"] = "R1 (2 workers, 1 machine) vs R1n (2x1 workers)"
    doc["breakdown"]["communication"] = {"interconnect": {"allreduce_s": 0.02, "world_size": 2}}
    store.ingest_result(db_path, doc)
    run = store.get_run(db_path, doc["run_id"])
    assert run["unattributed_s"] == pytest.approx(disk_s) and run["unattributed_ci95_s"] > 0
    assert run["network_reference"].startswith("R1 (2 workers")
    assert run["communication"] == {"interconnect": {"allreduce_s": 0.02, "world_size": 2}}


def test_a_run_id_stored_with_other_content_is_refused_and_the_same_content_is_not(
    tmp_path, db_path, result_doc, row_counts
) -> None:
    doc = result_doc(run_id="the-run")
    assert store.ingest_result(db_path, doc) is True
    stored = row_counts(db_path)
    assert (
        store.ingest_result(db_path, json.loads(json.dumps(doc))) is False
    )  # the same run again: idempotent
    other = json.loads(json.dumps(doc))
    other["breakdown"]["iteration_s"] *= 2  # and the figures it is made of: a file that adds up
    other["breakdown"]["epoch_s"] *= 2
    reference = next(p for p in other["phases"] if p["name"] == other["breakdown"]["reference_phase"])
    added_s = reference["iteration_s"]["mean"]
    reference["iteration_s"]["mean"] *= 2
    last_stall = other["breakdown"]["stalls"]["disk"]  # the reference run's stall: it grows as much
    last_stall["seconds"] += added_s
    last_stall["epoch_s"] = last_stall["seconds"] * other["breakdown"]["iterations_per_epoch"]
    other["status"] = "interrupted"
    with pytest.raises(UsageError, match="already stored with other status, iteration_s"):
        store.ingest_result(db_path, other)
    # A batch that holds such a file stores none of its files.
    good = write_result_atomic(tmp_path / "good.json", result_doc(run_id="good"))
    changed = write_result_atomic(tmp_path / "changed.json", other)
    with pytest.raises(UsageError, match=f"{changed}: run the-run is already stored"):
        store.ingest_files(db_path, [good, changed])
    twice = write_result_atomic(tmp_path / "twice.json", {**other, "run_id": "good"})
    with pytest.raises(UsageError, match="also in"):
        store.ingest_files(db_path, [good, twice])
    assert row_counts(db_path) == stored and store.get_run(db_path, "the-run")["status"] == "completed"


def _stall_interval(doc: dict) -> None:  # its seconds are its runs' difference, refused when changed alone
    compute = doc["breakdown"]["stalls"]["compute"]
    compute["ci95_s"] += 0.01
    if compute.get("epoch_ci95_s") is not None:  # a file's stall epoch is its seconds times the iterations
        compute["epoch_ci95_s"] = compute["ci95_s"] * doc["breakdown"]["iterations_per_epoch"]


def _phase_median(doc: dict) -> None:  # the mean is the compute stall's: changed alone, the file is refused
    doc["phases"][0]["iteration_s"]["median"] = max(doc["phases"][0]["samples"]["iteration_s"])  # in range


def _error(doc: dict) -> None:
    doc["error"] = "the run died"


def _param_count(doc: dict) -> None:  # the fits' feature: was "already stored", the new count dropped
    doc["model"]["param_count"] += 1


def _cpu_model(doc: dict) -> None:  # the label check's evidence
    doc["fingerprint"]["cpu_model"] = "another CPU"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_stall_interval, "stall compute ci95_s"),
        (_phase_median, "phase R0 median_s"),
        (_error, "error"),
        (_param_count, "param_count"),
        (_cpu_model, "fingerprint"),
    ],
)
def test_a_run_id_stored_with_other_figures_is_refused_naming_them(
    tmp_path, db_path, result_doc, row_counts, change, named
) -> None:
    """Not only the run's identity: a stall, a phase statistic or the error that differs is other content
    (such files were 'already stored', their figures silently dropped)."""
    doc = result_doc(run_id="the-run")
    first = write_result_atomic(tmp_path / "first.json", doc)
    store.ingest_files(db_path, [first])
    stored = row_counts(db_path)
    other = json.loads(json.dumps(doc))
    change(other)
    with pytest.raises(UsageError, match=f"run the-run is already stored with other {named};"):
        store.ingest_result(db_path, other)
    changed = write_result_atomic(tmp_path / "changed.json", other)
    with pytest.raises(UsageError, match=f"{changed}: run the-run is already stored with other {named};"):
        store.ingest_files(db_path, [changed])
    said = f"{changed}: run the-run is also in {first} with other {named}; nothing"
    with pytest.raises(UsageError, match=said):
        store.ingest_files(tmp_path / "fresh.duckdb", [first, changed])
    assert not (tmp_path / "fresh.duckdb").exists()
    assert row_counts(db_path) == stored
    assert store.ingest_files(db_path, [first, first]) == [(first, "the-run", False)] * 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: doc["spec"].update(batch_size=2**31), "spec.batch_size must be an integer from 0 to"),
        (lambda doc: doc["spec"].update(dataset_images=2**63), "spec.dataset_images"),
        # a hand-edited file without its batch size was stored as a run of "batch unknown per worker"
        (lambda doc: doc["spec"].pop("batch_size"), "spec lacks batch_size"),
        (lambda doc: [doc["spec"].pop(key) for key in ("nodes", "model")], "spec lacks model, nodes"),
        (lambda doc: doc["spec"].update(model=None, nodes=None), "spec lacks model, nodes"),  # null is none
        (lambda doc: doc["spec"].update(model=" "), "spec lacks model"),
        (lambda doc: doc["model"].update(param_count=-4), "model.param_count"),
        (lambda doc: doc["breakdown"].update(iteration_s=float("inf")), "breakdown.iteration_s"),
        (lambda doc: doc["phases"][0]["samples"].update(iteration_s=[[0.1]] * 5), "samples.iteration_s"),
        (lambda doc: doc.update(run_id="a\u202eb"), "run_id holds the control character U\\+202E"),
        (lambda doc: doc.update(started_at="1600-01-01T00:00:00"), "outside the representable range"),
    ],
)
def test_values_the_store_cannot_hold_name_their_field(
    db_path, result_doc, row_counts, change, message
) -> None:
    store.ingest_result(db_path, result_doc(run_id="kept"))
    before = row_counts(db_path)
    doc = result_doc(run_id="refused")
    change(doc)
    with pytest.raises(UsageError, match=message) as caught:
        store.ingest_result(db_path, doc)
    assert "\n" not in str(caught.value) and row_counts(db_path) == before


def test_a_scripts_loader_workers_are_stored_only_where_its_runs_recorded_them(db_path, result_doc) -> None:
    """A script's result made before its runs recorded their DataLoader's workers holds the --loader-workers
    default, which the script never saw: stored as unknown, not as 2."""
    recorded = result_doc(run_id="script-now")
    old = result_doc(run_id="script-before")
    for doc, info in ((recorded, {"loader_used": True, "loader_workers": 3}), (old, {"loader_used": True})):
        doc["spec"]["loader_workers"] = 3 if doc is recorded else 2
        for phase in doc["phases"]:
            phase["script"] = dict(info)
        store.ingest_result(db_path, doc)
    assert store.get_run(db_path, "script-now")["loader_workers"] == 3
    assert store.get_run(db_path, "script-before")["loader_workers"] is None
    plain = result_doc(run_id="zoo-model")  # Stash's own loader: its --loader-workers, as given
    store.ingest_result(db_path, plain)
    given = plain["spec"]["loader_workers"]
    assert given is not None and store.get_run(db_path, "zoo-model")["loader_workers"] == given


def test_an_impossible_number_is_refused_and_shares_follow_the_seconds(db_path, result_doc):
    doc = result_doc(run_id="huge")
    doc["breakdown"]["stalls"]["cpu"]["ci95_s"] = 1e308  # (its seconds are its runs' difference)
    with pytest.raises(UsageError, match="stall cpu ci95_s is a number too large to store"):
        store.ingest_result(db_path, doc)
    assert not db_path.exists()
    doc = result_doc(run_id="wrong-share")
    doc["breakdown"]["stalls"]["compute"]["share"] = 0.9  # the file's share disagrees with its seconds
    store.ingest_result(db_path, doc)
    with duckdb.connect(str(db_path), read_only=True) as con:
        row = con.execute(
            "SELECT compute_s / iteration_s, compute_share, compute_share + coalesce(interconnect_share, 0)"
            " + coalesce(network_share, 0) + coalesce(cpu_share, 0) + coalesce(disk_share, 0)"
            " + unattributed_share FROM stall_breakdown"
        ).fetchall()[0]
    assert row[1] == pytest.approx(row[0]) and row[2] == pytest.approx(1.0)


def test_an_unknown_iteration_time_leaves_the_epoch_and_the_shares_unknown(db_path, result_doc):
    doc = without_iteration_time(result_doc(run_id="no-iteration-time"))  # a file's "unknown"
    store.ingest_result(db_path, doc)
    with duckdb.connect(str(db_path), read_only=True) as con:
        run = con.execute("SELECT iteration_s, epoch_s FROM runs").fetchall()[0]
        shares = con.execute("SELECT count(*) FROM stalls WHERE share IS NOT NULL").fetchall()[0][0]
    assert run == (None, None) and shares == 0  # no epoch or share shown beside an unknown iteration


def test_a_failed_insert_of_samples_names_its_own_cause(db_path, result_doc, row_counts) -> None:
    # A constraint added by hand fails the phases insert inside the transaction; the error says so (it was
    # hidden behind 'Current transaction is aborted' from cleaning up after it). (A dropped or retyped column
    # is refused before any insert: test_migrations.py, below.)
    store.ingest_result(db_path, result_doc(run_id="20261122T100000Z-00000001"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("UPDATE phases SET error = ''")
        con.execute("ALTER TABLE phases ALTER COLUMN error SET NOT NULL")
    before = row_counts(db_path)
    with pytest.raises(UsageError, match="cannot store run .*Constraint Error") as err:
        store.ingest_result(db_path, result_doc(run_id="20261122T100000Z-00000002"))
    assert "aborted" not in str(err.value)
    assert row_counts(db_path) == before


def test_a_column_of_another_type_is_refused_before_anything_is_read_or_written(db_path, result_doc) -> None:
    # `stash runs` was a traceback (a VARCHAR iteration time in the middle of a query)
    store.ingest_result(db_path, result_doc(run_id="20261122T100000Z-00000001"))
    with duckdb.connect(str(db_path)) as con:
        con.execute("ALTER TABLE phases ALTER COLUMN description TYPE INTEGER USING length(description)")
        con.execute("ALTER TABLE runs ALTER COLUMN iteration_s TYPE VARCHAR")
    retyped = r"runs \(iteration_s is VARCHAR, not DOUBLE\); phases \(description is INTEGER, not VARCHAR\)"
    with pytest.raises(UsageError, match=retyped + ", changed by hand"):
        store.ingest_result(db_path, result_doc(run_id="20261122T100000Z-00000002"))
    with pytest.raises(UsageError, match=retyped):
        store.list_runs(db_path)
    with duckdb.connect(str(db_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(1,)]


class _DiskFullsAtPhases:
    """A connection whose insert of phases fails as a full disk does, leaving the transaction aborted."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, sql: str, *args, **kwargs):
        if sql.startswith("INSERT INTO phases"):
            with pytest.raises(duckdb.Error):
                self._con.execute("SELECT CAST('x' AS INTEGER)")  # aborts the transaction
            raise duckdb.IOException("IO Error: Could not write file: No space left on device")
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._con, name)


def test_a_full_disk_during_the_samples_insert_says_the_disk_is_full(
    db_path, result_doc, monkeypatch
) -> None:
    store.ingest_result(db_path, result_doc(run_id="20261122T100000Z-00000001"))
    real_connect = ingest_module.connect

    @contextlib.contextmanager
    def disk_fills(path):
        with real_connect(path) as con:
            yield _DiskFullsAtPhases(con)

    monkeypatch.setattr(ingest_module, "connect", disk_fills)
    with pytest.raises(
        StashError, match=r"the disk holding the database is full \(No space left on device\)"
    ):
        store.ingest_result(db_path, result_doc(run_id="20261122T100000Z-00000002"))


def _three_result_files(tmp_path, result_doc) -> list[Path]:
    """Result files of three runs, ...00000001 to ...00000003, for an ingest stopped by the third."""
    paths = []
    for serial in (1, 2, 3):
        path = tmp_path / f"r{serial}.json"
        write_result_atomic(path, result_doc(run_id=f"20261122T100000Z-0000000{serial}"))
        paths.append(path)
    return paths


def test_an_ingest_that_fails_part_way_says_which_files_it_stored(db_path, result_doc, monkeypatch, tmp_path):
    """A full disk after some runs of a folder were stored exited with 'nothing written' words and listed
    nothing: the runs stored before the failure were not said."""
    paths = _three_result_files(tmp_path, result_doc)
    real_insert = ingest_module._insert
    calls = []

    def third_fills_the_disk(con, run):
        calls.append(run.run_id)
        if len(calls) == 3:
            raise StashError("cannot store run x: the disk holding the database is full")
        return real_insert(con, run)

    monkeypatch.setattr(ingest_module, "_insert", third_fills_the_disk)
    with pytest.raises(StashError) as failed:
        store.ingest_files(db_path, paths)
    assert not isinstance(failed.value, UsageError)  # the database changed: not "nothing written"
    named = ", ".join(str(path) for path in paths[:2])  # which went in, not only how many
    assert str(failed.value).endswith(f"; 2 of the 3 files were stored before it ({named}; the same command "
                                      "again stores the rest, none twice)")  # fmt: skip


def test_a_result_file_with_other_samples_is_refused_not_called_already_stored(tmp_path, db_path, result_doc):
    """The runs, phases and stalls rows were compared, the samples not: a file whose iteration times differ
    from the stored run's was "already stored"."""
    doc = result_doc(run_id="20261122T080000Z-aaaa0031")
    store.ingest_result(db_path, doc)
    other = json.loads(json.dumps(doc))
    other["phases"][0]["samples"]["iteration_s"][0] *= 2
    with pytest.raises(UsageError, match=r"already stored with other iterations R\d"):
        store.ingest_result(db_path, other)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_result_atomic(first, result_doc(run_id="20261122T080000Z-aaaa0032", seed=3))
    changed = json.loads(first.read_text())
    metrics = changed["phases"][1]["telemetry"]["metrics"]
    metrics[next(iter(metrics))][0] += 1
    write_result_atomic(second, changed)
    with pytest.raises(UsageError, match="is also in .* with other telemetry"):
        store.ingest_files(db_path, [first, second])


def test_a_result_file_whose_samples_differ_in_a_part_of_the_step_is_refused(db_path, result_doc):
    """Samples were compared by their iteration times alone: a file whose forward times differ was "already
    stored" and the stored ones kept."""
    doc = result_doc(run_id="20261122T080000Z-aaaa0033")
    store.ingest_result(db_path, doc)
    other = json.loads(json.dumps(doc))
    samples = other["phases"][0]["samples"]
    assert samples.get("forward_s"), "the fixture's samples hold the step's parts"
    samples["forward_s"][0] += 0.001
    with pytest.raises(UsageError, match=r"already stored with other iterations R\d forward_s"):
        store.ingest_result(db_path, other)


def test_a_stored_run_without_its_parts_of_the_step_is_not_other_content(db_path, result_doc):
    """A run stored from an export that held its iteration times alone: its file, ingested again, is not
    refused for parts the database never had."""
    doc = result_doc(run_id="20261122T080000Z-aaaa0034")
    store.ingest_result(db_path, doc)
    with store.connect(db_path) as con:
        con.execute("UPDATE iterations SET data_s = NULL, forward_s = NULL, backward_s = NULL, "
                    "optimizer_s = NULL, slowest_rank = NULL")  # fmt: skip
    assert store.ingest_result(db_path, doc) is False  # already stored, not refused


def test_a_result_file_with_other_communication_is_refused_not_called_already_stored(db_path, result_doc):
    """The probes' bus bandwidth and the network reference were not compared: an edited file was "already
    stored" and the old figures kept."""
    doc = result_doc(run_id="20261122T080000Z-aaaa0034")
    doc["breakdown"]["communication"] = {"interconnect": {"busbw_gbps": 4.24, "workers": 2}}
    store.ingest_result(db_path, doc)
    other = json.loads(json.dumps(doc))
    other["breakdown"]["communication"]["interconnect"]["busbw_gbps"] = 99.0
    with pytest.raises(UsageError, match=r"already stored with other communication"):
        store.ingest_result(db_path, other)
    assert store.ingest_result(db_path, json.loads(json.dumps(doc))) is False


def test_a_run_stored_without_its_samples_gets_them_from_its_result_file(tmp_path, db_path, result_doc):
    """A run uploaded from an export without its iterations, telemetry or probes: its own result file was
    "already stored" and the samples never came; now they are added, once."""
    from stash_core.store.import_export import docs_from_export

    doc = result_doc(run_id="20261122T080000Z-aaaa0033")
    source = tmp_path / "source.duckdb"
    store.ingest_result(source, doc)
    read = {Path(p).stem: pd.read_parquet(p) for p in store.export(source, "parquet", tmp_path / "out")}
    (bare,) = docs_from_export({name: read[name] for name in ("runs", "phases", "stalls")})
    assert store.ingest_result(db_path, bare) is True
    with duckdb.connect(str(db_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM iterations").fetchall() == [(0,)]
    assert store.ingest_result(db_path, doc) is True  # its samples added
    assert store.ingest_result(db_path, doc) is False  # and once only
    sql = "SELECT count(*), sum(iteration_s) FROM iterations"
    with duckdb.connect(str(db_path), read_only=True) as a, duckdb.connect(str(source), read_only=True) as b:
        assert a.execute(sql).fetchall() == b.execute(sql).fetchall()
        telemetry = "SELECT count(*) FROM telemetry"
        assert a.execute(telemetry).fetchall() == b.execute(telemetry).fetchall()


def test_a_run_stored_without_its_empty_telemetry_moments_is_still_the_same_run(db_path, result_doc):
    """An earlier Upload page dropped telemetry rows with no value: the run's own file was then refused as
    other telemetry, and the whole batch with it. Moments with no value are no content."""
    doc = result_doc(run_id="20261122T080000Z-aaaa0034")
    metrics = doc["phases"][1]["telemetry"]["metrics"]
    for values in metrics.values():
        values[2] = None  # a moment when no metric was sampled
    store.ingest_result(db_path, doc)
    with duckdb.connect(str(db_path)) as con:
        con.execute("DELETE FROM telemetry WHERE value IS NULL")
    assert store.ingest_result(db_path, doc) is False


def test_a_warning_holding_a_file_names_bytes_that_are_not_utf8_is_stored(db_path, result_doc) -> None:
    """The run of a data set with such a name could not be stored, nor ingested later from its file."""
    doc = result_doc(run_id="run-s")
    doc["breakdown"]["warnings"].append("skipping 1 of 62 image files: 1 corrupt (c0/bad\udcff\udcfe.jpg: x)")
    store.ingest_result(db_path, doc)
    [stored] = store.get_run(db_path, "run-s")["warnings"][-1:]
    assert stored.endswith("(c0/bad\\xff\\xfe.jpg: x)")


def test_a_spec_holding_a_file_names_bytes_that_are_not_utf8_is_stored(db_path, result_doc) -> None:
    """A file already written with such a data set path could not be ingested (its `stash ingest` failed)."""
    doc = result_doc(run_id="run-t")
    doc["spec"]["dataset"] = "/data/bad\udcff"
    store.ingest_result(db_path, doc)
    assert store.get_run(db_path, "run-t")["dataset"] == "/data/bad\\xff"


def test_an_ingest_interrupted_part_way_says_how_many_it_stored(
    db_path, result_doc, monkeypatch, tmp_path, capsys
) -> None:
    """Ctrl-C after 204 of 300 files were stored printed only "stash: interrupted"."""
    from stash_core.exits import run_command

    paths = _three_result_files(tmp_path, result_doc)
    real_insert = ingest_module._insert

    def third_is_interrupted(con, run):
        if run.run_id.endswith("3"):
            raise KeyboardInterrupt
        return real_insert(con, run)

    monkeypatch.setattr(ingest_module, "_insert", third_is_interrupted)
    assert run_command(lambda: store.ingest_files(db_path, paths)) == 130
    named = ", ".join(str(path) for path in paths[:2])
    assert capsys.readouterr().err == (  # the third's insert may have been committed when the interrupt came
        f"stash: 2 of the 3 files were stored before it ({named}, and perhaps {paths[2]}, being stored when "
        "it stopped; the same command again stores the rest, none twice)\nstash: interrupted\n"
    )
    assert len(store.list_runs(db_path)) == 2


def _with_probes(doc: dict) -> dict:
    """The run with a probe set of its R1, as the profile writes it (probe_id "<run_id>-R1")."""
    doc["probes"] = [{
        "probe_id": f"{doc['run_id']}-R1", "run_id": doc["run_id"], "phase": "R1",
        "started_at": "2026-11-22T11:00:00+00:00", "hostname": "vm", "backend": "gloo", "device": "cpu",
        "world_size": 2, "nodes": 1, "workers_per_node": 2,
        "allreduce": [{"size_bytes": 4096, "repetitions": 4, "time_s": 0.001, "busbw_gbps": 0.03}],
    }]  # fmt: skip
    return doc


def test_a_copy_of_a_run_under_another_run_id_does_not_store_its_probe_sets_again(
    tmp_path, db_path, result_doc
):
    """A copy of a run's file with a new run_id (what the refusal of an edited run suggests) stored its
    probe sets again under the same probe_id: one probe_id named two sets, and `stash fit` read both."""
    doc = _with_probes(result_doc(run_id="20261122T080000Z-aaaa0041"))
    store.ingest_result(db_path, doc)
    copy = json.loads(json.dumps(doc))
    copy["run_id"] = "20261122T080000Z-aaaa0042"
    with pytest.raises(UsageError, match=r"probe set 20261122T080000Z-aaaa0041-R1 belongs to run "
                                         r"20261122T080000Z-aaaa0041 already"):  # fmt: skip
        store.ingest_result(db_path, copy)
    first, second = tmp_path / "a.json", tmp_path / "b.json"  # in one command: the second file is named
    write_result_atomic(first, _with_probes(result_doc(run_id="20261122T080000Z-aaaa0043")))
    copied = json.loads(first.read_text())
    copied["run_id"] = "20261122T080000Z-aaaa0044"
    write_result_atomic(second, copied)
    said = rf"^{second}: probe set .*-aaaa0043-R1 belongs to run .* in {first}"
    with pytest.raises(UsageError, match=said):
        store.ingest_files(db_path, [first, second])
    with duckdb.connect(str(db_path), read_only=True) as con:
        stored = con.execute("SELECT probe_id, count(DISTINCT run_id) FROM probes GROUP BY 1").fetchall()
    assert stored == [("20261122T080000Z-aaaa0041-R1", 1)]
    assert store.ingest_result(db_path, json.loads(json.dumps(doc))) is False  # the run itself: stored once


def test_a_stored_run_whose_probe_sets_a_copy_holds_too_is_read_again_as_stored(
    tmp_path, db_path, result_doc
):
    """A database of an earlier version holds a run and a copy of it with the same probe sets: ingesting the
    run's own file again, beside a new one, refused both (the run was blamed as the copy)."""
    doc = _with_probes(result_doc(run_id="20261122T080000Z-aaaa0045"))
    store.ingest_result(db_path, doc)
    with duckdb.connect(str(db_path)) as con:  # the copy's probe rows, as an earlier version stored them
        con.execute("INSERT INTO probes SELECT * REPLACE ('20261122T080000Z-aaaa0046' AS run_id) FROM probes")
    again, new = tmp_path / "again.json", tmp_path / "new.json"
    write_result_atomic(again, doc)
    write_result_atomic(new, _with_probes(result_doc(run_id="20261122T080000Z-aaaa0047", seed=5)))
    outcomes = store.ingest_files(db_path, [again, new])
    assert [inserted for _, _, inserted in outcomes] == [False, True]


def test_ingest_says_a_stored_run_given_what_it_lacked_was_completed_not_stored(
    tmp_path, db_path, result_doc, capsys
) -> None:
    """A run stored without its samples (an export's, a layout before 6) given its file again said "stored",
    as a new run is: it is "completed", and the same file a third time "already stored"."""
    import duckdb

    from stash_core.cli.main import main

    doc = result_doc(run_id="20261122T080000Z-aaaa0041")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    assert main(["ingest", str(path), "--db", str(db_path)]) == 0
    with duckdb.connect(str(db_path)) as con:
        con.execute("DELETE FROM iterations WHERE run_id = ?", [doc["run_id"]])
    assert main(["ingest", str(path), "--db", str(db_path)]) == 0
    assert main(["ingest", str(path), "--db", str(db_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = [line.split("  ")[0] for line in lines if not line.startswith("note:")]
    assert said == ["stored", "completed (what it lacked added)", "already stored"]


def test_each_file_is_said_as_it_goes_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`stash ingest` printed its "stored" lines at the end: a Ctrl-C part of the way lost all of them. And a
    reader that goes away (`| head -1`) stops the saying, never the storing."""
    from result_docs import result_doc

    paths = []
    for n in range(3):
        paths.append(tmp_path / f"r{n}.json")
        write_result_atomic(paths[-1], result_doc(run_id=f"20261122T09000{n}Z-eeee000{n}"))
    inserted = ingest_module._insert
    calls = []

    def stopped_at_the_second(con, item):
        calls.append(item)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return inserted(con, item)

    monkeypatch.setattr(ingest_module, "_insert", stopped_at_the_second)
    heard = []
    with pytest.raises(KeyboardInterrupt):
        store.ingest_files(tmp_path / "a.duckdb", paths, words=True,
                           on_stored=lambda *said: heard.append(said))  # fmt: skip
    assert [said[1] for said in heard] == ["20261122T090000Z-eeee0000"]  # said before the interrupt
    monkeypatch.setattr(ingest_module, "_insert", inserted)

    def gone(*said):
        raise BrokenPipeError(32, "Broken pipe")

    outcomes = store.ingest_files(tmp_path / "b.duckdb", paths, words=True, on_stored=gone)
    assert [said for _, _, said in outcomes] == ["stored"] * 3
