"""Traces: Tiresias-style CSV columns, the source of each job's network sensitivity, clear refusals."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from stash_core.errors import UsageError
from stash_core.sched import load_trace, synthetic_trace


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
        # Python's float() reads it as 1000
        (pd.DataFrame({"job_id": [1], "num_gpu": [1], "submit_time": [0], "duration": ["1_000"]}),
         "duration must be a number, got '1_000'"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [1], "submit_time": [0], "duration": [5],
                       "network_slowdown": [0.5]}), "must be >= 1"),
        (pd.DataFrame({"job_id": [1], "num_gpu": [1], "submit_time": [0], "duration": [5],
                       "model_name": ["\x1b[31mresnet50"]}), "model_name holds the control character U+001B"),
    ],
)  # fmt: skip
def test_bad_traces_are_refused_with_the_reason(tmp_path, frame, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        load_trace(write(tmp_path, frame))


@pytest.mark.parametrize("fmt", ["tiresias", "helios"])
def test_a_row_wider_than_the_header_is_said_in_words(tmp_path, fmt):
    """pandas' "Error tokenizing data. C error: Expected 4 fields in line 3, saw 6" was passed on."""
    path = tmp_path / "trace.csv"
    path.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,5\n2,1,0,5,7,8\n")
    with pytest.raises(UsageError, match="line 3 has 6 fields where the header has 4$") as refused:
        load_trace(path, fmt=fmt)
    assert "C error" not in str(refused.value)


def test_a_file_that_is_not_a_csv(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_bytes(b"")
    with pytest.raises(UsageError, match="not a CSV"):
        load_trace(path)
    with pytest.raises(UsageError, match="trace does not exist"):
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
    trace = pd.DataFrame({"job_id": [1, 2, 3], "num_gpu": [8, 8, 8], "submit_time": [0, 1, 2],
                          "duration": [60, 60, 60], "model_name": ["resnet50", "vgg16", "ResNet50"]})  # fmt: skip
    path = write(tmp_path, trace)
    jobs = {job.job_id: job for job in load_trace(path, db)}
    assert jobs["1"].slowdown == pytest.approx(1.4) and jobs["1"].slowdown_source == "measured"
    assert jobs["2"].slowdown_source == "blox default"
    assert jobs["3"].slowdown_source == "measured"  # the zoo's resnet50, as its profiles are stored


def test_a_jobs_compute_can_come_from_a_stash_profile_of_its_model(tmp_path):
    from result_docs import result_doc

    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    # one node: compute 0.2 + interconnect 0.05 s per iteration; a two-node profile of it is not its compute
    ingest_result(db, result_doc("resnet50", nodes=1, stalls={"compute": 0.2, "interconnect": 0.05}))
    ingest_result(db, result_doc("resnet50", nodes=2, stalls={"compute": 0.3, "interconnect": 0.05,
                                                              "network": 0.1}))  # fmt: skip
    trace = pd.DataFrame({"job_id": [1, 2, 3], "num_gpu": [8, 8, 8], "submit_time": [0, 1, 2],
                          "iterations": [1000, 1000, 1000], "iteration_s": [None, 0.5, None],
                          "model_name": ["resnet50", "resnet50", "resnet50"]})  # fmt: skip
    path = write(tmp_path, trace)
    jobs = {job.job_id: job for job in load_trace(path, db)}
    assert jobs["1"].duration_s == pytest.approx(250.0) and jobs["1"].iteration_s == pytest.approx(0.25)
    assert jobs["2"].duration_s == pytest.approx(500.0)  # the trace's own iteration_s wins
    with pytest.raises(UsageError) as refused:  # no database: nothing to take it from
        load_trace(path)
    assert str(refused.value).endswith(
        "job 1 gives neither duration nor iteration_s, and no database is read to take the iteration time of "
        "resnet50 from"
    )
    unprofiled = write(tmp_path, trace.assign(model_name="vgg16").drop(columns="iteration_s"))
    with pytest.raises(UsageError) as refused:
        load_trace(unprofiled, db)
    assert str(refused.value) == (
        f"{unprofiled}: job 1 gives neither duration nor iteration_s, and the database {db} holds no "
        "completed one-node profile of vgg16 to take its iteration time from"
    )
    modelless = write(tmp_path, trace.drop(columns="model_name"))
    with pytest.raises(UsageError, match="job 1 gives neither duration nor iteration_s, nor a model_name"):
        load_trace(modelless, db)


def one_job(**fields):
    return {"job_id": [1], "num_gpu": [1], "submit_time": [0], "duration": [5], **fields}


@pytest.mark.parametrize(
    "columns, message",
    [
        (one_job(duration=[float("nan")]), "job 1 duration is empty"),  # was "got nan": the file has none
        (one_job(submit_time=[None]), "job 1 submit_time is empty"),
        (one_job(duration=[float("inf")]), "job 1 duration must be a finite number, got inf"),
        # a link model's iteration of 1e-298 s overflowed its terms: a ZeroDivisionError, a traceback
        (one_job(iterations=[1e300]), "job 1 iterations 1e+300 make an iteration of 5e-300 s"),
        # lost when added to its submit time: two jobs held every GPU at once, for no time
        (one_job(submit_time=[1e11], duration=[1e-300]),
         "job 1 duration 1e-300 s is below the resolution of a time near its submit_time 100000000000.0 s"),
        ({"job_id": [1, 1], "num_gpu": [1, 2], "submit_time": [0, 1], "duration": [5, 5]},
         "job id 1 is given twice (jobs 1 and 2)"),
        ({"job_id": [None, 2], "num_gpu": [1, 2], "submit_time": [0, 1], "duration": [5, 5]},
         "job 1 (by position) has no job_id"),
        (one_job(duration=[1e300]), "job 1 duration must be at most 315360000 s (10 years), got 1e+300"),
        (one_job(submit_time=[1e300]), "job 1 submit_time must be within ±1e+12 s, got 1e+300"),
        (one_job(submit_time=[-1e300]), "job 1 submit_time must be within ±1e+12 s, got -1e+300"),
        ({"job_id": [1, 2], "num_gpu": [1, 1], "submit_time": [0, 1e11], "duration": [5, 5]},
         "job 2 submit_time 100000000000.0 is more than 100 years after the first job's (0.0)"),
        ({**one_job(), "duration": [None], "iterations": [1e200], "iteration_s": [1e200]},
         "job 1 iterations x iteration_s must be at most 315360000 s (10 years), got 1e+200 x 1e+200"),
        (one_job(estimate_s=[1e300]), "job 1 estimate_s must be at most 315360000 s (10 years)"),
        (one_job(num_gpu=[1e30]), "job 1 num_gpu must be at most 1000000, got 1e+30"),
        (one_job(network_slowdown=[1e300]), "network_slowdown must be at most 1000"),
        (one_job(grad_bytes=[1e300]), "grad_bytes must be at most 1e+15"),
    ],
)  # fmt: skip
def test_missing_repeated_and_out_of_bound_values_are_refused(tmp_path, columns, message):
    with pytest.raises(UsageError) as refused:
        load_trace(write(tmp_path, pd.DataFrame(columns)))
    assert message in str(refused.value)


def test_the_bounds_leave_long_real_traces_alone(tmp_path):
    year_s = 365 * 86400.0
    frame = pd.DataFrame({"job_id": [1, 2], "num_gpu": [8, 1], "submit_time": [1.5e9, 1.5e9 + 99 * year_s],
                          "duration": [9.9 * year_s, 1]})  # fmt: skip
    assert [job.job_id for job in load_trace(write(tmp_path, frame))] == ["1", "2"]
