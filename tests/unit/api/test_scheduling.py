"""simulate_schedule() takes every option `stash schedule` has, refuses an output that would replace what it
reads, and writes the per-job CSV the command writes (the command is a printer of this call)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import stash_core as stash
from stash_core.errors import UsageError
from tests.support import stash_here


def test_every_command_option_reaches_the_simulation(tmp_path, capsys, monkeypatch):
    options = dict(synthetic_jobs=40, seed=3, cluster="1x4x8", policies="fifo,delay,las", tuning="given",
                   delay_s=100, checkpoint_s=45, min_run_s=300, max_preemptions=2, las_limits_gpu_h="2,20",
                   starve_factor=4, node_gbps=10, oversubscription=4)  # fmt: skip
    schedule = stash.simulate_schedule(**options, out=tmp_path / "api", jobs_csv=tmp_path / "api.csv",
                                       no_store=True)  # fmt: skip
    settings = {entry["policy"]: entry["settings"] for entry in schedule.doc["policies"]}
    assert settings["delay"]["delay_s"] == 100 and settings["las"]["checkpoint_s"] == 45
    assert settings["las"]["las_thresholds_gpu_s"] == [7200.0, 72000.0] and settings["las"]["starve_factor"] == 4
    assert schedule.fabric is not None and schedule.cluster.total_gpus == 32 and len(schedule.jobs) == 40
    per_job = pd.read_csv(tmp_path / "api.csv")
    assert len(per_job) == 3 * 40 and set(per_job["policy"]) == {"fifo", "delay", "las"}
    # the summary names a policy with its settings ("delay 100 s"): the per-job rows join it by `label`
    assert set(per_job["label"]) == set(schedule.to_frame()["policy"]) == {"fifo", "delay 100 s", "las"}
    # the summary's queueing delay is the mean of the jobs' waits, preempted ones' waits included: from the
    # first start alone a reader could not find it (0.13 h against the 2.68 h printed)
    summary = schedule.to_frame().set_index("policy")
    for label, jobs in per_job.groupby("label"):
        assert jobs["queued_s"].mean() == pytest.approx(summary.loc[label, "avg_queue_s"])
    argv = ["--synthetic-jobs", "40", "--seed", "3", "--cluster", "1x4x8", "--policies", "fifo,delay,las",
            "--tuning", "given", "--delay-s", "100", "--checkpoint-s", "45", "--min-run-s", "300",
            "--max-preemptions", "2", "--las-limits-gpu-h", "2,20", "--starve-factor", "4", "--node-gbps", "10",
            "--oversubscription", "4", "--no-store", "--out", str(tmp_path / "cli"),
            "--jobs-csv", str(tmp_path / "cli.csv")]  # fmt: skip
    printed = stash_here(capsys, monkeypatch, "schedule", *argv)
    assert printed.returncode == 0, printed.stderr
    assert (tmp_path / "cli.csv").read_bytes() == (tmp_path / "api.csv").read_bytes()
    assert f"per-job CSV: {tmp_path / 'cli.csv'}" in printed.stdout  # it was written without a word


@pytest.mark.parametrize("output", ["out", "jobs_csv"])
def test_an_output_on_the_database_is_refused_before_any_work(tmp_path, output):
    db = tmp_path / "runs.duckdb"
    db.write_bytes(b"not touched")
    target = {"out": {"out": db}, "jobs_csv": {"jobs_csv": db, "out": tmp_path / "results"}}[output]
    with pytest.raises(UsageError, match="would replace what it reads"):
        stash.simulate_schedule(synthetic_jobs=5, db=db, **target)
    assert db.read_bytes() == b"not touched" and not (tmp_path / "results").exists()


def test_a_trace_over_the_job_limit_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"^the trace has 30 jobs, more than max_jobs=10$"):
        stash.simulate_schedule(synthetic_jobs=30, max_jobs=10, no_store=True, out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"las_limits_gpu_h": "10,1"}, "las_limits_gpu_h: "),
        ({"cluster": "1000x1000x8"}, "more than 1,000,000 GPUs"),
        ({"uplink_gbps": 10}, "need node_gbps"),
        ({"node_gbps": 10, "uplink_gbps": 10, "oversubscription": 2}, "give one of uplink_gbps"),
        ({"tune_fraction": 1.0}, "tune_fraction: "),
        ({"max_preemptions": -1}, "max_preemptions: "),
    ],
    ids=["las", "cluster", "uplink", "both-links", "fraction", "preemptions"],
)
def test_bad_options_are_one_line(tmp_path, options, message):
    with pytest.raises(UsageError, match=message):
        stash.simulate_schedule(synthetic_jobs=5, no_store=True, out=tmp_path / "r", **options)


def test_home_folder_paths_are_expanded_as_the_command_line_expands_them(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    schedule = stash.simulate_schedule(synthetic_jobs=5, policies="fifo", out="~/sim", jobs_csv="~/jobs.csv",
                                       db="~/h.duckdb")  # fmt: skip
    assert schedule.result_file.parent == home / "sim" and schedule.result_file.is_file()
    assert (home / "jobs.csv").is_file() and (home / "h.duckdb").is_file()
    assert not (tmp_path / "~").exists()


def test_the_result_file_goes_next_to_the_database_as_the_command_s_does(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "sub" / "x.duckdb"
    db.parent.mkdir()
    schedule = stash.simulate_schedule(synthetic_jobs=5, tuning="online", db=db)
    assert [path.parent for path in (db.parent / "results").glob("sim-*.json")] == [db.parent / "results"]
    assert not (tmp_path / "results").exists() and schedule.doc is not None


@pytest.mark.parametrize("shaping", [{"generator": "philly"}, {"seed": 4}, {"mean_gap_s": 5}])
def test_an_option_that_shapes_a_synthetic_trace_is_refused_with_a_trace(tmp_path, shaping):
    """simulate_schedule(trace, generator="philly", seed=4, mean_gap_s=5) dropped all three without a word,
    where `stash schedule --trace` refuses each."""
    trace = tmp_path / "t.csv"
    stash.simulate_schedule(synthetic_jobs=4, policies="fifo", no_store=True, out=tmp_path / "r",
                            jobs_csv=trace)  # fmt: skip
    name = next(iter(shaping))
    with pytest.raises(UsageError, match=f"^{name} shapes a synthetic trace .*does not go with trace"):
        stash.simulate_schedule(trace, policies="fifo", no_store=True, out=tmp_path / "r2", **shaping)
    assert not (tmp_path / "r2").exists()


@pytest.mark.parametrize("label", [5, "", "  "])
def test_a_trace_label_that_is_no_text_is_refused(tmp_path, label):
    """trace_label=5 was stored as the trace's name, and "" was replaced by the generated one."""
    with pytest.raises(UsageError, match="^trace_label: expected a text that is not empty"):
        stash.simulate_schedule(synthetic_jobs=4, policies="fifo", no_store=True, out=tmp_path / "r",
                                trace_label=label)  # fmt: skip
    assert not (tmp_path / "r").exists()


