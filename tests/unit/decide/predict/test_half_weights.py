"""A model built in bfloat16 or float16 (`.to(torch.bfloat16)`, as language models are often trained): it
trains as it is, on the 16-bit matrix units, with 2-byte weights, gradients and optimizer state, and no FP32
master copy. predict counted it as FP32 (4 bytes a parameter, FP32 cores): a 400 M-parameter model's step on
an A100 was predicted at 246 ms of compute and 29 ms of interconnect, where amp over the FP32 model is 72 and
21 ms and the model as built less than either."""

from __future__ import annotations

import json
import textwrap

import pytest

from stash_core.catalog.accelerators import find_accelerator
from stash_core.cli.main import main
from stash_core.decide.predict.features import features, run_precision
from stash_core.decide.predict.memory import memory_check
from stash_core.decide.predict.step_cost import step_cost

WIDTH = 1024
PARAMS = 4 * (WIDTH * WIDTH + WIDTH) + 1000 * WIDTH + (WIDTH * 10 + 10)  # four layers, embedding, head


def _model_file(tmp_path, dtype: str, frozen: bool = False) -> str:
    path = tmp_path / f"{dtype}{'_frozen' if frozen else ''}.py"
    path.write_text(textwrap.dedent(f"""
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(1000, {WIDTH})
                self.body = torch.nn.Sequential(*[torch.nn.Linear({WIDTH}, {WIDTH}) for _ in range(4)])
                self.body.requires_grad_({not frozen})
                self.head = torch.nn.Linear({WIDTH}, 10)

            def forward(self, ids):
                return self.head(self.body(self.embed(ids)).mean(1)).float()

        def make():
            return Net().to(torch.{dtype})
    """))  # fmt: skip
    return f"{path}:make"


def test_a_bfloat16_model_counts_two_bytes_a_parameter(tmp_path):
    half = step_cost(_model_file(tmp_path, "bfloat16"), 8, (64,))
    full = step_cost(_model_file(tmp_path, "float32"), 8, (64,))
    assert half.param_count == full.param_count == PARAMS
    assert (half.weight_bytes, half.gradient_bytes, half.element_bytes) == (2 * PARAMS, 2 * PARAMS, 2.0)
    assert (full.weight_bytes, full.gradient_bytes, full.element_bytes) == (4 * PARAMS, 4 * PARAMS, 4.0)
    assert half.half_weights and not full.half_weights
    frozen = step_cost(_model_file(tmp_path, "float16", frozen=True), 8, (64,))
    assert frozen.gradient_bytes == 2 * (PARAMS - 4 * (WIDTH * WIDTH + WIDTH))


def test_its_memory_is_16_bit_throughout(tmp_path):
    half = step_cost(_model_file(tmp_path, "bfloat16"), 8, (64,))
    full = step_cost(_model_file(tmp_path, "float32"), 8, (64,))
    a10g = find_accelerator("A10G")
    half_check = memory_check(half, a10g, "fp32", "adamw")
    assert half_check.weights_gb == pytest.approx(2 * PARAMS / 2**30)
    assert half_check.optimizer_gb == pytest.approx(4 * PARAMS / 2**30)  # AdamW's two moments in bfloat16
    # its activations were counted at 16 bits: amp does not halve them again
    assert memory_check(half, a10g, "amp", "adamw").activations_gb == pytest.approx(half_check.activations_gb)
    assert half_check.needed_gb < 0.55 * memory_check(full, a10g, "fp32", "adamw").needed_gb


def test_it_runs_on_the_16_bit_units_without_autocasts_work(tmp_path):
    half = step_cost(_model_file(tmp_path, "bfloat16"), 8, (64,))
    full = step_cost(_model_file(tmp_path, "float32"), 8, (64,))
    assert run_precision(half, "fp32") == run_precision(half, "tf32") == "amp"
    assert run_precision(full, "fp32") == "fp32"
    a100 = find_accelerator("A100 SXM4 40 GB")
    as_built = features(half, a100, "fp32", "adamw")
    autocast = features(full, a100, "amp", "adamw")
    # the same matrix work on the same units, the same 16-bit activation bytes...
    matrix_s = (as_built.compute_s * as_built.count).sum()
    assert matrix_s == pytest.approx((autocast.compute_s * autocast.count).sum())
    moved_s = (as_built.memory_s * as_built.count).sum()
    assert moved_s == pytest.approx((autocast.memory_s * autocast.count).sum(), rel=1e-3)  # the loss in FP32
    assert set(as_built.peak_kind) == set(autocast.peak_kind) and as_built.half.all()
    # ... but no weight casts, no gradient unscaling and half the optimizer's bytes
    assert as_built.optimizer_memory_s < 0.5 * autocast.optimizer_memory_s
    assert as_built.optimizer_kernels < autocast.optimizer_kernels


