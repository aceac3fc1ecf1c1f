"""Simulations in the store: one row per policy, idempotent, bad documents refused."""

from __future__ import annotations

import json

import duckdb
import pytest

from stash_core.errors import UsageError
from stash_core.sched import Cluster, Policy, TraceJob
from stash_core.sched.report import run_simulation, save_simulation
from stash_core.store import ingest_simulation, simulations_frame


def doc():
    jobs = [
        TraceJob("X", 3, 0.0, 100.0, None, 1.5, "trace"),
        TraceJob("Y", 2, 1.0, 100.0, None, 1.5, "trace"),
    ]
    document, _ = run_simulation(jobs, Cluster(1, 2, 4), [Policy("fifo"), Policy("las")], tuning="given",
                                 trace="t.csv", trace_format="tiresias")  # fmt: skip
    return document


def test_a_simulation_is_stored_once_with_a_row_per_policy(tmp_path):
    document = doc()
    path = save_simulation(document, tmp_path / "results")
    assert json.loads(path.read_text()) == document and not list((tmp_path / "results").glob(".sim-*"))
    db = tmp_path / "r.duckdb"
    assert ingest_simulation(db, document, str(path)) is True
    assert ingest_simulation(db, document, str(path)) is False
    frame = simulations_frame(db)
    assert sorted(frame["policy"]) == ["fifo", "las"]
    row = frame.set_index("policy").loc["fifo"]
    assert (row["jobs"], row["cluster_gpus"], row["trace_format"]) == (2, 8, "tiresias")
    assert row["avg_jct_s"] == pytest.approx(100.0)  # both start at once: 100 s each
    assert json.loads(row["jct_cdf"])[-1] == [100.0, 1.0] and json.loads(row["settings"])["label"] == "fifo"


@pytest.mark.parametrize(
    "change, message",
    [({"kind": "other"}, "not a simulation"), ({"cluster": {}}, "missing field cluster.switches"),
     ({"policies": []}, "no policies"),
     # names the simulator never gives were stored and shown as its own
     ({"trace_format": "slurm"},
      "trace_format is 'slurm'; expected one of tiresias, philly, pai2020, helios, synthetic")],
)  # fmt: skip
def test_bad_documents_are_refused_and_store_nothing(tmp_path, change, message):
    db = tmp_path / "r.duckdb"
    with pytest.raises(UsageError, match=message):
        ingest_simulation(db, {**doc(), **change})
    assert simulations_frame(db).empty


P0 = "policies\\[0\\]"  # the first policy, as a message names it (a pattern)
M = f"{P0}.metrics."


def _first(document, **changes):
    document["policies"][0].update(**changes)


def _metrics(document, **changes):
    document["policies"][0]["metrics"].update(**changes)


def _changed(change):
    document = doc()
    change(document)
    return document


@pytest.mark.parametrize(
    "change, message",
    [(lambda d: d["policies"].append(dict(d["policies"][0])), "policy 'fifo' is given twice"),
     (lambda d: _first(d, policy=None), f"{P0}.policy is None"),
     (lambda d: _first(d, policy=" "), f"{P0}.policy is ' '"),
     (lambda d: _metrics(d, preemptions=1e30), f"{M}preemptions is 1e\\+30"),
     (lambda d: _metrics(d, spread_jobs=1.5), f"{M}spread_jobs is 1.5"),
     (lambda d: _metrics(d, makespan_s=-100), f"{M}makespan_s is -100"),
     (lambda d: _metrics(d, gpu_busy_share=-3), f"{M}gpu_busy_share is -3"),
     (lambda d: _metrics(d, gpu_busy_share=1.5), f"{M}gpu_busy_share is 1.5"),
     (lambda d: d.update(jobs=-5), "jobs is -5"),
     (lambda d: d.update(jobs=True), "jobs is True"),
     (lambda d: d.update(jobs=float("inf")), "jobs is inf"),  # OverflowError, a traceback
     (lambda d: _metrics(d, preemptions=float("nan")), f"{M}preemptions is nan"),
     (lambda d: d["cluster"].update(gpus=0), "cluster.gpus is 0")],
    ids=["policy-twice", "policy-null", "policy-blank", "huge-count", "half-count", "negative-time",
         "negative-share", "share-over-one", "negative-jobs", "bool-jobs", "inf-jobs", "nan-count",
         "no-gpus"],
)  # fmt: skip
def test_a_document_the_table_cannot_hold_or_that_makes_no_sense_is_one_line(tmp_path, change, message):
    """Two rows of one policy or a null policy failed in DuckDB's constraints (a traceback), a count beyond
    an INTEGER in its conversion; negative times, jobs or GPUs were stored as given."""
    db = tmp_path / "r.duckdb"
    with pytest.raises(UsageError, match=f"^simulation document: {message}"):
        ingest_simulation(db, _changed(change))
    assert simulations_frame(db).empty


def test_a_database_written_before_the_simulations_table_has_no_stored_simulations(tmp_path):
    db = tmp_path / "r.duckdb"
    assert ingest_simulation(db, doc()) is True
    with duckdb.connect(str(db)) as con:  # the layout of version 3, which had no simulations table
        con.execute("DROP TABLE simulations")
        con.execute("UPDATE schema_meta SET value = '3' WHERE key = 'schema_version'")
    assert simulations_frame(db).empty


