"""Typed results: each answer is a dataclass with .to_frame() and .to_dict(); to_dict is what the command's
JSON output holds, so a notebook and the command line read the same figures."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from result_docs import result_doc
from support import REPO, stash_here

import stash_core as stash
from stash_core import store

WORKLOAD = REPO / "examples" / "workload.json"
OFFERS = {"g3.8xlarge": 5, "g3.16xlarge": 3}
JOB = {"model": "resnet18", "batch_size": 8, "input_shape": (3, 64, 64)}


def test_a_result_of_a_document(tmp_path):
    doc = result_doc("resnet18", run_id="20261124T100000Z-aaaa0001", stalls={"compute": 0.2, "cpu": 0.05})
    result = stash.Result.from_document(doc, result_file=tmp_path / "r.json")
    assert (result.run_id, result.status, result.error) == (doc["run_id"], "completed", None)
    assert result.spec["model"] == "resnet18" and result.breakdown["iteration_s"] == pytest.approx(0.25)
    frame = result.to_frame()
    columns = ["run_id", "stall", "seconds", "ci95_s", "share", "epoch_s", "status", "note", "raw_s",
               "resolved"]
    assert list(frame.columns) == columns
    measured = frame.set_index("stall")["seconds"].dropna().to_dict()
    assert measured == pytest.approx({"compute": 0.2, "cpu": 0.05, "unattributed": 0.0})  # nothing left over
    assert result.to_dict() == json.loads(json.dumps(doc)) and result.to_dict() is not doc
    assert "doc=" not in repr(result)  # the document is long: the repr shows where and what


def test_predictions_have_one_row_per_instance(tmp_path):
    predictions = stash.predict(**JOB, instances=["p3.2xlarge", "g5.xlarge"], db=tmp_path / "x.duckdb")
    frame = predictions.to_frame()
    assert isinstance(frame, pd.DataFrame) and sorted(frame["instance"]) == ["g5.xlarge", "p3.2xlarge"]
    assert (frame["iteration_s"] > 0).all() and predictions.request["model"] == "resnet18"
    as_dict = predictions.to_dict()
    assert [row["instance"] for row in as_dict["predictions"]] == list(frame["instance"])
    frame.loc[:, "iteration_s"] = 0.0
    assert (predictions.frame["iteration_s"] > 0).all()  # to_frame is a copy


def test_a_recommendation(tmp_path):
    answer = stash.recommend(**JOB, epochs=1, dataset_images=10_000, budget_hours=100,
                             instances="p3.2xlarge,g5.xlarge", db=tmp_path / "x.duckdb")  # fmt: skip
    frame = answer.to_frame()
    assert set(frame["instance"]) <= {"p3.2xlarge", "g5.xlarge"} and len(frame) >= 2
    assert answer.best is not None and answer.best["config"] == answer.ranked.iloc[0]["config"]
    assert answer.to_dict()["recommended"]["config"] == answer.best["config"]
    # every stall a number column (CPU and disk, predicted for no option without a profile, were None objects)
    stalls = ["compute_s", "interconnect_s", "network_s", "cpu_s", "disk_s"]
    assert set(stalls) <= set(frame.select_dtypes("number").columns) and frame["cpu_s"].isna().all()
    assert answer.to_dict()["recommended"]["cpu_s"] is None  # the JSON keeps null for a figure not known
    # --dataset-samples is an option of the command: its keyword is one of the function's too
    samples = stash.recommend(**JOB, epochs=1, dataset_samples=10_000, budget_hours=100,
                              instances="p3.2xlarge,g5.xlarge", db=tmp_path / "x.duckdb")  # fmt: skip
    assert samples.best["config"] == answer.best["config"]
    with pytest.raises(stash.UsageError, match="one of dataset_images and dataset_samples"):
        stash.recommend(**JOB, epochs=1, dataset_images=10, dataset_samples=10, budget_hours=1,
                        db=tmp_path / "x.duckdb")  # fmt: skip


def test_a_recommendation_shows_as_a_short_line_with_its_unknown_figures_as_none(tmp_path):
    """A notebook cell ending in recommend() showed one line of some 20,000 characters (every excluded
    instance's sentence, every key of the best row); `best` mixed NaN and None for an unknown figure."""
    from stash_core.catalog import add_instance

    for index in range(12):  # instances of two GPUs and no link named: a refusal each
        add_instance(tmp_path / "x.duckdb", name=f"two-v100-{index}", accelerator="NVIDIA V100 16 GB",
                     accelerator_count=2, vcpus=12, on_demand_usd_per_h=3.0)  # fmt: skip
    answer = stash.recommend("resnet50", 64, 1, 100_000, budget_hours=24, db=tmp_path / "x.duckdb")
    shown = repr(answer)
    assert len(answer.excluded) > 10 and len(shown) < 2000, shown
    assert f"excluded=<{len(answer.excluded)} lines>" in shown and answer.best["config"] in shown
    assert not any(isinstance(value, float) and value != value for value in answer.best.values())
    assert answer.best["comm_error"] is None  # one GPU: no communication, its error unknown
    predictions = stash.predict(model="resnet50", batch_size=64, db=tmp_path / "x.duckdb")
    assert len(repr(predictions)) < 2000 and f"<{len(predictions.not_predictable)} lines>" in repr(predictions)


def test_answers_compare_by_their_values(tmp_path):
    db = tmp_path / "x.duckdb"
    predictions = [stash.predict(**JOB, instances=["p3.2xlarge", "g5.xlarge"], db=db) for _ in range(2)]
    assert predictions[0] == predictions[1]
    predictions[1].frame.loc[:, "iteration_s"] = 1.0
    assert predictions[0] != predictions[1]  # the rows differ
    answers = [stash.recommend(**JOB, epochs=1, dataset_images=10_000, budget_hours=100,
                               instances="p3.2xlarge,g5.xlarge", db=db) for _ in range(2)]  # fmt: skip
    assert answers[0] == answers[1] and answers[0] != predictions[0]
    doc = {**result_doc("resnet18", run_id="20261124T100000Z-aaaa0001"), "unknown": float("nan")}
    assert stash.Result.from_document(doc) == stash.Result.from_document(doc)  # NaN: unknown in both


def test_a_spot_plan_is_what_stash_spot_prints(tmp_path, capsys, monkeypatch):
    db = tmp_path / "x.duckdb"
    plan = stash.plan_spot(WORKLOAD, OFFERS, 0.8, 2600, db=db)
    assert plan.best is not None and plan.pricing == "spot" and plan.risk is not None
    assert len(plan.to_frame()) == len(plan.candidates) >= 1
    printed = stash_here(capsys, monkeypatch, "spot", "--workload", str(WORKLOAD), "--instances",
                         "g3.8xlarge:5,g3.16xlarge:3", "--target-loss", "0.8", "--budget-s", "2600", "--json",
                         "--db", str(db))  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == json.loads(json.dumps(plan.to_dict()))


def test_a_spot_plans_instances_may_be_a_list_of_the_commands_offers(tmp_path):
    db = tmp_path / "x.duckdb"
    by_text = stash.plan_spot(WORKLOAD, "g3.8xlarge:5,g3.16xlarge:3", 0.8, 2600, db=db)
    for offers in (["g3.8xlarge:5", "g3.16xlarge:3"], ("g3.8xlarge:5", "g3.16xlarge:3")):
        assert stash.plan_spot(WORKLOAD, offers, 0.8, 2600, db=db).to_dict() == by_text.to_dict()
    refused = [(["g3.8xlarge:5,g3.16xlarge:3"], "is not one 'NAME:QUOTA'"), ([5], "5 is not one"),
               ([], "expected"), (["g3.8xlarge:x"], "the quota expected a whole number")]  # fmt: skip
    for offers, says in refused:
        with pytest.raises(stash.UsageError, match=says):
            stash.plan_spot(WORKLOAD, offers, 0.8, 2600, db=db)


def test_an_infeasible_spot_plan_keeps_its_columns_and_its_bounds_are_the_commands_list(tmp_path):
    feasible = stash.plan_spot(WORKLOAD, OFFERS, 0.8, 2600, db=tmp_path / "x.duckdb")
    assert list(feasible.to_frame().columns) == list(feasible.candidates[0])  # every column of the rows
    plan = stash.plan_spot(WORKLOAD, {"g3.8xlarge": 1}, 0.8, 2600, db=tmp_path / "x.duckdb")
    assert plan.best is None and plan.infeasible_reason
    frame = plan.to_frame()
    assert frame.empty and list(frame.columns) == list(feasible.to_frame().columns)
    bounds = plan.to_dict()["bounds"]
    assert isinstance(bounds, list) and bounds == json.loads(json.dumps(bounds)) and len(bounds) == 2


def test_a_schedule_is_saved_and_stored(tmp_path, capsys, monkeypatch):
    db = tmp_path / "s.duckdb"
    schedule = stash.simulate_schedule(synthetic_jobs=30, seed=1, policies=["fifo", "consolidate"],
                                       out=tmp_path / "results", db=db)  # fmt: skip
    frame = schedule.to_frame()
    assert list(frame["policy"]) == ["fifo", "consolidate"] and (frame["makespan_s"] > 0).all()
    assert schedule.result_file.is_file() and schedule.db == db
    assert set(store.simulations_frame(db)["simulation_id"]) == {schedule.simulation_id}
    assert schedule.to_dict()["simulation_id"] == schedule.simulation_id
    alone = stash.simulate_schedule(synthetic_jobs=30, seed=1, policies="fifo,consolidate", no_store=True,
                                    out=tmp_path / "alone", db=tmp_path / "none.duckdb")  # fmt: skip
    assert alone.db is None and not (tmp_path / "none.duckdb").exists()
    pd.testing.assert_frame_equal(alone.to_frame(), frame)  # the same seed, the same simulation
    argv = ["--synthetic-jobs", "30", "--seed", "1", "--policies", "fifo,consolidate", "--no-store"]
    printed = stash_here(capsys, monkeypatch, "schedule", *argv, "--out", str(tmp_path / "cli"))
    assert printed.returncode == 0, printed.stderr
    cli_doc = json.loads(next((tmp_path / "cli").glob("sim-*.json")).read_text())
    metrics = frame.drop(columns="policy").to_dict("records")
    assert [entry["metrics"] for entry in cli_doc["policies"]] == metrics


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda db: stash.predict(model="resnet18", batch_size=0, db=db), "batch_size: must be a positive"),
        (lambda db: stash.predict(script_run="x", model="resnet18", db=db), "one of model and script_run"),
        (lambda db: stash.recommend("resnet18", 8, 0, 100, db=db), "epochs: must be positive"),
        (lambda db: stash.plan_spot(WORKLOAD, {"nope": 1}, 0.8, 2600, db=db), "'nope' is not in the catalog"),
        (lambda db: stash.plan_spot(WORKLOAD, OFFERS, -1, 2600, db=db), "target_loss: must be positive"),
        (lambda db: stash.simulate_schedule(db=db), "one of trace and synthetic_jobs"),
        (lambda db: stash.simulate_schedule(synthetic_jobs=5, policies=["x"], db=db), "unknown policy x"),
        (lambda db: stash.simulate_schedule(synthetic_jobs=5, cluster=(2, 0, 8), db=db), "cluster: "),
    ],
    ids=["batch", "both", "epochs", "instance", "loss", "neither", "policy", "cluster"],
)
def test_bad_input_is_a_usage_error(call, message, tmp_path):
    with pytest.raises(stash.UsageError, match=message):
        call(tmp_path / "x.duckdb")


