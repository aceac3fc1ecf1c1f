"""A run that failed in R1 keeps R0's breakdown, one worker's: `stash runs` listed its iteration time as if it
were the run's, with nothing to tell it from a completed run's. It is marked, and a note under the table
names the phase it is of, in the words `stash show` uses before that run's figures."""

from __future__ import annotations

import json

import pytest
from result_docs import partial_failed_doc, result_doc

from stash_core import store
from stash_core.cli.main import main

R0_NOTE = (
    "failed in R1; its time is R0's (1 worker, synthetic data on the device), the last phase that completed"
)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.duckdb"
    store.ingest_result(path, result_doc(run_id="20261122T110000Z-0000c0de"))
    store.ingest_result(path, partial_failed_doc(run_id="20261122T120000Z-0000fa11"))
    store.ingest_result(path, result_doc(run_id="20261122T130000Z-0000dead", status="failed"))  # no time
    return path


def test_runs_marks_a_failed_runs_times_and_names_the_phase_they_are_of(db, capsys) -> None:
    assert main(["runs", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    rows = {line.split()[0]: line for line in lines[1:4]}
    partial = rows["20261122T120000Z-0000fa11"].split()
    times = header.index("iteration_s") + 1, header.index("epoch_s") + 1  # started_at: two words
    assert [partial[i] for i in times] == ["0.2000*", "6.2000*"]
    completed = rows["20261122T110000Z-0000c0de"].split()
    assert [completed[i] for i in times] == ["0.3200", "9.9200"]
    assert rows["20261122T130000Z-0000dead"].split()[times[0] :] == ["-", "-", "-"]  # nothing to mark
    # each time with its interval, as `stash show` gives it: a run at ±330% read as firm as the others
    interval = header.index("±95%") + 1
    assert interval == times[0] + 1 and completed[interval] == "±1.0%"
    # the digits stay in line: the marker stands after them
    marked, plain = rows["20261122T120000Z-0000fa11"], rows["20261122T110000Z-0000c0de"]
    assert marked.index("0.2000*") == plain.index("0.3200")
    assert lines[4].startswith(
        "* not the time of the job profiled: one phase's, of a run that did not complete "
    )
    assert lines[5:] == [f"  20261122T120000Z-0000fa11  {R0_NOTE}"]


def test_show_says_it_in_the_same_words_before_the_figures(db, capsys) -> None:
    assert main(["show", "0000fa11", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = lines.index(f"partial: {R0_NOTE}, not the time of the job profiled")
    assert lines[said + 1].startswith("iteration 0.200 s")
    assert main(["show", "0000c0de", "--db", str(db)]) == 0
    assert "partial" not in capsys.readouterr().out


def test_runs_json_stays_the_views_rows_with_the_phase_the_time_is_of(db, capsys) -> None:
    assert main(["runs", "--db", str(db), "--format", "json"]) == 0
    runs = {run["run_id"]: run for run in json.loads(capsys.readouterr().out)["runs"]}
    partial = runs["20261122T120000Z-0000fa11"]
    assert (partial["status"], partial["reference_phase"], partial["iteration_s"]) == ("failed", "R0", 0.2)


def test_a_limit_keeps_its_count_as_the_last_line(db, capsys) -> None:
    assert main(["runs", "--db", str(db), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == f"  20261122T120000Z-0000fa11  {R0_NOTE}"
    assert lines[-1] == "... 1 more run(s) not shown (--limit 3 lists all 3)"


def test_the_notes_under_the_table_come_in_its_rows_order(tmp_path, capsys) -> None:
    path = tmp_path / "r.duckdb"
    ids = [f"20261122T1{hour}0000Z-0000fa1{hour}" for hour in range(5)]
    for run_id in ids:
        store.ingest_result(path, partial_failed_doc(run_id=run_id))
    assert main(["runs", "--db", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split()[0] for line in lines[1:] if line.startswith("2026")]
    notes = [line.split()[0] for line in lines if line.startswith("  2026")]
    assert rows == ids[::-1] and notes == rows  # the newest first, in both


def test_a_run_whose_time_is_r2_s_is_not_said_to_be_another_jobs_time(db, capsys) -> None:
    """A run stopped in R3 after R2 ran keeps R2's time: all workers on the job's own data, the job as set
    up. It was marked "not the time of the job profiled"."""
    import duckdb

    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET reference_phase = 'R2' WHERE run_id = '20261122T120000Z-0000fa11'")
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "*" not in out and "not the time of the job profiled" not in out
    assert main(["show", "0000fa11", "--db", str(db)]) == 0
    assert "partial:" not in capsys.readouterr().out


def test_runs_names_the_runs_whose_breakdown_cannot_be_read_as_stalls(db, capsys) -> None:
    store.ingest_result(db, result_doc(run_id="20261122T140000Z-00000bad", stalls={"compute": 0.92,
                                                                                 "interconnect": -0.70}))
    assert main(["runs", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("breakdowns not to be read as stalls"))
    assert lines[said + 1 :] == ["  20261122T140000Z-00000bad  impossible"]
    assert main(["runs", "--db", str(db), "--format", "json"]) == 0
    figures = {run["run_id"]: run["figures"] for run in json.loads(capsys.readouterr().out)["runs"]}
    assert figures["20261122T140000Z-00000bad"] == "impossible"
    assert figures["20261122T110000Z-0000c0de"] is None
