"""`stash ingest` stores a simulation file of `stash schedule --no-store` (results/sim-*.json, "kind":
"stash-simulation"), as it stores result and probe files: once, beside them, and a malformed one is refused
by name with nothing stored. It said `not a Stash result file (no "kind": "stash-profile")`."""

from __future__ import annotations

import json

from result_docs import result_doc
from support import one_line_error, stash_here

from stash_core.sched import Cluster, Policy, TraceJob
from stash_core.sched.report import run_simulation, save_simulation
from stash_core.store import ingest_files, simulations_frame
from stash_core.store.runs import run_rows

NOTHING_STORED = (
    "nothing stored: every file is checked before any is stored, so the other was not stored either "
    "(--skip-bad stores them and names those it cannot)"
)


def doc() -> dict:
    """A simulation of two jobs under two policies, as `stash schedule` makes it."""
    jobs = [TraceJob("X", 3, 0.0, 100.0, None, 1.5, "trace"),
            TraceJob("Y", 2, 1.0, 100.0, None, 1.5, "trace")]  # fmt: skip
    document, _ = run_simulation(jobs, Cluster(1, 2, 4), [Policy("fifo"), Policy("las")], tuning="given",
                                 trace="t.csv", trace_format="tiresias")  # fmt: skip
    return document


def save_result(document: dict, path) -> None:
    path.write_text(json.dumps(document))


def test_ingest_stores_a_simulation_file_once_with_the_runs_beside_it(tmp_path, capsys, monkeypatch):
    simulation = save_simulation(doc(), tmp_path / "results")  # as `stash schedule --no-store` writes it
    run = tmp_path / "results" / "run.json"
    save_result(result_doc(run_id="20261122T110600Z-2904421d"), run)
    db = tmp_path / "r.duckdb"
    first = stash_here(capsys, monkeypatch, "ingest", str(simulation), str(run), "--db", str(db))
    assert first.returncode == 0, first.stderr
    simulation_id = json.loads(simulation.read_text())["simulation_id"]
    assert first.stdout.splitlines()[0] == f"stored  {simulation_id}  ({simulation})"
    frame = simulations_frame(db)
    assert sorted(frame["policy"]) == ["fifo", "las"] and set(frame["source_file"]) == {str(simulation)}
    assert len(run_rows(db)) == 1
    again = ingest_files(db, [simulation, run])
    assert [(path, inserted) for path, _, inserted in again] == [(simulation, False), (run, False)]
    assert len(simulations_frame(db)) == 2


def test_a_malformed_simulation_file_is_refused_by_name_and_nothing_is_stored(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run.json"
    save_result(result_doc(run_id="20261122T110600Z-2904421d"), run)
    bad = tmp_path / "sim-bad.json"
    bad.write_text(json.dumps({**doc(), "cluster": {}}))
    db = tmp_path / "r.duckdb"
    refused = stash_here(capsys, monkeypatch, "ingest", str(run), str(bad), "--db", str(db))
    assert refused.returncode == 2
    # the result file given with it was not stored either, and the line says so
    assert one_line_error(refused) == (
        f"stash: {bad}: simulation document: missing field cluster.switches; {NOTHING_STORED}"
    )
    assert not db.exists() or (simulations_frame(db).empty and not run_rows(db))


def test_a_simulation_file_is_read_once(tmp_path, monkeypatch):
    """It was read as a result file, then again as a simulation (up to 256 MiB each)."""
    import stash_core.results.file as resultfile

    simulation = save_simulation(doc(), tmp_path / "results")
    reads = []
    real = resultfile.read_user_bytes
    monkeypatch.setattr(resultfile, "read_user_bytes", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    import stash_core.userfiles as userfiles

    monkeypatch.setattr(userfiles, "read_user_bytes", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    assert ingest_files(tmp_path / "r.duckdb", [simulation])
    assert reads == [simulation]


def test_a_simulation_given_again_with_other_figures_is_refused_not_called_already_stored(tmp_path):
    """Only the simulation_id was looked at: an edited makespan was "already stored" and the old one kept."""
    import pytest

    from stash_core.errors import UsageError

    simulation = save_simulation(doc(), tmp_path / "results")
    db = tmp_path / "r.duckdb"
    ingest_files(db, [simulation])
    edited = json.loads(simulation.read_text())
    edited["policies"][0]["metrics"]["makespan_s"] += 1.0
    edited_path = tmp_path / "edited.json"
    edited_path.write_text(json.dumps(edited))
    # named by its file, as a run's conflict is, and before any file of the command is stored
    other_run = tmp_path / "other.json"
    other_run.write_text(json.dumps({**doc(), "simulation_id": "another-one"}))
    said = rf"^{edited_path}: simulation .* already stored with other makespan_s; refused, nothing was"
    with pytest.raises(UsageError, match=said):
        ingest_files(db, [other_run, edited_path])
    assert len(simulations_frame(db)) == len(doc()["policies"])
    # given twice in one command with other figures: the second file named, before anything is stored
    fresh = tmp_path / "fresh.duckdb"
    said = rf"^{edited_path}: simulation .* is also in {simulation} with other "
    with pytest.raises(UsageError, match=said):
        ingest_files(fresh, [simulation, edited_path])
    assert simulations_frame(fresh).empty
    stored = simulations_frame(db)
    assert sorted(stored["makespan_s"]) == sorted(p["metrics"]["makespan_s"] for p in doc()["policies"])
    edited["policies"][0]["metrics"]["makespan_s"] -= 1.0  # the same figures from another file: stored once
    edited["policies"][0]["timeline"] = edited["policies"][0].get("timeline")
    edited_path.write_text(json.dumps(edited))
    assert [inserted for _, _, inserted in ingest_files(db, [edited_path])] == [False]


def test_a_simulation_file_of_another_schema_version_is_refused_with_nothing_stored(tmp_path, capsys,
                                                                                    monkeypatch):
    """Result and probe files of a newer version were refused; a simulation file was stored as if read."""
    run = tmp_path / "run.json"
    save_result(result_doc(run_id="20261122T110600Z-2904421d"), run)
    db = tmp_path / "r.duckdb"
    cases = ((99, "99; this Stash reads up to 1 - upgrade Stash"), ("1", "'1'; this Stash reads up to 1"),
             (None, "None; this Stash reads up to 1"), (0, "0; this Stash reads up to 1"))  # fmt: skip
    for version, says in cases:
        newer = tmp_path / f"sim-{version}.json"
        newer.write_text(json.dumps({**doc(), "schema_version": version}))
        refused = stash_here(capsys, monkeypatch, "ingest", str(run), str(newer), "--db", str(db))
        assert refused.returncode == 2
        said = f"stash: {newer}: simulation has schema_version {says}; {NOTHING_STORED}"
        assert one_line_error(refused) == said
        assert not db.exists() or (simulations_frame(db).empty and not run_rows(db))