def test_a_ctrl_c_as_the_simulation_is_stored_leaves_it_whole_and_says_so(tmp_path, monkeypatch, capsys):
    """A Ctrl-C after the row was stored, before the files were moved into place: the row stayed, the files
    were discarded (or some moved), and the command said only "interrupted"."""
    import os
    import signal

    from stash_core.sched import report

    stored = report.simulations.ingest_simulation

    def store_then_ctrl_c(*args, **kwargs):
        done = stored(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # arrives now, between the row and the files
        return done

    monkeypatch.setattr(report.simulations, "ingest_simulation", store_then_ctrl_c)
    document, db, out = doc(), tmp_path / "r.duckdb", tmp_path / "results"
    with pytest.raises(KeyboardInterrupt):  # acted on once the simulation is whole: exit 130 as ever
        save_simulation(document, out, db, None, None)
    path = out / f"{document['simulation_id']}.json"
    assert json.loads(path.read_text()) == document and not list(out.glob(".sim-*"))
    assert len(simulations_frame(db)) == 2
    assert f"stash: the simulation is saved whole ({path})" in capsys.readouterr().err


def test_the_newest_simulations_are_read_whole_and_all_are_counted(tmp_path):
    """The limit counted policy rows: the oldest simulation listed lost some of its policies, and the page
    named the best of those left; nothing said older ones were stored."""
    db = tmp_path / "r.duckdb"
    documents = [doc() for _ in range(3)]
    for hour, document in enumerate(documents):
        document["created_at"] = f"2026-12-0{hour + 1}T10:00:00+00:00"
        document["simulation_id"] = f"sim-2026120{hour + 1}T100000Z-00000{hour}"
        assert ingest_simulation(db, document) is True
    frame = simulations_frame(db, limit=2)  # 2 simulations: 4 rows, where 3 rows cut the older one in half
    assert list(dict.fromkeys(frame["simulation_id"])) == [documents[2]["simulation_id"],
                                                           documents[1]["simulation_id"]]  # fmt: skip
    assert len(frame) == 4 and frame.attrs["simulations_stored"] == 3
    assert simulations_frame(tmp_path / "none.duckdb").attrs["simulations_stored"] == 0


@pytest.mark.parametrize("created, says", [
    ("9999-12-31T00:00:00+00:00", "outside the representable range"),
    ("0001-01-01T00:00:00", "outside the representable range"),
    ("2200-01-01T00:00:00+00:00", "in the future"),
    ("yesterday", "not an ISO 8601 time"),
])  # fmt: skip
def test_a_simulation_dated_where_no_page_can_show_it_is_refused(tmp_path, created, says):
    """A simulation created 9999-12-31 was stored, and the Schedule page listed it as the newest for good."""
    document = {**doc(), "created_at": created}
    with pytest.raises(UsageError, match=says):
        ingest_simulation(tmp_path / "r.duckdb", document)
    assert simulations_frame(tmp_path / "r.duckdb").empty


@pytest.mark.parametrize(
    "change, message",
    [(lambda d: d.update(simulation_id="../evil"), "simulation_id '../evil' is a path, not a name"),
     (lambda d: d.update(simulation_id="a\x1b[31m"), "simulation_id holds the control character U\\+001B"),
     (lambda d: d.update(trace="\x1b[31mevil"), "trace holds the control character U\\+001B"),
     (lambda d: d.update(tuning=["x"]), "tuning must be text, got \\['x'\\]"),
     (lambda d: _first(d, policy="fifo\u202e"), "policy holds the control character U\\+202E"),
     (lambda d: _first(d, metrics=None), f"{P0}.metrics must be an object, got None"),
     (lambda d: _metrics(d, makespan_s="abc"), "makespan_s is 'abc'; expected a number"),
     (lambda d: _first(d, jct_cdf="x"), f"{P0}.jct_cdf must be a list of rows of 2"),
     (lambda d: _first(d, timeline=[[0, 1]]), f"{P0}.timeline must be a list of rows of 3"),
     (lambda d: d.update(policies={"fifo": {}}), "policies must be a list"),
     (lambda d: d["policies"][0]["metrics"].pop("p95_jct_s"), f"missing field {M}p95_jct_s"),
     # stored, then shown as the policy's name on the Schedule page
     (lambda d: _first(d, settings={"label": "=fifo\u202e"}), "label holds the control character U\\+202E"),
     (lambda d: _first(d, settings="fifo"), f"{P0}.settings must be an object, got 'fifo'")],
    ids=["path-id", "escape-id", "escape-trace", "list-tuning", "bidi-policy", "null-metrics", "text-metric",
         "text-curve", "short-rows", "policies-object", "missing-metric", "bidi-label", "text-settings"],
)  # fmt: skip
def test_a_simulation_file_is_checked_as_a_run_file_is_and_said_in_words(tmp_path, change, message):
    """'../evil' was stored as an id, an escape sequence as the trace's name and "x" as a curve (which the
    Schedule page then failed to draw); null metrics said "'NoneType' object is not subscriptable"."""
    db = tmp_path / "r.duckdb"
    with pytest.raises(UsageError, match=f"^simulation document: .*{message}") as refused:
        ingest_simulation(db, _changed(change))
    assert "\n" not in str(refused.value) and "object is not" not in str(refused.value)
    assert simulations_frame(db).empty


def test_a_policy_the_simulator_does_not_have_is_refused(tmp_path):
    db, document = tmp_path / "r.duckdb", doc()
    document["policies"][1]["policy"] = "quantum"
    with pytest.raises(UsageError, match=r"policies\[1\]\.policy is 'quantum'; expected one of fifo, sjf"):
        ingest_simulation(db, document)
    assert simulations_frame(db).empty


def test_a_simulation_of_a_generated_trace_is_stored(tmp_path):
    db = tmp_path / "r.duckdb"
    assert ingest_simulation(db, {**doc(), "trace_format": "synthetic"}) is True