def test_a_traces_jobs_left_out_are_said_in_its_name(tmp_path: Path) -> None:
    """A Philly log of three jobs, one never timed, was simulated on two without a word."""
    attempt = {"start_time": "2017-10-01 10:00:05", "end_time": "2017-10-01 11:00:05",
               "detail": [{"ip": "m1", "gpus": ["g0"]}]}  # fmt: skip
    log = [{"jobid": "a", "submitted_time": "2017-10-01 10:00:00", "attempts": [attempt]},
           {"jobid": "b", "submitted_time": "2017-10-01 10:10:00", "attempts": [attempt]},
           {"jobid": "c", "submitted_time": "2017-10-01 10:20:00",
            "attempts": [{"start_time": "2017-10-01 10:20:05", "end_time": None, "detail": []}]}]  # fmt: skip
    trace = tmp_path / "cluster_job_log"
    trace.write_text(json.dumps(log))
    schedule = stash.simulate_schedule(trace=trace, tuning="given", db=tmp_path / "r.duckdb", no_store=True)
    assert "(philly; 2 of its 3 jobs, 1 without GPUs or a run time left out)" in schedule.doc["trace"]


def test_none_is_each_policy_options_default_as_not_given(tmp_path: Path) -> None:
    """None stands for an option not given (the command's default), so that an option no policy run here uses
    can be told apart from one given and refused."""
    from stash_core.sched import defaults as d

    common = {"synthetic_jobs": 12, "policies": "las,network-preempt", "tuning": "online", "no_store": True,
              "out": tmp_path}  # fmt: skip
    explicit = stash.simulate_schedule(
        **common, checkpoint_s=d.CHECKPOINT_S, min_run_s=d.MIN_RUN_S, max_preemptions=d.MAX_PREEMPTIONS,
        las_limits_gpu_h=d.LAS_LIMITS_GPU_H, starve_factor=d.STARVE_FACTOR, uplink_factor=d.UPLINK_FACTOR,
    )  # fmt: skip
    unset = stash.simulate_schedule(
        **common, checkpoint_s=None, min_run_s=None, max_preemptions=None, las_limits_gpu_h=None,
        starve_factor=None, uplink_factor=None,
    )  # fmt: skip
    settings = [p["settings"] for p in explicit.doc["policies"]]
    assert [p["settings"] for p in unset.doc["policies"]] == settings
    metrics = [p["metrics"] for p in explicit.doc["policies"]]
    assert [p["metrics"] for p in unset.doc["policies"]] == metrics
    split = {**common, "tuning": "split", "synthetic_jobs": 60}
    assert stash.simulate_schedule(**split, tune_fraction=None).doc["policies"] == (
        stash.simulate_schedule(**split, tune_fraction=d.TUNE_FRACTION).doc["policies"])
