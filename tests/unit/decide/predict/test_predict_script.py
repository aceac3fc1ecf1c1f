"""Predictions for a profiled user script from a stored run: compute scaled by gpu_ratio.py."""

import re

import pandas as pd
import pytest
from result_docs import result_doc
from support import REPO

from stash_core import store
from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.instances import predict_script_run
from stash_core.decide.predict.stated_error import fitted_script_share, stated_error
from stash_core.errors import UsageError


def _script_doc(*, device="cuda", gpu="Tesla V100-SXM2-16GB", grad_bytes=None, instance="p3.2xlarge", **kw):
    """A run of `stash profile --script train.py` as stored: model 'script:train', kind 'script'."""
    doc = result_doc("script:train", device=device, instance=instance, **kw)
    doc["model"] = {"name": "script:train", "kind": "script", "param_count": None, "grad_tensor_count": None,
                    "layer_count": None, "grad_bytes": grad_bytes, "script": "/work/train.py"}  # fmt: skip
    doc["spec"].update(model="script:train", script="/work/train.py", script_args=["--lr", "0.1"],
                       input_shape=None)  # fmt: skip
    if device == "cuda":
        doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": gpu}], gpu_status="ok")
    return doc


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "stash.duckdb"
    docs = {
        "gpu": _script_doc(run_id="script-gpu", workers=1, stalls={"compute": 0.3, "cpu": 0.05}),
        "grads": _script_doc(run_id="script-grads", workers=1, stalls={"compute": 0.3}, grad_bytes=4 * 10**8),
        "cpu": _script_doc(run_id="script-cpu", device="cpu", instance="box"),
        "model": result_doc("resnet18", run_id="model-run", device="cpu"),
    }  # fmt: skip
    for doc in docs.values():
        store.ingest_result(path, doc)
    return path


def _ratio(base, target, peak: str) -> float:
    """The matrix-peak and bandwidth ratios blended by the share fitted on the published figures."""
    share = fitted_script_share()
    peaks = getattr(base, peak) / getattr(target, peak)
    return peaks**share * (base.memory_gbs / target.memory_gbs) ** (1 - share)


def test_compute_scales_by_the_blend_of_peaks_and_bandwidths_and_names_its_path(db):
    result = predict_script_run(db, "script-gpu", instances=["g5.xlarge", "p3.2xlarge", "p2.xlarge"])
    rows = result.frame.set_index("instance")
    a10g, v100 = find_accelerator("A10G"), find_accelerator("V100")
    assert 0.0 < fitted_script_share() < 1.0  # both ratios count (a fit, validation_summary.json)
    assert rows.loc["g5.xlarge", "compute_s"] == pytest.approx(0.3 * _ratio(v100, a10g, "fp32_tflops"))
    assert rows.loc["g5.xlarge", "path"] == "GPU ratio" and "script-gpu" in rows.loc["g5.xlarge", "basis"]
    stated = stated_error("script", 32, a10g.name)
    assert rows.loc["g5.xlarge", "expected_error"] == pytest.approx(stated.error)
    # The instance it ran on, with its worker count, is the measurement itself.
    assert rows.loc["p3.2xlarge", "path"] == "measured" and rows.loc["p3.2xlarge", "compute_s"] == 0.3
    # ...with its profile's 95% interval (result_doc stores 1% of the iteration); a prediction has none
    measured = rows.loc["p3.2xlarge"]
    assert measured["iteration_ci95_s"] == pytest.approx(0.01 * measured["iteration_s"])
    assert pd.isna(rows.loc["g5.xlarge", "iteration_ci95_s"])
    assert rows["note"].str.contains("memory not checked").all()
    assert "ran on a 16 GB GPU, this one has 12 GB" in rows.loc["p2.xlarge", "note"]  # K80 beside the V100
    assert result.request["script_run"] == "script-gpu" and result.request["batch_size"] == 32
    # Mixed precision scales by the tensor-core peaks instead.
    amp = predict_script_run(db, "script-gpu", instances=["g5.xlarge"], precision="amp").frame.iloc[0]
    assert amp["compute_s"] == pytest.approx(0.3 * _ratio(v100, a10g, "fp16_tflops"))


def test_communication_needs_the_stored_gradient_size(db):
    without = predict_script_run(db, "script-gpu", instances=["p3.8xlarge"])
    assert without.frame.empty
    assert "stored no gradient size" in without.not_predictable[0]
    with_grads = predict_script_run(db, "script-grads", instances=["p3.8xlarge"], max_instances=2)
    rows = with_grads.frame.sort_values("instance_count")
    assert list(rows["instance_count"]) == [1, 2]
    assert rows.iloc[0]["interconnect_s"] > 0 and rows.iloc[1]["network_s"] > 0


def test_runs_that_cannot_be_scaled_are_refused_with_the_reason(db):
    with pytest.raises(UsageError, match="ran on the CPU"):
        predict_script_run(db, "script-cpu")
    with pytest.raises(UsageError, match="profiled the model resnet18, not a script"):
        predict_script_run(db, "model-run")
    with pytest.raises(UsageError, match="no run"):
        predict_script_run(db, "no-such-run")


def test_a_database_that_does_not_exist_is_said_as_such_not_as_a_missing_run(tmp_path):
    missing = tmp_path / "typo.duckdb"
    with pytest.raises(UsageError, match=r"no database .*typo\.duckdb \(check --db or \$STASH_DB\)"):
        predict_script_run(missing, "some-run")
    assert not missing.exists()  # nothing written by asking


