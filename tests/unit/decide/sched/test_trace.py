"""Traces: Tiresias-style CSV columns, the source of each job's network sensitivity, clear refusals."""

from __future__ import annotations

import pandas as pd
import pytest

from stash_core.decide.sched import load_trace, synthetic_trace
from stash_core.errors import UsageError


def write(tmp_path, frame):
    path = tmp_path / "trace.csv"
    frame.to_csv(path, index=False)
    return path


def test_durations_iterations_and_sensitivity_sources(tmp_path):
    path = write(tmp_path, pd.DataFrame({
        "job_id": [1, 2, 3, 4], "num_gpu": [4, 8, 2, 1], "submit_time": [30, 0, 10, 20],
        "duration": [600, None, 300, 100], "iterations": [None, 1000, None, None],
        "iteration_s": [None, 0.5, None, None],
        "model_name": ["resnet50", "alexnet", "my_lstm", "resnet18"],
        "network_slowdown": [None, None, None, 1.05],
    }))  # fmt: skip
    jobs = {job.job_id: job for job in load_trace(path)}
    assert [job.job_id for job in load_trace(path)] == ["2", "3", "4", "1"]  # by arrival
    assert jobs["2"].duration_s == 500.0
    assert jobs["1"].slowdown == pytest.approx(1 / 0.9) and jobs["1"].slowdown_source == "blox"
    assert jobs["2"].slowdown == pytest.approx(1 / 0.6)
    assert jobs["3"].slowdown == pytest.approx(1 / 0.8) and jobs["3"].slowdown_source == "blox default"
    assert (jobs["4"].slowdown, jobs["4"].slowdown_source) == (1.05, "trace")


@pytest.mark.parametrize(
    "frame, message",
    [
        (pd.DataFrame({"job_id": [1], "num_gpu": [2]}), "missing column(s) submit_time"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [2], "submit_time": [0]}), "give a duration column"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [0], "submit_time": [0], "duration": [5]}), "num_gpu"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [1.5], "submit_time": [0], "duration": [5]}), "whole"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [1], "submit_time": ["soon"], "duration": [5]}),
         "submit_time must be a number"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [1], "submit_time": [0], "duration": [5],
                       "network_slowdown": [0.5]}), "must be >= 1"),
    ],
)  # fmt: skip
def test_bad_traces_are_refused_with_the_reason(tmp_path, frame, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_trace(write(tmp_path, frame))


def test_a_file_that_is_not_a_csv(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_bytes(b"")
    with pytest.raises(UsageError, match="not a CSV"):
        load_trace(path)
    with pytest.raises(UsageError, match="cannot read"):
        load_trace(tmp_path / "missing.csv")


def test_synthetic_traces_are_reproducible():
    first = synthetic_trace(50, seed=3, models=["resnet50"])
    assert first.equals(synthetic_trace(50, seed=3, models=["resnet50"]))
    assert not first.equals(synthetic_trace(50, seed=4, models=["resnet50"]))
    assert first["submit_time"].is_monotonic_increasing and set(first["num_gpu"]) <= {1, 2, 4, 8, 16}


def test_stash_measurements_give_the_sensitivity_of_profiled_models(tmp_path):
    from result_docs import result_doc

    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    # network 0.1 s on top of compute 0.2 + interconnect 0.05 s: spread is 1.4 times slower
    stalls = {"compute": 0.2, "interconnect": 0.05, "network": 0.1}
    ingest_result(db, result_doc("resnet50", nodes=2, stalls=stalls))
    ingest_result(db, result_doc("resnet50", nodes=1, stalls={"compute": 0.2, "interconnect": 0.05}))
    trace = pd.DataFrame({"job_id": [1, 2], "num_gpu": [8, 8], "submit_time": [0, 1],
                          "duration": [60, 60], "model_name": ["resnet50", "vgg16"]})  # fmt: skip
    path = write(tmp_path, trace)
    jobs = {job.job_id: job for job in load_trace(path, db)}
    assert jobs["1"].slowdown == pytest.approx(1.4) and jobs["1"].slowdown_source == "measured"
    assert jobs["2"].slowdown_source == "blox default"
