"""The data behind the Models and Recommend pages, over real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from result_docs import result_doc as _cpu_machine_doc

from stash_core import store, views
from stash_core.catalog import COLUMNS
from stash_core.engine.jobs import jobs_dir
from stash_core.errors import UsageError
from stash_core.views.recommend import RecommendRequest


def result_doc(*args, **kwargs):
    """result_docs.result_doc on a machine that fits its device: a CUDA run's machine has a GPU per worker
    (result_doc's fingerprint has none, which would contradict a GPU instance label)."""
    doc = _cpu_machine_doc(*args, **kwargs)
    if doc["spec"]["device"] == "cuda":
        count = doc["spec"]["workers_per_node"]
        gpus = [{"index": index, "name": "Tesla V100-SXM2-16GB"} for index in range(count)]
        doc["fingerprint"].update(gpu_count=count, gpus=gpus, gpu_status=f"{count} GPU(s)")
    return doc


MODELS = {  # name: (gradient bytes, gradient tensors, layers)
    "m1": (10e6, 20, 15),
    "m2": (40e6, 60, 41),
    "m3": (80e6, 100, 70),
    "m4": (120e6, 160, 110),
    "m5": (200e6, 40, 30),
}
RESNET18_COUNTS = {"grad_bytes": 46_758_048, "grad_tensor_count": 62, "layer_count": 41}


def interconnect_s(grad_bytes: float, tensors: int) -> float:
    return 0.002 + 1e-9 * grad_bytes + 1e-4 * tensors


@pytest.fixture(scope="module")
def fits_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("fits") / "results.duckdb"
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        doc = result_doc(
            name,
            grad_bytes=int(grad_bytes),
            grad_tensor_count=tensors,
            layer_count=layers,
            instance="lab",
            stalls={"compute": 0.3, "interconnect": interconnect_s(grad_bytes, tensors)},
        )
        store.ingest_result(db, doc)
    return db


@pytest.fixture(scope="module")
def rec_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("recommend") / "results.duckdb"
    stalls = {"compute": 0.20, "interconnect": 0.03, "cpu": 0.01, "disk": 0.01}
    store.ingest_result(
        db,
        result_doc(
            "resnet50", instance="p3.16xlarge", workers=8, device="cuda", batch_size=64, stalls=stalls
        ),
    )
    two_nodes = {"compute": 0.20, "interconnect": 0.02, "network": 0.10, "cpu": 0.01, "disk": 0.01}
    store.ingest_result(
        db,
        result_doc(
            "resnet50",
            instance="p3.8xlarge",
            workers=4,
            nodes=2,
            device="cuda",
            batch_size=64,
            stalls=two_nodes,
        ),
    )
    store.ingest_result(db, result_doc("resnet18", batch_size=32, instance="box"))
    store.ingest_result(db, result_doc("vgg11", batch_size=16, status="failed"))
    return db


# ---------------------------------------------------------------------------------------------------------
# Models


def test_fits_of_a_family_have_points_in_ms_and_a_best_model(fits_db: Path) -> None:
    report = views.models.fit_report(fits_db, by_batch_size=False)
    assert views.models.fitted_stalls(report) == ["interconnect"]
    labels = views.models.group_labels(report, "interconnect")
    assert len(labels) == 1 and "lab" in labels[0]
    group = report.groups("interconnect")[0]
    points = views.models.stall_points(report, "interconnect", group)
    assert sorted(points["model"]) == sorted(MODELS)
    assert set(points["fit"]) == {"linear: bytes+tensors"}  # the best fit's rows only
    for row in points.to_dict(orient="records"):
        grad_bytes, tensors, _ = MODELS[row["model"]]
        assert row["measured_ms"] == pytest.approx(interconnect_s(grad_bytes, tensors) * 1e3)
        assert row["measured_ms"] == pytest.approx(row["measured_s"] * 1e3)
        assert row["heldout_ms"] == pytest.approx(row["measured_ms"], rel=1e-6)  # exact in the features
    # each point's own 95% interval, drawn as a bar through it (the points had none)
    observed = report.observations.set_index(["run_id", "stall"])["ci95_s"]
    for row in points.to_dict(orient="records"):
        ci95_s = observed[(row["run_id"], "interconnect")]
        assert ci95_s > 0 and row["measured_ci95_ms"] == pytest.approx(ci95_s * 1e3)
    table = views.models.models_table(report, "interconnect", group)
    assert list(table.columns) == views.models.TABLE_COLUMNS
    assert table.iloc[0]["model"] == "linear: bytes+tensors" and bool(table.iloc[0]["best"])
    median_error, configurations = views.models.median_best_error(report)
    assert configurations == 1 and median_error == pytest.approx(0.0, abs=1e-9)


def test_fit_lines_sample_the_single_feature_fit_over_the_observed_range(fits_db: Path) -> None:
    report = views.models.fit_report(fits_db, by_batch_size=False)
    group = report.groups("interconnect")[0]
    points = views.models.stall_points(report, "interconnect", group)
    lines = views.models.fit_lines(report, "interconnect", group, "grad_bytes", points)
    assert list(lines.columns) == ["fit", "grad_bytes", "fitted_ms"]
    assert set(lines["fit"]) == {"linear: bytes"}
    assert len(lines) == views.models.FIT_LINE_STEPS + 1
    assert lines["grad_bytes"].min() == pytest.approx(10e6) and lines["grad_bytes"].max() == pytest.approx(
        200e6
    )
    assert lines["fitted_ms"].is_monotonic_increasing or lines["fitted_ms"].is_monotonic_decreasing


def test_a_prediction_for_a_new_model_in_every_group(fits_db: Path) -> None:
    report = views.models.fit_report(fits_db, by_batch_size=False)
    frame = views.models.prediction_frame(report, RESNET18_COUNTS, ["interconnect"])
    assert list(frame.columns) == views.models.PREDICTION_COLUMNS
    assert list(frame["stall"]) == ["interconnect"]
    assert frame.iloc[0]["by"] == "linear: bytes+tensors"
    expected_s = interconnect_s(RESNET18_COUNTS["grad_bytes"], RESNET18_COUNTS["grad_tensor_count"])
    assert frame.iloc[0]["predicted_ms"] == pytest.approx(expected_s * 1e3, rel=1e-6)
    assert frame.iloc[0]["expected_error"] == pytest.approx(0.0, abs=1e-6)  # a fraction, not text


def test_models_of_an_empty_database(tmp_path: Path) -> None:
    report = views.models.fit_report(tmp_path / "none.duckdb", by_batch_size=True)
    assert report.observations.empty and views.models.fitted_stalls(report) == []
    assert views.models.median_best_error(report) == (None, 0)
    assert not (tmp_path / "none.duckdb").exists()


def test_an_uploaded_model_file_is_saved_for_counting(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    reference = views.models.uploaded_model_reference(db, "../tiny.py", b"def make():\n    pass\n", "  ")
    path_text, factory = reference.rsplit(":", 1)
    path = Path(path_text)
    assert factory == "make" and path.name.startswith("tiny_") and path.read_bytes().startswith(b"def make")
    assert path.parent == jobs_dir(db) / "models"  # where the Run page keeps uploaded models, not a temp dir
    with pytest.raises(UsageError):
        views.models.uploaded_model_reference(db, "broken.py", b"def make(:\n", "make")
    with pytest.raises(UsageError):
        views.models.gradient_counts("no-such-model-anywhere")


# ---------------------------------------------------------------------------------------------------------
# Recommend


def test_profiled_models_count_completed_runs_per_batch_size(rec_db: Path) -> None:
    profiled = views.recommend.profiled_models(rec_db)
    assert list(profiled.columns) == ["model", "batch_size", "input_shape", "runs"]
    assert profiled.iloc[0][["model", "batch_size", "runs"]].tolist() == ["resnet50", 64, 2]
    assert set(profiled["model"]) == {"resnet50", "resnet18"}  # the failed vgg11 run is not counted
    assert views.recommend.batch_sizes_of(profiled, "resnet18") == [32]
    assert views.recommend.batch_sizes_of(profiled, "unknown") == []


def test_the_catalog_lists_built_in_instances_and_saves_edits(tmp_path: Path) -> None:
    db = tmp_path / "catalog.duckdb"
    assert "p3.16xlarge" in views.recommend.instance_names(db)
    before = views.recommend.instance_catalog(db)
    assert list(before.columns) == list(COLUMNS)
    after = before.copy()
    after.loc[after["name"] == "p3.16xlarge", "on_demand_usd_per_h"] = 1.25
    edited, added, _ = views.recommend.save_catalog_edits(db, before, after)
    assert (edited, added) == (["p3.16xlarge"], [])
    stored = views.recommend.instance_catalog(db).set_index("name")
    assert stored.loc["p3.16xlarge", "on_demand_usd_per_h"] == pytest.approx(1.25)
    bad = after.copy()
    bad.loc[bad["name"] == "p3.16xlarge", "on_demand_usd_per_h"] = -1.0
    with pytest.raises(UsageError, match="p3.16xlarge"):
        views.recommend.save_catalog_edits(db, after, bad)


def test_a_recommendation_and_the_frames_of_its_charts(rec_db: Path) -> None:
    request = RecommendRequest(
        model="resnet50",
        batch_size=64,
        epochs=90.0,
        dataset_images=1_281_167,
        budget_hours=24.0,
        instances=("p3.8xlarge", "p3.16xlarge"),
    )
    result = views.recommend.recommendation(rec_db, request)
    assert result.best is not None and result.best["config"] == "1 x p3.16xlarge"
    assert result.request["budget_hours"] == 24.0
    points = views.recommend.pareto_points(result.options)
    assert points["training_usd"].notna().all()
    assert set(points["kind"]) <= set(views.recommend.MEETS_CONSTRAINTS.values())
    assert (points["kind"] == "meets the constraints").tolist() == points["feasible"].tolist()
    long = views.recommend.stall_seconds_long(result.ranked)
    expected = {"run_label", "source", "stall", "value", "stall_label", "stall_order", "bar_end"}
    assert expected <= set(long.columns)
    assert long["value"].notna().all()
    first = long[long["run_label"] == "1 x p3.16xlarge"].sort_values("stall_order")
    assert first["stall_label"].iloc[0] == "Compute" and first["stall_order"].iloc[0] == 0
    # every bar ends at the iteration time its time and cost are of
    ends = long.groupby("run_label")["bar_end"].last()
    iteration = result.ranked.set_index("config")["iteration_s"]
    assert ends.to_dict() == pytest.approx(iteration[ends.index].to_dict())


def test_stall_seconds_long_skips_unknown_stalls() -> None:
    ranked = pd.DataFrame(
        {
            "config": ["a"],
            "source": ["measured"],
            "compute_s": [0.2],
            "interconnect_s": [None],
            "network_s": [None],
            "cpu_s": [0.05],
            "disk_s": [0.01],
        }
    )
    long = views.recommend.stall_seconds_long(ranked)
    assert long["stall"].tolist() == ["compute", "cpu", "disk"]
    assert long["stall_order"].tolist() == [0, 3, 4]
    assert long["stall_label"].tolist() == ["Compute", "CPU pre-processing", "Disk fetch"]


def test_a_profiles_stalls_that_overcount_its_iteration_close_at_it() -> None:
    """A profile's stalls of 275 ms for a 233 ms iteration drew a bar of 275 ms (its time and cost: 233)."""
    ranked = pd.DataFrame({"config": ["1 x lap-b"], "source": ["measured"], "iteration_s": [0.2327],
                           "compute_s": [0.0954], "interconnect_s": [0.1245], "network_s": [0.0],
                           "cpu_s": [0.0], "disk_s": [0.0548]})  # fmt: skip
    long = views.recommend.stall_seconds_long(ranked)
    assert long["bar_end"].iloc[-1] == pytest.approx(0.2327)
    assert long["stall_label"].iloc[-1] == "Not separated" and long["value"].iloc[-1] == pytest.approx(-0.042)


def test_an_impossible_request_is_refused(rec_db: Path) -> None:
    with pytest.raises(UsageError):
        views.recommend.recommendation(
            rec_db, RecommendRequest(model="resnet50", batch_size=0, epochs=1.0, dataset_images=10)
        )


def test_the_model_choices_keep_their_order_and_the_users_choice() -> None:
    before = pd.DataFrame({"model": ["resnet50"], "batch_size": [64], "runs": [1]})
    after = pd.DataFrame({"model": ["zz_custom", "resnet50"], "batch_size": [8, 64], "runs": [5, 1]})
    first = views.recommend.model_choices(before, "gpt2")
    second = views.recommend.model_choices(after, "gpt2")
    assert second[: len(first)] == first and second[-1] == "zz_custom"  # a new profile only appends
    assert "my_model.py:make" in views.recommend.model_choices(after, "my_model.py:make")
    # a model file or module a stored run names is not offered: choosing it would run its code
    uploaded = pd.DataFrame({"model": ["/tmp/evil.py:make", "this:x", "zz_custom"], "batch_size": [8] * 3,
                             "runs": [1] * 3})  # fmt: skip
    offered = views.recommend.model_choices(uploaded, "gpt2")
    assert "zz_custom" in offered and not {"/tmp/evil.py:make", "this:x"} & set(offered)


def test_a_token_model_gets_its_own_defaults_not_imagenets() -> None:
    gpt2 = views.recommend.job_defaults("gpt2")
    assert (gpt2.kind, gpt2.input_shape, gpt2.samples_label) == ("tokens", "1024", "Sequences in one epoch")
    assert gpt2.epoch_samples != views.recommend.IMAGENET_IMAGES
    resnet = views.recommend.job_defaults("resnet50")
    assert (resnet.kind, resnet.input_shape, resnet.epoch_samples) == ("image", "3,224,224", 1_281_167)
    assert views.recommend.job_defaults("my_model.py:make").kind == "unknown"


def test_predicted_options_say_unvalidated_and_which_stalls_are_not_predicted() -> None:
    frame = pd.DataFrame(
        {"source": ["measured", "predicted", "predicted"], "expected_error": [None, 0.2, 0.5],
         "unvalidated": [False, False, True]}
    )  # fmt: skip
    marks = list(views.recommend.marked_source(frame))
    assert marks == ["● measured", "◇ predicted ±20%", "◇ predicted ±50% unvalidated"]
    option = {
        "compute_s": 0.1,
        "interconnect_s": 0.0,
        "network_s": 0.0,
        "cpu_s": None,
        "disk_s": float("nan"),
    }
    assert views.recommend.stalls_not_predicted(option) == ["cpu", "disk"]


def test_a_free_option_is_left_off_the_log_cost_axis_and_counted() -> None:
    """A $0/h catalog row put 0 on the Recommend chart's log cost axis, and the axis vanished."""
    options = pd.DataFrame(
        {
            "config": ["1 x owned", "1 x rented", "1 x unpriced"],
            "training_usd": [0.0, 12.5, None],
            "feasible": [True, True, False],
        }
    )
    points = views.recommend.pareto_points(options)
    assert points["config"].tolist() == ["1 x rented"]
    assert views.recommend.free_options(options) == 1


def test_a_cpu_instance_counts_as_no_gpu_whichever_decision_left_it_out(tmp_path: Path) -> None:
    """recommend's reason for a CPU machine ('no GPU and no profile of this job on it') was counted under
    'other reasons': only predict's wording matched."""
    from stash_core.catalog import add_instance
    from stash_core.decide.predict import predict_instances
    from stash_core.decide.recommend import recommend

    db = tmp_path / "cpu.duckdb"
    add_instance(db, name="vm", accelerator_count=0, vcpus=2, on_demand_usd_per_h=0.1)
    recommended = recommend(db, "resnet18", 8, 1, 1000, budget_hours=1, instances=["vm"])
    predicted = predict_instances(db, "resnet18", 8, instances=["vm"])
    reasons = [*recommended.excluded, *predicted.not_predictable]
    assert len(reasons) == 2
    assert views.recommend.not_predicted_summary(reasons) == "no GPU (CPU instances need a profile): 2"


def test_a_profiled_script_is_no_model_choice_and_is_refused_in_one_line(tmp_path: Path) -> None:
    profiled = pd.DataFrame({"model": ["resnet18", "script:train_ddp.py"], "batch_size": [64, None]})
    assert "script:train_ddp.py" not in views.recommend.model_choices(profiled, "resnet50")
    request = RecommendRequest(model="script:train_ddp.py", batch_size=32, epochs=1, dataset_images=1000)
    with pytest.raises(UsageError, match=r"predict it from its run with `stash predict --script-run RUN`$"):
        views.recommend.recommendation(tmp_path / "none.duckdb", request)


def test_the_instances_not_evaluated_are_counted_by_their_reason() -> None:
    refusal = "tpu-box: not predictable - Google TPU v9 has no entry in the accelerator table"
    assert views.recommend.not_predicted_summary([refusal]) == "accelerator not in Stash's table: 1"


def test_the_median_held_out_error_is_the_one_stash_fit_states() -> None:
    """Over an even count of configurations the page took the upper middle value (99.1% beside 97.6%)."""
    from types import SimpleNamespace

    models = [SimpleNamespace(best=True, lomo_mape=error) for error in (0.10, 0.20, 0.30, 0.90)]
    models.append(SimpleNamespace(best=False, lomo_mape=0.01))
    assert views.models.median_best_error(SimpleNamespace(models=models)) == (pytest.approx(0.25), 4)


def test_the_form_proposes_the_input_shape_a_model_was_profiled_with(tmp_path: Path) -> None:
    """It proposed the profiled batch beside the zoo's 224 px: the profile (32 px) never answered the job."""
    db = tmp_path / "shape.duckdb"
    for run_id in ("20261201T190000Z-aaaa0001", "20261201T190100Z-aaaa0002"):
        doc = result_doc("resnet10", run_id=run_id, batch_size=8, spec_extra={"input_shape": [3, 32, 32]})
        store.ingest_result(db, doc)
    store.ingest_result(db, result_doc("resnet18", run_id="20261201T190200Z-aaaa0003", batch_size=16))
    profiled = views.recommend.profiled_models(db)
    assert views.recommend.profiled_shape(profiled, "resnet10", 8) == "3,32,32"
    assert views.recommend.profiled_shape(profiled, "resnet10", 4) is None  # never profiled at 4
    assert views.recommend.profiled_shape(profiled, "resnet18", 16) in (None, "3,224,224")
    # Runs at the model's default shape (stored as null, as a profile's spec stores it) outnumber it: no shape
    for index in range(3):
        doc = result_doc("resnet10", run_id=f"20261201T1904{index}0Z-bbbb000{index}", batch_size=8)
        doc["spec"]["input_shape"] = None
        store.ingest_result(db, doc)
    assert views.recommend.profiled_shape(views.recommend.profiled_models(db), "resnet10", 8) is None


def test_a_measured_options_parts_are_resolved_as_its_profile_says_and_predicted_ones_have_no_verdict(
    tmp_path: Path,
) -> None:
    """Every part of every option was drawn faded, "not resolved: its 95% interval is wider than its value":
    the ranked rows carry no intervals, measured or predicted."""
    from result_docs import result_doc

    from stash_core import store

    db = tmp_path / "r.duckdb"
    doc = result_doc(stalls={"compute": 0.2, "cpu": 0.05})
    store.ingest_result(db, doc)
    iteration_s = doc["breakdown"]["iteration_s"]
    ranked = pd.DataFrame({
        "config": ["1 x box", "1 x g5.xlarge"], "source": ["● measured", "◇ predicted ±20%"],
        "run_id": [doc["run_id"], None], "iteration_s": [iteration_s, 0.1], "compute_s": [0.2, 0.09],
        "interconnect_s": [None, 0.0], "network_s": [None, 0.0], "cpu_s": [0.05, 0.01],
        "disk_s": [None, None],
    })  # fmt: skip
    long = views.recommend.stall_seconds_long(ranked, db).set_index(["run_label", "stall"])
    assert long.loc[("1 x box", "compute"), "resolved"] is True
    assert long.loc[("1 x box", "cpu"), "resolved"] is True
    predicted = long.loc["1 x g5.xlarge"]
    assert predicted["resolved"].isna().all()
    assert set(predicted["note"]) == {views.recommend.PREDICTED_PART_NOTE}


def test_a_predicted_options_mark_states_the_steps_error_as_the_card_does_and_its_gpus_as_predict():
    """The table said the compute path's error alone (±41%) under a card's ±49% (compute's and
    communication's added, costs.step_error)."""
    import pandas as pd

    from stash_core.views.recommend import gpus_used, marked_source

    frame = pd.DataFrame({
        "source": ["predicted", "measured", "predicted"], "expected_error": [0.41, None, 0.2],
        "comm_error": [0.08, None, None], "unvalidated": [False, False, True],
        "instance_count": [2, 1, 1], "workers_per_instance": [8, 8, 2], "gpus_per_instance": [8, 8, 0],
    })  # fmt: skip
    assert list(marked_source(frame)) == ["◇ predicted ±49%", "● measured", "◇ predicted ±20% unvalidated"]
    assert list(gpus_used(frame)) == ["2x8/8", "8/8", "2 CPU"]


def test_a_label_warning_is_shown_on_the_groups_its_run_is_fitted_in_only():
    """It was matched by the label alone: a CPU run labelled g4dn.xlarge warned on the GPU group of real
    g4dn.xlarge runs too."""
    import pandas as pd

    from stash_core.decide.fit.report import FitReport
    from stash_core.views.models import group_label_warnings

    observations = pd.DataFrame({
        "stall": ["interconnect", "interconnect"], "run_id": ["r-cpu", "r-gpu"], "device": ["cpu", "cuda"],
        "workers_per_node": [2, 2], "instance": ["g4dn.xlarge", "g4dn.xlarge"],
    })  # fmt: skip
    warning = "instance label g4dn.xlarge of run r-cpu does not fit the machine (...): ..."
    report = FitReport(observations=observations, models=[], label_warnings=[warning])
    cpu = {"device": "cpu", "workers_per_node": 2, "instance": "g4dn.xlarge"}
    assert group_label_warnings(report, "interconnect", cpu) == [warning]
    assert group_label_warnings(report, "interconnect", {**cpu, "device": "cuda"}) == []


def test_a_catalog_message_names_the_columns_as_the_editor_heads_them():
    """The editor's refusal named "on_demand_usd_per_h", a column the page heads "on-demand (USD/h)"."""
    said = views.recommend.in_catalog_words("instance g3.16xlarge: on_demand_usd_per_h must not be negative, "
                                            "got -5.0; spot_usd_per_h too")  # fmt: skip
    assert said == "instance g3.16xlarge: on-demand (USD/h) must not be negative, got -5.0; spot (USD/h) too"


def test_a_text_alike_in_every_row_is_said_once():
    """Recommend's table repeated one long note and basis in every row, nine lines tall each."""
    notes = ["CPU not predicted; all-reduce over NVSwitch", "CPU not predicted; over TCP"]
    frame = pd.DataFrame({"basis": ["roofline", "roofline"], "config": ["a", "b"], "note": notes})
    table, alike = views.recommend.alike_in_every_row(frame, ["basis", "note", "config"])
    assert alike == {"basis": "roofline", "note": "CPU not predicted"}
    assert list(table.columns) == ["config", "note"]
    assert list(table["note"]) == ["all-reduce over NVSwitch", "over TCP"]
    assert views.recommend.alike_in_every_row(frame.head(1), ["basis"])[1] == {}  # one row: its own cells


def test_each_note_names_the_ranks_that_carry_it():
    ranks = pd.Series([1, 2, 3, 4, 5, 7])
    notes = pd.Series(["over NVSwitch", "over NVSwitch", "over TCP", "over NVSwitch", None, "over NVSwitch"])
    assert views.recommend.ranks_by_note(ranks, notes) == {"over NVSwitch": "ranks 1-2, 4, 7",
                                                           "over TCP": "rank 3"}  # fmt: skip


@pytest.mark.parametrize("name", ["x.large", "my box", "it's"])  # a name the shell needs quoted, too
@pytest.mark.parametrize("reason", [
    "1 x NAME: no GPU link (the catalog names none)",
    "1 x NAME: no network bandwidth in the catalog; no GPU link",
])  # fmt: skip
def test_a_reasons_commands_are_said_as_the_pages_controls(reason: str, name: str) -> None:
    """The Recommend page listed `stash instances set ...` and `stash profile ...` with their backticks."""
    from stash_core.decide.predict.collectives import NO_GPU_LINK, NO_NETWORK
    from stash_core.decide.recommend.advice import unpredicted_advice

    reason = reason.replace("no GPU link", NO_GPU_LINK).replace("no network bandwidth", NO_NETWORK)
    reason = reason.replace("NAME", name)
    said = views.recommend.advice_in_page_words(
        reason + unpredicted_advice(reason, name, 2, 1, "resnet50", 64, (3, 224, 224))
    )
    assert "`" not in said and "stash " not in said, said
    assert "set its interconnect in the Links columns of the instance catalog at the top of the page" in said
    if NO_NETWORK not in reason:  # a profile of the machine is the other way: its label as typed
        assert said.endswith(f"2 workers and Instance label {name})"), said