def test_a_gpu_not_in_the_table_is_refused(tmp_path):
    path = tmp_path / "stash.duckdb"
    store.ingest_result(path, _script_doc(run_id="odd", gpu="Radeon Instinct MI50", instance="mybox"))
    with pytest.raises(UsageError, match="Radeon Instinct MI50.*no entry in the accelerator table"):
        predict_script_run(path, "odd")


def test_stash_predict_prints_the_scaled_rows_and_their_path(db, capsys):
    from stash_core.cli.main import main

    assert main(["predict", "--script-run", "script-gpu", "--instances", "g5.xlarge", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"script script:train (run script-gpu on {find_accelerator('V100').name})" in out
    assert "1 x g5.xlarge" in out and "GPU ratio" in out and "memory not checked" in out


def test_a_cpu_machine_is_said_measured_never_predicted_not_to_lack_a_profile(db):
    """A script's prediction does not read CPU profiles, so it cannot say none exists ("no profile of this job
    on it") as it did."""
    from stash_core.catalog import add_instance

    add_instance(db, name="cpu-box", accelerator_count=0, vcpus=8, network_gbps=10, on_demand_usd_per_h=0.3)
    result = predict_script_run(db, "script-gpu", instances=["g5.xlarge", "cpu-box"])
    assert result.not_predictable == ["cpu-box: not predicted - a CPU machine is measured, never predicted"]


def test_a_model_run_is_answered_by_the_predict_command_that_takes_it(tmp_path, capsys):
    """ResNet-18 profiled on an H200 (docs/measurements) ran PyTorch's default TF32 convolutions: the command
    suggested asks tf32, whose predictions scale from that very run (fp32 would set it aside)."""
    from stash_core.cli.main import main

    path = tmp_path / "stash.duckdb"
    [(_, run_id, _)] = store.ingest_files(
        path, [REPO / "docs/measurements/h200-resnet18-profile-2026-11-30.json"]
    )
    with pytest.raises(UsageError) as refused:
        predict_script_run(path, run_id)
    command = "stash predict --model resnet18 --batch-size 64 --precision tf32"
    assert str(refused.value).endswith(f"not a script: use `{command}`")
    assert main([*command.split()[1:], "--instances", "p5en.48xlarge", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert " scaled " in out and "set aside" not in out  # from its only profile, that run


def test_a_model_runs_input_shape_is_in_the_command_and_a_gpu_without_tf32_asks_no_precision(tmp_path):
    path = tmp_path / "stash.duckdb"
    doc = result_doc("resnet18", run_id="v100-run", device="cuda", instance="p3.2xlarge")
    doc["spec"]["input_shape"] = [3, 128, 128]
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "Tesla V100-SXM2-16GB"}])
    store.ingest_result(path, doc)
    with pytest.raises(UsageError) as refused:
        predict_script_run(path, "v100-run")
    assert str(refused.value).endswith(
        "use `stash predict --model resnet18 --batch-size 32 --input-shape 3,128,128`"
    )


def test_a_profiled_scripts_runs_asked_for_as_a_model_are_refused_in_one_line(tmp_path):
    from stash_core.decide.predict import predict_instances
    from stash_core.decide.recommend import recommend

    said = "script:train_ddp.py is a profiled script, not a model: predict it from its run with `stash"
    with pytest.raises(UsageError, match="^" + re.escape(said)):
        predict_instances(tmp_path / "r.duckdb", "script:train_ddp.py", 8)
    with pytest.raises(UsageError, match="^" + re.escape(said)):
        recommend(tmp_path / "r.duckdb", "script:train_ddp.py", 8, 1, 100, budget_hours=1)


def test_several_gpus_state_their_communication_error_and_the_run_itself_is_measured(db):
    """Several-GPU rows had no ±comm (their notes named one); the run's own configuration said "predicted"."""
    from stash_core.decide.predict.comm_fit import comm_stated_error

    found = predict_script_run(db, "script-grads", instances=["p3.8xlarge", "p3.2xlarge"], max_instances=2)
    rows = found.frame.set_index(["instance", "instance_count"])
    one_machine = comm_stated_error(1, "nvlink2_cubemesh")[0]
    assert rows.loc[("p3.8xlarge", 1), "comm_error"] == pytest.approx(one_machine)
    assert rows.loc[("p3.8xlarge", 2), "comm_error"] == pytest.approx(comm_stated_error(2, None)[0])
    assert rows.loc[("p3.2xlarge", 1), "source"] == "measured"
    assert rows.loc[("p3.2xlarge", 2), "source"] == "predicted"


@pytest.mark.parametrize(
    ("option", "value"),
    [("memory_format", "channels_last"), ("optimizer", "adamw"), ("optimizer_impl", "fused"),
     ("attention", "eager"), ("memory_format", "bogus")],
)  # fmt: skip
def test_a_script_runs_prediction_refuses_the_options_of_a_model_job(db, option, value):
    """They were taken and ignored (a fused RMSprop, a bogus layout). Said in the function's own words."""
    from stash_core import predict

    with pytest.raises(UsageError, match=f"^{option}: for a model job; a script_run is scaled"):
        predict(script_run="script-gpu", instances="g5.xlarge", db=db, **{option: value})