def _predicted(tmp_path, capsys, model: str, precision: str) -> dict:
    status = main(["predict", "--model", model, "--batch-size", "8", "--input-shape", "64", "--instances",
                   "p4d.24xlarge", "--precision", precision, "--format", "json",
                   "--db", str(tmp_path / "x.duckdb")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    return json.loads(out)


def test_predict_restates_and_predicts_the_model_as_built(tmp_path, capsys):
    half = _predicted(tmp_path, capsys, _model_file(tmp_path, "bfloat16"), "fp32")
    full = _predicted(tmp_path, capsys, _model_file(tmp_path, "float32"), "fp32")
    autocast = _predicted(tmp_path, capsys, _model_file(tmp_path, "float32"), "amp")
    assert half["job"]["precision"] == "16-bit weights (the model's own)"
    assert full["job"]["precision"] == "fp32"
    # by default too, with no FP32 or TF32 reason beside it
    default = _predicted(tmp_path, capsys, _model_file(tmp_path, "bfloat16"), "pytorch")["job"]
    assert default["precision"] == "16-bit weights (the model's own)" and default["precision_why"] is None
    half_row, full_row, amp_row = (answer["predictions"][0] for answer in (half, full, autocast))
    # 2-byte gradients: half the bytes over NVLink of FP32's (also under amp, whose gradients are FP32)
    assert half_row["interconnect_s"] < 0.75 * amp_row["interconnect_s"]
    assert half_row["compute_s"] < amp_row["compute_s"] < full_row["compute_s"]


def test_its_profile_on_a_cpu_machine_is_its_measured_row(tmp_path, capsys):
    # forced to 16-bit units, the job no longer read as the one the profile ran ("fp32"): the row was gone
    from result_docs import result_doc

    from stash_core.catalog import add_instance
    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    model = _model_file(tmp_path, "bfloat16")
    add_instance(db, name="cpu4", accelerator_count=0, vcpus=4, network_gbps=10, on_demand_usd_per_h=0.2)
    ingest_result(db, result_doc(model, instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 stalls={"compute": 0.30, "interconnect": 0.12},
                                 spec_extra={"input_shape": [64]}))  # fmt: skip
    status = main(["predict", "--model", model, "--batch-size", "8", "--input-shape", "64", "--instances",
                   "cpu4", "--format", "json", "--db", str(db)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    (row,) = json.loads(out)["predictions"]
    assert row["source"] == "measured" and row["compute_s"] == pytest.approx(0.30)


def test_the_optimizers_bytes_are_those_of_the_trained_parameters_type(tmp_path):
    # a bfloat16 head trained on a frozen FP32 body: the optimizer reads and writes 16-bit values (they were
    # scaled by the average over every parameter, the frozen ones too)
    from dataclasses import replace

    half = step_cost(_model_file(tmp_path, "bfloat16"), 8, (64,))
    head = 10 * WIDTH + 10
    frozen = replace(half, parameter_bytes=2 * head + 4 * (PARAMS - head), frozen_count=PARAMS - head,
                     frozen_bytes=4 * (PARAMS - head))  # fmt: skip
    assert frozen.trained_element_bytes == 2.0 and frozen.element_bytes > 3.9
    a100 = find_accelerator("A100 SXM4 40 GB")
    trained_bytes = features(frozen, a100, "fp32", "adamw").optimizer_memory_s * a100.memory_gbs * 1e9
    assert trained_bytes == pytest.approx(head * 28 / 2)  # AdamW's 28 bytes a parameter, at 16 bits


def test_bfloat16_runs_on_the_fp32_cores_of_a_gpu_without_bf16_units(tmp_path, capsys):
    # V100 and T4 have FP16 tensor cores but no BF16 ones: bfloat16 was predicted at their FP16 peak
    bf16 = _predicted(tmp_path, capsys, _model_file(tmp_path, "bfloat16"), "fp32")["predictions"][0]
    assert step_cost(_model_file(tmp_path, "bfloat16"), 8, (64,)).bfloat16
    assert not step_cost(_model_file(tmp_path, "float16"), 8, (64,)).bfloat16
    answers = {}
    for dtype in ("bfloat16", "float16"):
        status = main(["predict", "--model", _model_file(tmp_path, dtype), "--batch-size", "8",
                       "--input-shape", "64", "--instances", "p3.2xlarge", "--format", "json",
                       "--db", str(tmp_path / "x.duckdb")])  # fmt: skip
        out = capsys.readouterr().out
        assert status == 0, out
        answers[dtype] = json.loads(out)["predictions"][0]
    assert answers["bfloat16"]["compute_s"] > 1.5 * answers["float16"]["compute_s"]
    assert any("without BF16 matrix units" in note for note in answers["bfloat16"]["notes"])
    assert not any("BF16" in note for note in answers["float16"]["notes"] + bf16["notes"])  # an A100 has them
