"""A job that sets no precision trains as PyTorch leaves it: cuDNN's convolutions and recurrent layers in TF32
on a GPU with TF32 units, cuBLAS's matrix products (a CNN's fully connected layers) in FP32. The step model
runs each operator so, and a profile, which ran the same, still anchors its own GPU at a ratio of one."""

from __future__ import annotations

import pytest
from result_docs import result_doc

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict import predict_instances
from stash_core.decide.predict.features import FP32_UNITS, TF32_UNITS, features
from stash_core.decide.predict.roofline import compute_time
from stash_core.decide.predict.stated_error import fitted_params
from stash_core.decide.predict.step_cost import step_cost
from stash_core.store import ingest_result

A100 = find_accelerator("NVIDIA A100-SXM4-40GB")
V100 = find_accelerator("Tesla V100-SXM2-16GB")
SHAPE = (3, 64, 64)


def _units_of_matrix_rows(precision: str) -> set[int]:
    found = features(step_cost("alexnet", 4, SHAPE), A100, precision)
    return {int(units) for units, kind in zip(found.peak_kind, found.op_class, strict=True) if kind == 0}


def test_pytorchs_arithmetic_runs_the_convolutions_on_tf32_units_and_the_linear_layers_on_fp32():
    assert _units_of_matrix_rows("pytorch") == {FP32_UNITS, TF32_UNITS}
    assert _units_of_matrix_rows("tf32") == {TF32_UNITS}
    assert _units_of_matrix_rows("fp32") == {FP32_UNITS}


def test_an_alexnet_step_in_pytorchs_arithmetic_lies_between_tf32_and_fp32_on_an_a100_only():
    """AlexNet's fully connected layers do 8.5% of its matrix FLOPs: at FP32 they lengthen the step."""
    cost, params = step_cost("alexnet", 64), fitted_params()
    on_a100 = {p: compute_time(cost, A100, p, params).step_s for p in ("tf32", "pytorch", "fp32")}
    assert on_a100["tf32"] * 1.05 < on_a100["pytorch"] < on_a100["fp32"]
    on_v100 = {p: compute_time(cost, V100, p, params).step_s for p in ("tf32", "pytorch", "fp32")}
    assert on_v100["pytorch"] == pytest.approx(on_v100["fp32"]) == pytest.approx(on_v100["tf32"])


def test_a_transformer_in_pytorchs_arithmetic_is_its_fp32_step():
    cost, params = step_cost("bert_tiny", 8), fitted_params()
    pytorch, fp32 = (compute_time(cost, A100, precision, params).step_s for precision in ("pytorch", "fp32"))
    assert pytorch == fp32


def test_the_default_job_is_slower_than_an_all_tf32_one_and_its_profile_still_anchors_its_gpu(tmp_path):
    asked = dict(instances=["a2-highgpu-1g", "a2-ultragpu-1g"], workers_per_instance=1, input_shape=SHAPE)
    db = tmp_path / "r.duckdb"
    default = predict_instances(db, "alexnet", 32, **asked).frame.set_index("instance")
    tf32 = predict_instances(db, "alexnet", 32, precision="tf32", **asked).frame.set_index("instance")
    assert default.loc["a2-highgpu-1g", "compute_s"] > tf32.loc["a2-highgpu-1g", "compute_s"] * 1.05
    doc = result_doc("alexnet", instance="a2-highgpu-1g", workers=1, device="cuda", batch_size=32,
                     spec_extra={"input_shape": list(SHAPE)}, stalls={"compute": 0.04})  # fmt: skip
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "NVIDIA A100-SXM4-40GB"}])
    assert ingest_result(db, doc)
    scaled = predict_instances(db, "alexnet", 32, **asked).frame.set_index("instance")
    assert scaled.loc["a2-highgpu-1g", "path"] == "measured"
    # a2-ultragpu-1g has an A100 SXM4 80 GB: another GPU, scaled by the ratio of two pytorch steps
    assert scaled.loc["a2-ultragpu-1g", "path"] == "scaled"
