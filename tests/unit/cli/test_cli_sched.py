"""`stash schedule`: every policy on a trace, tuned timers, per-job outcomes, clear refusals."""

from __future__ import annotations

import pandas as pd

from stash_core.cli.main import main


def test_a_synthetic_trace_compares_every_policy(tmp_path, capsys):
    jobs_csv = tmp_path / "jobs.csv"
    status = main(["schedule", "--synthetic-jobs", "60", "--cluster", "2x2x8", "--jobs-csv", str(jobs_csv),
                   "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    for policy in ("consolidate", "spread", "delay ", "network-delay x"):
        assert policy in out
    assert "32 GPUs" in out and "a simulation, not a measurement" in out
    outcomes = pd.read_csv(jobs_csv)
    assert len(outcomes) == 4 * 60
    assert set(outcomes.loc[outcomes["policy"] == "consolidate", "level"]) <= {"node", "any"}
    assert not (tmp_path / "r.duckdb").exists()  # reading sensitivities never creates a database


def test_given_timers_are_used_as_given(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    frame = pd.DataFrame({"job_id": ["X", "Z", "Y"], "num_gpu": [3, 3, 2], "submit_time": [0, 0, 1],
                          "duration": [100, 100, 100], "network_slowdown": [1.5, 1.5, 1.5]})  # fmt: skip
    frame.to_csv(trace, index=False)
    status = main(["schedule", "--trace", str(trace), "--cluster", "1x2x4", "--policies", "delay",
                   "--delay-s", "30", "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0 and "delay 30 s" in out
    assert "3 trace" in out  # every job's sensitivity came from the trace


def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys):
    for argv, message in [
        (["--synthetic-jobs", "5", "--cluster", "2x0x8"], "--cluster"),
        (["--synthetic-jobs", "5", "--policies", "fastest"], "unknown policy"),
        (["--trace", str(tmp_path / "none.csv")], "cannot read trace"),
        (
            ["--synthetic-jobs", "5", "--cluster", "1x1x1", "--policies", "spread"],
            "more GPUs than the cluster",
        ),
    ]:
        status = main(["schedule", *argv, "--db", str(tmp_path / "r.duckdb")])
        err = capsys.readouterr().err
        assert status == 2, argv
        assert message in err and len(err.strip().splitlines()) == 1


def test_congested_links_are_described_and_checked(tmp_path, capsys):
    db = ["--db", str(tmp_path / "r.duckdb")]
    base = ["schedule", "--synthetic-jobs", "40", "--cluster", "2x2x8", "--policies", "spread,consolidate"]
    assert main([*base, "--node-gbps", "100", "--oversubscription", "4", *db]) == 0
    out = capsys.readouterr().out
    assert "congestion: node uplinks 100 Gbit/s, switch uplinks 50 Gbit/s" in out
    assert main([*base, "--node-gbps", "100", "--uplink-gbps", "25", *db]) == 0
    assert "switch uplinks 25 Gbit/s" in capsys.readouterr().out
    assert main([*base, "--uplink-gbps", "25", *db]) == 2
    assert "need --node-gbps" in capsys.readouterr().err