def test_a_result_s_rows_say_what_is_left_over_as_stash_show_does():
    """A profile of the disk stall alone: the API's rows held disk 0.027 s of a 0.488 s iteration (5.6%)
    and nothing of the 0.461 s `stash show` calls "not separated"."""
    doc = result_doc("resnet18", stalls={"disk": 0.027})
    doc["breakdown"]["iteration_s"] = 0.488
    frame = stash.Result.from_document(doc).to_frame().set_index("stall")
    assert frame.loc["unattributed", "seconds"] == pytest.approx(0.461)
    assert frame.loc["unattributed", "share"] == pytest.approx(0.461 / 0.488)
    assert frame.loc["unattributed", "note"].startswith("not separated")


def test_a_spot_plans_rows_outside_the_loss_model_are_plain_json_as_the_command_prints_them(
    tmp_path, capsys, monkeypatch
):
    """Rows the loss model cannot reach held inf in to_dict(): json.dumps wrote Infinity, which is no JSON."""
    workload = json.loads(WORKLOAD.read_text())
    workload["g"] = [876.5, -1.5, 1903.6, 1, 0.5]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    db = tmp_path / "x.duckdb"
    plan = stash.plan_spot(path, OFFERS, 0.8, 2600, db=db)
    assert any(row["outside_loss_model"] for row in plan.candidates)
    as_json = json.dumps(plan.to_dict(), allow_nan=False)
    printed = stash_here(capsys, monkeypatch, "spot", "--workload", str(path), "--instances",
                         "g3.8xlarge:5,g3.16xlarge:3", "--target-loss", "0.8", "--budget-s", "2600", "--json",
                         "--db", str(db))  # fmt: skip
    assert json.loads(printed.stdout) == json.loads(as_json)


