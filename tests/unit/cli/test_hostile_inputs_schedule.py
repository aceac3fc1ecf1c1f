"""`stash schedule` and simulate_schedule() given a hostile or odd trace: what the trace reads is never
replaced, text stays text, ids stay as written, every value is checked, and the table stays a table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import stash_core as stash
from stash_core.cli.main import main
from stash_core.errors import UsageError

PAI_JOBS = "j1,i1,u1,Terminated,100,3700\nj2,i2,u1,Terminated,200,7400\n"
PAI_TASKS = "j1,worker,1,Terminated,100,3700,600,29,100,V100\nj2,worker,2,Terminated,200,7400,600,29,400,V100\n"


def _schedule(tmp_path, *args: str) -> list[str]:
    return ["schedule", *args, "--no-store", "--out", str(tmp_path / "out"), "--db", str(tmp_path / "r.duckdb")]


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_the_jobs_csv_may_not_replace_the_pai_task_table_read_with_the_trace(tmp_path, capsys):
    (tmp_path / "pai_job_table.csv").write_text(PAI_JOBS)
    tasks = tmp_path / "pai_task_table.csv"
    tasks.write_text(PAI_TASKS)
    argv = _schedule(tmp_path, "--trace", str(tmp_path / "pai_job_table.csv"), "--tuning", "given",
                     "--policies", "fifo", "--jobs-csv", str(tasks))  # fmt: skip
    assert "is the PAI task table" in _refused(capsys, argv)
    with pytest.raises(UsageError, match="is the PAI task table"):
        stash.simulate_schedule(tmp_path / "pai_job_table.csv", tuning="given", policies="fifo", no_store=True,
                                out=tmp_path / "out", jobs_csv=tasks, db=tmp_path / "r.duckdb")  # fmt: skip
    assert tasks.read_text() == PAI_TASKS and not (tmp_path / "out").exists()


def test_a_traces_slowdown_source_column_is_not_taken_as_where_its_slowdowns_came_from(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,duration,network_slowdown,slowdown_source\n"
        "a,1,0,3600,1.5,\x1b[31mEVIL\x1b[0m\nb,1,10,3600,1.2,measured\n"
    )
    jobs_csv = tmp_path / "jobs.csv"
    assert main(_schedule(tmp_path, "--trace", str(trace), "--policies", "fifo", "--tuning", "given",
                          "--jobs-csv", str(jobs_csv))) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "2 from the trace's network_slowdown" in out and "measured by Stash" not in out
    assert "\x1b" not in out and "EVIL" not in out and "EVIL" not in jobs_csv.read_text()


def test_job_ids_are_read_as_written(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n007,1,0,60\n7,1,1,60\n2.50,1,2,60\nNA,1,3,60\n")
    jobs_csv = tmp_path / "jobs.csv"
    assert main(_schedule(tmp_path, "--trace", str(trace), "--policies", "fifo", "--tuning", "given",
                          "--jobs-csv", str(jobs_csv))) == 0  # fmt: skip
    capsys.readouterr()
    ids = pd.read_csv(jobs_csv, dtype=str, keep_default_na=False)["job_id"]
    assert sorted(ids) == ["007", "2.50", "7", "NA"]


def test_a_header_is_read_as_format_detection_reads_it(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("JOB_ID, Num_GPU, submit_time , duration\na, 1, 0, 60\n")
    assert main(_schedule(tmp_path, "--trace", str(trace), "--policies", "fifo", "--tuning", "given")) == 0
    assert "t.csv (tiresias)" in capsys.readouterr().out
    trace.write_text("job_id,num_gpu,submit_time,duration,Duration\na,1,0,60,60\n")
    assert "names the column 'duration' twice" in _refused(capsys, _schedule(tmp_path, "--trace", str(trace)))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,true,0,5,,", "num_gpu must be a number, got 'true'"),
        ("a,1,0,5,abc,", "iterations must be a number, got 'abc'"),
        ("a,1,0,5,-3,", "iterations must be a positive number, got -3"),
        ("a,1,0,5,10,-3", "iteration_s must be a positive number, got -3"),
        ("a,1e+30,0,5,,", "num_gpu must be at most 1000000, got 1e+30"),
    ],
)
def test_a_tiresias_value_that_is_not_what_its_column_takes_is_refused(tmp_path, capsys, row, message):
    trace = tmp_path / "t.csv"
    trace.write_text(f"job_id,num_gpu,submit_time,duration,iterations,iteration_s\n{row}\n")
    err = _refused(capsys, _schedule(tmp_path, "--trace", str(trace), "--tuning", "given"))
    assert message in err, err


def test_a_philly_job_without_a_submit_time_is_refused_not_dropped(tmp_path, capsys):
    job = {"jobid": "app_1", "user": "u", "submitted_time": None,
           "attempts": [{"start_time": "2017-10-03 10:00:00", "end_time": "2017-10-03 11:00:00",
                         "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}  # fmt: skip
    trace = tmp_path / "philly.json"
    trace.write_text(json.dumps([job, {**job, "jobid": "app_2", "submitted_time": "2017-10-03 09:00:00"}]))
    err = _refused(capsys, _schedule(tmp_path, "--trace", str(trace), "--tuning", "given"))
    assert "Philly job app_1: submitted_time is empty" in err


def test_batch_arrivals_with_split_tuning_say_which_tunings_can_work(tmp_path, capsys):
    err = _refused(capsys, _schedule(tmp_path, "--synthetic-jobs", "50", "--arrivals", "batch"))
    assert "submitted at once" in err and "--tuning online or given" in err and "--tune-fraction" not in err


def test_split_tuning_without_a_timed_policy_says_none_was_tuned(tmp_path, capsys):
    argv = _schedule(tmp_path, "--synthetic-jobs", "20", "--policies", "fifo,sjf", "--tuning", "split")
    assert main(argv) == 0
    assert "tuning: no timed policy chosen, none tuned: every policy on all 20 jobs" in capsys.readouterr().out


def test_columns_keep_apart_when_the_hours_are_large(tmp_path, capsys):
    trace = tmp_path / "wide.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,duration,network_slowdown\na,6,0,7200,2\nb,6,0,7200,2\nc,4,10,300000000,3\n"
    )
    argv = _schedule(tmp_path, "--trace", str(trace), "--cluster", "1x2x8", "--tuning", "given",
                     "--policies", "fifo,consolidate")  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("policy"))
    rows = [line for line in lines if line.lstrip().startswith(("fifo ", "consolidate "))]
    assert len(header.split()) == 17  # policy and the sixteen words of the eight headings
    for row in rows:
        assert len(row.split()) == 9 and len(row) == len(header), row  # every cell apart, right-aligned


def test_the_api_checks_every_value_also_those_its_source_does_not_use(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\na,1,0,60\nb,1,5,60\n")
    common = {"tuning": "given", "no_store": True, "out": tmp_path / "out", "db": tmp_path / "r.duckdb"}
    with pytest.raises(UsageError, match="trace_format"):
        stash.simulate_schedule(synthetic_jobs=5, trace_format="bogus", **common)
    for bad in ({"seed": -7}, {"mean_gap_s": -5}, {"generator": "bogus"}):
        with pytest.raises(UsageError):
            stash.simulate_schedule(trace, **bad, **common)


def test_synthetic_arrivals_that_would_span_centuries_are_refused_by_their_flags(tmp_path, capsys):
    err = _refused(capsys, _schedule(tmp_path, "--synthetic-jobs", "200", "--mean-gap-s", "31536000",
                                     "--tuning", "given"))  # fmt: skip
    assert "--synthetic-jobs 200 x --mean-gap-s 3.1536e+07" in err and "199 years" in err


def test_a_file_where_the_default_results_folder_goes_is_named_as_that_not_as_out(tmp_path, capsys):
    """No --out was given, yet the refusal blamed --out."""
    (tmp_path / "results").write_text("x\n")
    db = str(tmp_path / "a.duckdb")
    status = main(["schedule", "--synthetic-jobs", "5", "--policies", "fifo", "--db", db])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("stash: the results folder beside the database (--out chooses")
    assert (tmp_path / "results").read_text() == "x\n"


@pytest.mark.parametrize(("flags", "says"), [
    (["--tuning", "given", "--tune-fraction", "0.5"], "--tune-fraction is the share split tuning tunes on"),
    (["--delay-s", "5", "--tune-fraction", "0.5"], "--tuning given takes none"),
    (["--arrivals", "batch", "--mean-gap-s", "50"], "--arrivals batch submits every job at 0"),
    (["--node-gbps", "10", "--uplink-factor", "3"], "--node-gbps models the links instead"),
])  # fmt: skip
def test_an_option_the_simulation_would_not_use_is_refused_not_ignored(tmp_path, capsys, flags, says):
    """--tune-fraction with --tuning given, --mean-gap-s with batch arrivals and --uplink-factor with a link
    model changed nothing, while --delay-s with --tuning online was refused."""
    out = tmp_path / "out"
    assert main(["schedule", "--synthetic-jobs", "20", *flags, "--out", str(out), "--no-store"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and not out.exists()
