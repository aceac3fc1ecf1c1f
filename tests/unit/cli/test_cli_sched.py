"""`stash schedule`: every policy on a trace, tuned timers, per-job outcomes, the result file and the
database, clear refusals."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from stash_core.cli.main import main
from stash_core.store import simulations_frame


def test_a_synthetic_trace_compares_every_policy(tmp_path, capsys):
    jobs_csv = tmp_path / "jobs.csv"
    status = main(["schedule", "--synthetic-jobs", "60", "--cluster", "2x2x8", "--jobs-csv", str(jobs_csv),
                   "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "res")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    for policy in ("fifo", "sjf", "las", "fifo-consolidate", "consolidate", "spread", "delay",
                   "network-delay", "network-preempt"):  # fmt: skip
        assert f"\n  {policy}" in out
    assert "32 GPUs" in out and "a simulation of one trace, not a measurement: policies a few" in out
    assert re.search(r"tuning: timers tuned on the \d+ of the first 18 jobs \(30% by arrival", out)
    assert "the other 42" in out
    assert "blox" not in out and "from Blox's penalty for their model" in out  # words, not source codes
    outcomes = pd.read_csv(jobs_csv)
    assert len(outcomes) == 9 * 42
    assert set(outcomes.loc[outcomes["policy"] == "consolidate", "level"]) <= {"node", "any"}
    stored = simulations_frame(tmp_path / "r.duckdb")
    assert len(stored) == 9 and set(stored["jobs"]) == {42}
    (result,) = (tmp_path / "res").glob("sim-*.json")
    assert f"result: {result}" in out and stored["source_file"][0] == str(result.resolve())


def test_given_timers_are_used_as_given(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    frame = pd.DataFrame({"job_id": ["X", "Z", "Y"], "num_gpu": [3, 3, 2], "submit_time": [0, 0, 1],
                          "duration": [100, 100, 100], "network_slowdown": [1.5, 1.5, 1.5]})  # fmt: skip
    frame.to_csv(trace, index=False)
    status = main(["schedule", "--trace", str(trace), "--cluster", "1x2x4", "--policies", "delay",
                   "--delay-s", "30", "--db", str(tmp_path / "r.duckdb"), "--no-store",
                   "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0 and "delay 30 s" in out and "tuning: timers as given" in out
    assert not (tmp_path / "r.duckdb").exists()  # --no-store: the file only
    assert "3 from the trace's network_slowdown" in out  # every job's sensitivity came from the trace
    assert f"{trace} (tiresias)" in out  # the format told from the columns, and said
    # 800 GPU-seconds of work arriving within 1 s on 8 GPUs
    assert "offered load: the jobs ask 10000% of the cluster's GPU-time between the first and last" in out
    assert "summed over the jobs" in out and "GPU busy: their GPU-hours over the cluster's" in out


def one_big_job(tmp_path):
    trace = tmp_path / "big.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\nA,8,0,100\n")
    return trace


def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys):
    for argv, message in [
        (["--synthetic-jobs", "5", "--cluster", "2x0x8"], "--cluster"),
        # a placement scans every free count up to a node's GPUs: 50 jobs took 30 s and 690 MB
        (["--synthetic-jobs", "5", "--cluster", "1x1x1000000"], "more than 4,096 GPUs in one node"),
        (["--synthetic-jobs", "5", "--policies", "fastest"], "unknown policy"),
        (["--synthetic-jobs", "5", "--policies", "fifo,,las"], "--policies: an empty item in 'fifo,,las'"),
        (["--trace", str(tmp_path / "none.csv")], "trace does not exist"),
        (
            ["--synthetic-jobs", "5", "--cluster", "1x1x1", "--policies", "spread"],
            "more GPUs than the cluster",
        ),
        (  # under the default split tuning: it said "cannot tune on 30% of 1 job(s)"
            ["--trace", str(one_big_job(tmp_path)), "--cluster", "1x1x4"],
            "job(s) A need more GPUs than the cluster has (4)",
        ),
        (["--synthetic-jobs", "5", "--tuning", "online", "--delay-s", "5"], "--tuning given"),
        (["--synthetic-jobs", "5", "--tune-fraction", "1"], "--tune-fraction"),
        (["--synthetic-jobs", "1", "--policies", "delay"], "both parts need a job"),
        (["--trace", str(tmp_path / "none.json"), "--trace-format", "philly"], "trace does not exist"),
        (["--synthetic-jobs", "5", "--checkpoint-s", "-1"], "--checkpoint-s"),
        (["--trace", str(ambiguous(tmp_path))], "(fits tiresias and helios): give --trace-format, one of"),
        (["--trace", str(small_trace(tmp_path)), "--arrivals", "poisson"], "a trace takes only batch"),
        (["--synthetic-jobs", "5", "--arrivals", "daily"], "--arrivals"),
    ]:
        status = main(["schedule", *argv, "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert status == 2, argv
        assert message in err and len(err.strip().splitlines()) == 1


def test_congested_links_are_described_and_checked(tmp_path, capsys):
    db = ["--db", str(tmp_path / "r.duckdb"), "--no-store", "--out", str(tmp_path)]
    base = ["schedule", "--synthetic-jobs", "40", "--cluster", "2x2x8", "--policies", "spread,consolidate"]
    assert main([*base, "--node-gbps", "100", "--oversubscription", "4", *db]) == 0
    out = capsys.readouterr().out
    assert "links shared max-min fairly: node uplinks 100 Gbit/s, switch uplinks 50 Gbit/s" in out
    assert "slowdowns read at 10 Gbit/s" in out
    assert main([*base, "--node-gbps", "100", "--uplink-gbps", "25", *db]) == 0
    assert "switch uplinks 25 Gbit/s" in capsys.readouterr().out
    assert main([*base, "--uplink-gbps", "25", *db]) == 2
    assert "need --node-gbps" in capsys.readouterr().err
    # the rate slowdowns are read at belongs to the link model: without one it changed nothing, unsaid
    assert main([*base, "--reference-gbps", "1", *db]) == 2
    assert "--reference-gbps is the rate the link model reads" in capsys.readouterr().err
    assert main([*base, "--node-gbps", "100", "--reference-gbps", "25", *db]) == 0
    assert "slowdowns read at 25 Gbit/s" in capsys.readouterr().out


def test_online_timers_and_a_philly_trace(tmp_path, capsys):
    log = [{"jobid": f"app_{i}", "user": "u", "submitted_time": f"2017-10-03 10:{i:02d}:00",
            "attempts": [{"start_time": f"2017-10-03 10:{i:02d}:30", "end_time": f"2017-10-03 11:{i:02d}:30",
                          "detail": [{"ip": "m1", "gpus": ["g0", "g1"]}]}]} for i in range(12)]  # fmt: skip
    path = tmp_path / "cluster_job_log"
    path.write_text(__import__("json").dumps(log))
    status = main(["schedule", "--trace", str(path), "--trace-format", "philly", "--cluster", "1x2x4",
                   "--tuning", "online", "--policies", "delay,network-preempt,las", "--no-store",
                   "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0 and "tuning: timers set online" in out and "delay online" in out
    assert "12 drawn from Blox's penalties" in out


def ambiguous(tmp_path):
    path = tmp_path / "both.csv"
    path.write_text("job_id,num_gpu,gpu_num,submit_time,duration\n1,2,2,0,100\n")
    return path


def test_batch_arrivals_submit_a_traces_jobs_at_once_and_help_defines_each_policy(tmp_path, capsys):
    jobs_csv = tmp_path / "jobs.csv"
    status = main(["schedule", "--trace", str(small_trace(tmp_path)), "--arrivals", "batch", "--cluster",
                   "1x1x4", "--policies", "fifo", "--no-store", "--out", str(tmp_path), "--jobs-csv",
                   str(jobs_csv)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0 and "all submitted at 0" in out
    assert set(pd.read_csv(jobs_csv)["submit_s"]) == {0.0}
    with pytest.raises(SystemExit):
        main(["schedule", "--help"])
    help_text = capsys.readouterr().out
    for name in ("fifo", "sjf", "las", "fifo-consolidate", "consolidate", "spread", "delay", "network-delay",
                 "network-preempt"):  # fmt: skip
        assert re.search(rf"^  {re.escape(name)} +\S", help_text, re.MULTILINE), name


def test_a_philly_like_workload_in_bursts(tmp_path, capsys):
    status = main(["schedule", "--synthetic-jobs", "40", "--generator", "philly", "--arrivals", "burst",
                   "--cluster", "2x2x8", "--policies", "fifo-consolidate,spread", "--node-gbps", "10",
                   "--no-store", "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0 and "Philly-like(40 jobs, seed 0, burst arrivals)" in out


def small_trace(tmp_path):
    trace = tmp_path / "t.csv"
    pd.DataFrame({"job_id": [1, 2, 3, 4], "num_gpu": [1, 2, 1, 4], "submit_time": [0, 5, 9, 20],
                  "duration": [60, 60, 90, 30]}).to_csv(trace, index=False)  # fmt: skip
    return trace


def test_a_policy_given_twice_is_refused(tmp_path, capsys):
    status = main(["schedule", "--synthetic-jobs", "5", "--policies", "fifo,sjf,fifo", "--no-store",
                   "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and "fifo given more than once" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "policies, option, message",
    [
        ("fifo,sjf", ["--starve-factor", "3"], "--starve-factor sets las, not run here (--policies fifo,sjf"),
        ("fifo", ["--las-limits-gpu-h", "2,20"], "--las-limits-gpu-h sets las, not run here"),
        ("sjf", ["--checkpoint-s", "5"], "--checkpoint-s sets las and network-preempt, not run here"),
        ("delay", ["--max-preemptions", "1"], "--max-preemptions sets las and network-preempt"),
        ("las", ["--delay-s", "9"], "--delay-s sets delay, not run here (--policies las)"),
        ("delay", ["--scale", "2"], "--scale sets network-delay and network-preempt, not run here"),
        ("fifo", ["--trace-format", "philly"], "--trace-format reads a --trace file"),
    ],
)  # fmt: skip
def test_an_option_no_chosen_policy_uses_is_refused(tmp_path, capsys, policies, option, message):
    """These ran without a word, the simulation as if they had not been given."""
    status = main(["schedule", "--synthetic-jobs", "5", "--policies", policies, *option, "--no-store",
                   "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_a_policy_option_given_for_its_policy_is_used(tmp_path, capsys):
    args = ["schedule", "--synthetic-jobs", "40", "--policies", "las", "--no-store", "--cluster", "1x2x8"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    default = capsys.readouterr().out
    assert main([*args, "--las-limits-gpu-h", "0.01,0.02", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().out.split("result:")[0] != default.split("result:")[0]


def not_a_database(tmp_path):
    (tmp_path / "notes.txt").write_text("not a database")
    return tmp_path / "notes.txt"


@pytest.mark.parametrize(
    "db, message",
    [
        (lambda tmp: tmp, "is a directory"),
        (not_a_database, "no DuckDB header"),
        (lambda tmp: not_a_database(tmp) / "r.duckdb", "notes.txt is a file, not a folder"),
        (lambda tmp: tmp / ("d" * 300 + ".duckdb"), "File name too long"),
    ],
)  # fmt: skip
def test_a_database_that_cannot_take_the_result_leaves_nothing_written(tmp_path, capsys, db, message):
    out, jobs_csv = tmp_path / "res" / "sims", tmp_path / "jobs.csv"
    status = main(["schedule", "--trace", str(small_trace(tmp_path)), "--tuning", "online",
                   "--db", str(db(tmp_path)), "--out", str(out), "--jobs-csv", str(jobs_csv)])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "res").exists() and not jobs_csv.exists()


def test_a_store_that_fails_late_leaves_no_files(tmp_path, capsys, monkeypatch):
    from stash_core.errors import UsageError
    from stash_core.store import simulations

    def refuse(*args, **kwargs):
        raise UsageError("cannot store: the disk is full")

    monkeypatch.setattr(simulations, "ingest_simulation", refuse)
    out, jobs_csv = tmp_path / "res" / "sims", tmp_path / "jobs.csv"
    status = main(["schedule", "--trace", str(small_trace(tmp_path)), "--db", str(tmp_path / "r.duckdb"),
                   "--tuning", "online", "--out", str(out), "--jobs-csv", str(jobs_csv)])  # fmt: skip
    assert status == 2 and "disk is full" in capsys.readouterr().err
    assert not (tmp_path / "res").exists() and not jobs_csv.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]  # no staged file left either


@pytest.mark.parametrize(
    "option, message",
    [("--out", "is a file"), ("--jobs-csv", "is a directory")],
)
def test_output_paths_are_checked_before_simulating(tmp_path, capsys, option, message):
    target = small_trace(tmp_path) if option == "--out" else tmp_path
    status = main(["schedule", "--synthetic-jobs", "5", "--no-store", option, str(target)])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_comparison_table_keeps_its_columns_under_a_long_policy_label():
    from types import SimpleNamespace

    from stash_core.cli.sched import format_comparison

    figures = {"makespan_s": 3600.0, "avg_jct_s": 1800.0, "p95_jct_s": 7200.0, "avg_queue_s": 0.0,
               "comm_overhead_s": 0.0, "spread_jobs": 0, "preemptions": 0, "gpu_busy_share": 0.5}  # fmt: skip
    labels = ["fifo", "network-preempt (waits to consolidate)", "delay 1234567 s (a very long timer label)"]
    cluster = SimpleNamespace(switches=1, nodes_per_switch=2, gpus_per_node=4, total_gpus=8)
    jobs = [SimpleNamespace(slowdown_source="trace", gpus=4, duration_s=3600.0, submit_s=0.0)]
    rows = [{"policy": label, **figures} for label in labels]
    text = format_comparison(rows, jobs, cluster, "a trace", "none")
    lines = text.splitlines()
    header = next(line for line in lines if "makespan h" in line)
    end = header.index("makespan h") + len("makespan h")
    for label in labels:
        row = next(line for line in lines if line.strip().startswith(label))
        assert row[:end].endswith("1.00") and row[end - 5] == " "  # the makespan ends under its header


def test_the_result_file_goes_next_to_the_database_as_a_profiles_does(tmp_path, capsys, monkeypatch):
    """Without --out the result file went to results/ in the working folder, and a database named results
    was refused as "--out results is the database" though no --out was given."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    monkeypatch.chdir(work)
    status = main(["schedule", "--synthetic-jobs", "5", "--policies", "fifo", "--db", str(data / "r.duckdb")])
    assert status == 0, capsys.readouterr().err
    assert len(list((data / "results").glob("sim-*.json"))) == 1 and not (work / "results").exists()
    status = main(["schedule", "--synthetic-jobs", "5", "--policies", "fifo", "--db", "results"])
    err = capsys.readouterr().err
    assert status == 0 and "--out" not in err, err
    assert len(list((work / "results-files").glob("sim-*.json"))) == 1


def test_a_new_database_is_said_once_and_not_for_a_no_store_run(tmp_path, capsys):
    """A mistyped --db made a new database in a new folder without a word, where ingest and profile say so."""
    db = tmp_path / "new" / "r.duckdb"
    run = ["schedule", "--synthetic-jobs", "8", "--policies", "fifo", "--tuning", "online", "--db", str(db)]
    assert main(run) == 0
    assert capsys.readouterr().out.endswith(f"note: {db} did not exist: it is a new database\n")
    assert main(run) == 0 and "new database" not in capsys.readouterr().out
    other = tmp_path / "other.duckdb"
    assert main([*run[:-1], str(other), "--no-store", "--out", str(tmp_path / "o")]) == 0
    assert "new database" not in capsys.readouterr().out and not other.exists()