def test_a_results_warnings_are_the_breakdowns_as_the_command_prints_them() -> None:
    """The API's Result had no word of the warnings `stash profile` prints: a run ± 31% against a 2% target
    read as any other unless one looked in result.breakdown["warnings"]."""
    from stash_core.api.results import Result

    breakdown = {"iteration_s": 0.1, "warnings": ["cpu: ± 31%"]}
    doc = {"run_id": "r", "status": "completed", "breakdown": breakdown}
    assert Result.from_document(doc).warnings == ["cpu: ± 31%"]
    assert Result.from_document({"run_id": "r", "status": "failed"}).warnings == []


def test_a_results_warnings_name_profiles_arguments_not_the_commands_flags() -> None:
    """A Python caller read "--launches 3 measures that too" and "without --data-dir", options profile()
    does not take by those names; the document keeps the command's words for `stash show`."""
    from stash_core.api.results import Result

    said = [
        "intervals from one launch per run; --launches 3 measures that too",
        "without --data-dir Stash cannot set the page-cache state (stash cluster up --split-cpus helps)",
        "see --frobnicate",
    ]
    doc = {"run_id": "r", "status": "completed", "breakdown": {"iteration_s": 0.1, "warnings": said}}
    assert Result.from_document(doc).warnings == [
        "intervals from one launch per run; launches 3 measures that too",
        "without data_dir Stash cannot set the page-cache state (stash cluster up --split-cpus helps)",
        "see --frobnicate",
    ]
    assert doc["breakdown"]["warnings"] == said


def test_a_failed_runs_error_names_profiles_arguments() -> None:
    """A failed run's reason told a Python caller to "raise --comm-timeout", an option profile() takes as
    comm_timeout; the document keeps the command's words."""
    from stash_core.api.results import Result

    said = "a collective waited past --comm-timeout (30 s): raise --comm-timeout (`stash probe` times it)"
    doc = {"run_id": "r", "status": "failed", "error": said}
    assert Result.from_document(doc).error == (
        "a collective waited past comm_timeout (30 s): raise comm_timeout (`stash probe` times it)"
    )
    assert doc["error"] == said and Result.from_document({"run_id": "r", "status": "completed"}).error is None
