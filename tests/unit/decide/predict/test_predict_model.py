"""The compute model of stash_core.decide.predict: FLOPs, kernels, attention, the step model's regimes."""

import re
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.attention import BACKWARD_FLOPS_RATIO, fused_attention
from stash_core.decide.predict.calibration import Point, fit_params, predicted_s
from stash_core.decide.predict.features import (
    AUTOCAST_FP32_OPS,
    CLASSES,
    PEAK_KINDS,
    alignment_factor,
    features,
    fp32_lane_ratio,
    utilisation,
)
from stash_core.decide.predict.memory import memory_check
from stash_core.decide.predict.op_classes import leading_alignment
from stash_core.decide.predict.roofline import (
    KERNEL_TERMS,
    PRIOR,
    StepParams,
    compute_time,
    fp32_issue_share,
    memory_seconds,
    op_seconds,
    sustained_clock_share,
)
from stash_core.decide.predict.stated_error import fitted_params
from stash_core.decide.predict.step_cost import _OpRecorder, step_cost
from stash_core.errors import UsageError

H100, A100, T4 = (find_accelerator(name) for name in ("H100", "A100", "T4"))


def test_resnet50_forward_flops_match_the_published_figure():
    # ~4.1 G multiply-adds per 224x224 image; torch's counter counts a multiply-add as 2 FLOPs.
    cost = step_cost("resnet50", 1)
    assert cost.forward_flops / 2 == pytest.approx(4.1e9, rel=0.02)
    assert cost.param_count == 25_557_032 and cost.param_tensors == 161
    # Backward costs about twice the forward (gradients of inputs and of weights).
    assert cost.total_flops / cost.forward_flops == pytest.approx(3.0, rel=0.05)
    assert cost.device == "meta"
    # One kernel per operator, two per convolution backward (input and weight gradients): 53 convolutions.
    assert cost.kernel_count == len(cost.ops) + 53


def test_a_batch_between_traced_ones_equals_its_own_trace():
    interpolated, traced = step_cost("resnet18", 24, interpolate=True), step_cost("resnet18", 24)
    assert [op.name for op in interpolated.ops] == [op.name for op in traced.ops]
    assert interpolated.total_flops == pytest.approx(traced.total_flops)
    assert interpolated.total_bytes == pytest.approx(traced.total_bytes)
    assert interpolated.activation_bytes == pytest.approx(traced.activation_bytes)
    assert [op.tiles for op in interpolated.ops] == pytest.approx([op.tiles for op in traced.ops])


def test_flops_scale_with_the_batch_and_vgg16_matches_its_figure():
    assert step_cost("resnet50", 8).forward_flops == pytest.approx(8 * step_cost("resnet50", 1).forward_flops)
    # VGG-16: ~15.5 G multiply-adds per image.
    assert step_cost("vgg16", 1).forward_flops / 2 == pytest.approx(15.5e9, rel=0.03)


def test_unknown_model_and_bad_batch_are_usage_errors():
    with pytest.raises(UsageError, match="unknown model"):
        step_cost("resnet5", 4)
    with pytest.raises(UsageError, match="batch size"):
        step_cost("resnet50", 0)


def test_a_step_pytorch_cannot_train_is_a_usage_error_not_a_traceback(tmp_path):
    """Batch 1 of 32 px leaves ResNet-50's last BatchNorm one value per channel: training refuses it, on the
    meta device and on the CPU alike (it was a 175-line traceback from predict and recommend)."""
    with pytest.raises(UsageError, match=r"resnet50 cannot take a training step at batch 1, input 3,32,32: "
                                         r"ValueError: Expected more than 1 value per channel"):  # fmt: skip
        step_cost("resnet50", 1, (3, 32, 32))
    assert step_cost("resnet50", 2, (3, 32, 32)).forward_flops > 0


BN_AFTER_ITEM = """
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn, self.fc2 = nn.Linear(3 * 8 * 8, 16), nn.BatchNorm1d(16), nn.Linear(16, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        if x.abs().sum().item() < 0:  # data-dependent: needs real tensors, not the meta device
            x = -x
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def make(num_classes=10):
    return M()
"""


def test_a_model_counted_on_the_cpu_whose_batchnorm_needs_two_samples_is_counted_at_batch_2(tmp_path):
    """The CPU count ran at batch 1, where BatchNorm1d refuses to train: batch 64, which PyTorch trains, was
    refused as "cannot take a training step at batch 64"."""
    model = tmp_path / "bn_model.py"
    model.write_text(BN_AFTER_ITEM)
    cost = step_cost(f"{model}:make", 64, (3, 8, 8))
    assert cost.note == "counted on the CPU at batch 2, scaled" and cost.forward_flops > 0
    with pytest.raises(UsageError, match=r"cannot take a training step at batch 1, input 3,8,8"):
        step_cost(f"{model}:make", 1, (3, 8, 8))


def test_scaled_dot_product_attention_is_one_fused_operator_with_its_flops():
    batch, heads, seq, dim = 2, 4, 64, 16
    with torch.device("meta"):
        q, k, v = (torch.empty(batch, heads, seq, dim, requires_grad=True) for _ in range(3))
    recorder = _OpRecorder()
    with fused_attention(recorder.record, recorder.pause), recorder:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        recorder.phase = "backward"
        out.sum().backward()
    attention = [op for op in recorder.ops if op.op_class == "attention"]
    assert [op.phase for op in attention] == ["forward", "backward"]
    forward_flops = 4 * batch * heads * seq * seq * dim / 2  # QK^T and PV, half under the causal mask
    assert attention[0].flops == forward_flops
    assert attention[1].flops == BACKWARD_FLOPS_RATIO * forward_flops
    assert attention[0].bytes == 4 * batch * heads * seq * dim * 4  # q, k, v and the output, fp32
    assert not any(op.name in ("aten.bmm", "aten._softmax", "aten._safe_softmax") for op in recorder.ops)
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"  # restored


def test_grouped_query_attention_counts_the_queries_heads():
    with torch.device("meta"):
        q = torch.empty(1, 8, 32, 16, requires_grad=True)
        k, v = (torch.empty(1, 2, 32, 16, requires_grad=True) for _ in range(2))
    recorder = _OpRecorder()
    with fused_attention(recorder.record, recorder.pause), recorder:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=True)
    assert out.shape == q.shape
    (attention,) = [op for op in recorder.ops if op.op_class == "attention"]
    assert attention.flops == 4 * 8 * 32 * 32 * 16
    assert attention.bytes == (2 * 8 + 2 * 2) * 32 * 16 * 4  # q and the output, k and v of 2 heads


def test_attention_called_by_an_imported_name_is_counted_fused_once():
    """`from torch.nn.functional import scaled_dot_product_attention` holds the function the patch of
    F.scaled_dot_product_attention does not replace: such a model was counted decomposed (S x S scores)."""
    from torch.nn.functional import scaled_dot_product_attention as imported

    with torch.device("meta"):
        q, k, v = (torch.empty(2, 4, 64, 16, requires_grad=True) for _ in range(3))
    counts = {}
    for name, call in (
        ("imported", imported),
        ("patched", lambda *a, **kw: F.scaled_dot_product_attention(*a, **kw)),
    ):
        recorder = _OpRecorder()
        with fused_attention(recorder.record, recorder.pause), recorder:
            out = call(q, k, v, is_causal=True)
            recorder.phase = "backward"
            out.sum().backward()
        counts[name] = [(op.name, op.phase, op.flops) for op in recorder.ops if op.op_class == "attention"]
        assert not any(op.name in ("aten.bmm", "aten._softmax", "aten._safe_softmax") for op in recorder.ops)
    assert counts["imported"] == counts["patched"] and len(counts["imported"]) == 2


def test_bert_counts_its_attention_fused():
    cost = step_cost("bert_tiny", 4)  # two layers: a fused forward and backward each
    assert sum(op.op_class == "attention" for op in cost.ops) == 4
    assert not any(op.name == "aten.bmm" for op in cost.ops)


def test_a_tiny_step_is_overhead_bound_never_microseconds():
    params = StepParams()
    cost = step_cost("resnet18", 16, (3, 32, 32))
    step = compute_time(cost, H100, "fp32", params)
    assert step.step_s >= cost.kernel_count * params["dispatch_s"]
    assert step.step_s >= cost.kernel_count * params["launch_s"]
    assert step.step_s > 1e-3  # milliseconds, as an eager PyTorch step is
    assert step.host_s > 0.5 * step.gpu_s


def test_mixed_precision_is_faster_than_fp32_for_a_gemm_bound_model_on_tensor_cores():
    params = StepParams()
    cost = step_cost("bert_large", 32, (384,))
    fp32, tf32, amp = (
        compute_time(cost, A100, precision, params).step_s for precision in ("fp32", "tf32", "amp")
    )
    assert amp < tf32 < fp32
    assert fp32 / amp > 3  # 19.5 against 312 TFLOPS of matrix peak
    # A GPU without TF32 runs tf32 on its FP32 cores: the same time as fp32.
    v100 = find_accelerator("V100")
    assert compute_time(cost, v100, "tf32", params).step_s == pytest.approx(
        compute_time(cost, v100, "fp32", params).step_s
    )


def test_a_gemm_too_small_to_fill_the_sms_runs_below_full_efficiency():
    assert utilisation(10, 108) == pytest.approx(10 / 108)
    assert utilisation(216, 108) == 1.0 and utilisation(109, 108) == pytest.approx(109 / 216)
    small, large = (
        features(step_cost("resnet50", 1), A100, "amp"),
        features(step_cost("resnet50", 256), A100, "amp"),
    )
    matmul = lambda f: f.op_class == 0  # noqa: E731
    assert small.utilisation[matmul(small)].mean() < 0.5 < large.utilisation[matmul(large)].mean()
    # Seconds per FLOP of the matrix work: higher when the GEMMs cannot fill the GPU.
    params = StepParams({**PRIOR, "launch_s": 1e-12, "elementwise": 1.0})
    per_flop = [
        (op_seconds(f, params)[matmul(f)]).sum() / (f.compute_s[matmul(f)] * f.count[matmul(f)]).sum()
        for f in (small, large)
    ]
    assert per_flop[0] > 1.5 * per_flop[1]


def test_calibration_recovers_the_step_times_of_synthetic_measurements():
    # The GPU launch cost is held at its prior (a hardware constant); the efficiencies are not.
    truth = StepParams({**PRIOR, "matmul_fp32": 0.55, "matmul_fp16": 0.35, "elementwise": 0.6})
    # channels-last figures beside NCHW ones tell the convolutions' rate from their NCHW conversion
    probes = [
        Point(model, batch, gpu, precision, 1.0, "synthetic", memory_format=layout)
        for gpu in ("V100", "T4", "A100", "H100")
        for precision in ("fp32", "amp")
        for model, batch in (("resnet18", 32), ("resnet18", 2), ("bert_tiny", 8))
        for layout in ("nchw", "nhwc")
    ]
    points = [replace(p, step_s=predicted_s(p, truth)) for p in probes]
    fitted = fit_params(points, kernel_terms={name: truth[name] for name in KERNEL_TERMS})
    # The weak prior pulls a little towards roofline.PRIOR; the fit still explains every point closely.
    errors = [abs(predicted_s(point, fitted) / point.step_s - 1) for point in points]
    assert max(errors) < 0.06 and sum(errors) / len(errors) < 0.02
    assert fitted["matmul_fp16"] < 0.45  # moved from the prior's 0.5 towards the truth's 0.35


def test_roofline_is_faster_on_a_faster_gpu_and_memory_check_refuses():
    cost = step_cost("resnet18", 32)
    t4 = compute_time(cost, T4, "fp32", StepParams()).step_s
    a100 = compute_time(cost, A100, "fp32", StepParams()).step_s
    assert a100 < t4
    big = step_cost("resnet50", 512)
    check = memory_check(big, T4, "fp32")
    assert not check.fits and "16 GiB" in check.note
    assert memory_check(step_cost("resnet50", 64), T4, "fp32").fits


def test_the_memory_check_holds_a_need_in_gib_against_the_gpus_gib():
    """An H100's 80 GB are 80 GiB (85.9e9 bytes): a step needing 82.8e9 bytes (77.1 GiB) fits, near the limit;
    it was refused as 82.8 "GB" against 80 GB."""
    from stash_core.catalog.accelerators import find_accelerator

    h100 = find_accelerator("NVIDIA H100 SXM 80 GB")
    cost = step_cost("resnet50", 960)
    check = memory_check(cost, h100, "fp32")
    needed_bytes = cost.param_count * 12 + cost.activation_bytes  # weights, gradients, momentum, activations
    assert 80e9 < needed_bytes < 80 * 2**30
    assert check.fits and check.needed_gb == pytest.approx(needed_bytes / 2**30)
    assert check.note == f"needs {needed_bytes / 2**30:.1f} of 80 GiB: near the limit"
    too_big = memory_check(step_cost("resnet50", 1100), h100, "fp32")
    assert not too_big.fits and "GiB (weights" in too_big.note and "has 80 GiB" in too_big.note
    # the largest batch that fits, from activations that grow with the batch ("a smaller batch" said none)
    most = int(re.search(r"a batch of about ([\d,]+) or fewer may fit$", too_big.note)[1].replace(",", ""))
    assert memory_check(step_cost("resnet50", most), h100, "fp32").fits
    assert not memory_check(step_cost("resnet50", int(most * 1.05)), h100, "fp32").fits
    t4 = memory_check(step_cost("resnet50", 300), find_accelerator("NVIDIA T4 16 GB"), "tf32")
    assert "batch 300 in tf32 (FP32 here) needs" in t4.note  # a T4 has no TF32 units
    # one sample too many: no smaller batch to suggest, a shorter input may fit
    one = memory_check(step_cost("resnet50", 1, (3, 8000, 8000)), h100, "fp32")
    assert not one.fits and one.note.endswith("not even one sample fits: a shorter input (--input-shape) may")


def test_the_memory_check_counts_the_optimizers_state():
    cost = step_cost("resnet50", 64)
    sgd, adamw = memory_check(cost, T4, "fp32", "sgd"), memory_check(cost, T4, "fp32", "adamw")
    assert adamw.optimizer_gb == pytest.approx(2 * sgd.optimizer_gb)
    assert adamw.needed_gb - sgd.needed_gb == pytest.approx(cost.param_count * 4 / 2**30)
    assert memory_check(cost, T4, "fp32", "rmsprop").needed_gb == pytest.approx(sgd.needed_gb)
    # a step that fits with SGD's one buffer but not with AdamW's two moments
    budget_gb = (sgd.needed_gb + adamw.needed_gb) / 2
    tight = replace(T4, memory_gb=budget_gb)
    assert memory_check(cost, tight, "fp32", "sgd").fits
    refused = memory_check(cost, tight, "fp32", "adamw")
    assert not refused.fits and "adamw two moments" in refused.note


def test_more_workers_per_instance_than_gpus_is_a_reason_not_a_silent_cap(tmp_path):
    from stash_core.decide.predict import predict_instances

    result = predict_instances(tmp_path / "p.duckdb", "resnet18", 8, instances=["g4dn.xlarge", "p3.8xlarge"],
                               workers_per_instance=4)  # fmt: skip
    assert list(result.frame["instance"]) == ["p3.8xlarge"]
    reason = "g4dn.xlarge: not predicted - it has 1 GPU(s), the job uses 4 per machine"
    assert result.not_predictable == [reason]


def test_a_tensor_core_convolution_in_nchw_pays_its_relayout_and_nhwc_or_fp32_do_not():
    params = StepParams()
    cost = step_cost("resnet18", 32, (3, 64, 64))
    nchw, nhwc = (features(cost, A100, "amp", None, layout) for layout in ("nchw", "nhwc"))
    assert nchw.relayout_s.sum() > 0 and nhwc.relayout_s.sum() == 0
    assert op_seconds(nchw, params).sum() > op_seconds(nhwc, params).sum()
    # TF32 converts too, its FP32 tensors twice amp's bytes (features.py); FP32 does not.
    tf32 = features(cost, A100, "tf32", None, "nchw")
    assert tf32.relayout_s.sum() == pytest.approx(2 * nchw.relayout_s.sum())
    assert features(cost, A100, "tf32", None, "nhwc").relayout_s.sum() == 0
    assert features(cost, A100, "fp32", None, "nchw").relayout_s.sum() == 0
    # A transformer has no convolution: nothing to convert.
    assert features(step_cost("bert_tiny", 4), A100, "amp", None, "nchw").relayout_s.sum() == 0


def test_a_tf32_nchw_convolution_runs_where_it_is_faster_tensor_cores_and_conversion_or_fp32_cores():
    """TF32 is allowed, not required: cuDNN keeps its FP32 kernels among the choices, so tf32 is never
    slower than fp32 (on the A10G its TF32 peak is about its FP32 peak; the L4 has little bandwidth)."""
    params = fitted_params()
    cost = step_cost("resnet50", 64)
    for gpu in ("A10G", "L4", "A100", "H100"):
        accelerator = find_accelerator(gpu)
        fp32, tf32 = (compute_time(cost, accelerator, kind, params).step_s for kind in ("fp32", "tf32"))
        assert tf32 <= fp32 * (1 + 1e-9), gpu
    # only a tf32 convolution that converts has the FP32 choice, at its FLOPs over the FP32 peak
    tf32 = features(cost, A100, "tf32", None, "nchw")
    chosen = tf32.fp32_compute_s > 0
    assert chosen.any() and (tf32.relayout_s[chosen] > 0).all() and (tf32.fp32_compute_s[~chosen] == 0).all()
    ratio = tf32.fp32_compute_s[chosen] / tf32.compute_s[chosen]
    assert ratio == pytest.approx(A100.tf32_tflops / A100.fp32_tflops)
    for other in (features(cost, A100, "tf32", None, "nhwc"), features(cost, A100, "amp", None, "nchw")):
        assert other.fp32_compute_s.sum() == 0
    # where the tensor cores mostly win (an A100's TF32 is eight times its FP32), the choice changes little
    no_choice = replace(tf32, fp32_compute_s=0 * tf32.fp32_compute_s)
    assert op_seconds(tf32, params).sum() == pytest.approx(op_seconds(no_choice, params).sum(), rel=0.03)
    # on an A10G some convolutions run faster on the FP32 cores, and take that time
    a10g = features(cost, find_accelerator("A10G"), "tf32", None, "nchw")
    no_choice = replace(a10g, fp32_compute_s=0 * a10g.fp32_compute_s)
    assert op_seconds(a10g, params).sum() < op_seconds(no_choice, params).sum()


def test_a_1x1_convolution_pays_no_nchw_conversion_and_a_3x3_one_does():
    with torch.device("meta"):
        x = torch.empty(2, 8, 16, 16, requires_grad=True)
        pointwise, spatial = torch.empty(8, 8, 1, 1), torch.empty(8, 8, 3, 3)
    recorder = _OpRecorder()
    with recorder:
        out = F.conv2d(F.conv2d(x, pointwise), spatial, padding=1)
        recorder.phase = "backward"
        out.sum().backward()
    convs = [op for op in recorder.ops if "convolution" in op.name]
    assert [op.pointwise for op in convs] == [True, False, False, True]  # forward 1x1, 3x3; backward 3x3, 1x1
    # a ResNet-50 step converts exactly what its spatial convolutions move
    cost = step_cost("resnet50", 4)
    spatial_only = replace(cost, ops=tuple(op for op in cost.ops if not op.pointwise))

    def converted_s(step) -> float:
        feats = features(step, A100, "amp", None, "nchw")
        return float((feats.relayout_s * feats.count).sum())

    assert converted_s(cost) > 0 and converted_s(cost) == pytest.approx(converted_s(spatial_only))


def test_norms_are_their_own_class_and_keep_their_fp32_bytes_under_amp_unless_channels_last():
    cost = step_cost("resnet18", 32, (3, 64, 64))
    assert {op.op_class for op in cost.ops if "batch_norm" in op.name} == {"normalisation"}
    tokens = step_cost("bert_tiny", 4)
    assert {op.op_class for op in tokens.ops if "layer_norm" in op.name} == {"normalisation"}
    norm = CLASSES.index("normalisation")

    def norm_bytes_s(precision: str, layout: str) -> float:
        feats = features(cost, A100, precision, None, layout)
        return float((feats.memory_s * feats.count)[feats.op_class == norm].sum())

    # measured: batch norm on half NCHW tensors takes about its FP32 time; channels last halves it
    assert norm_bytes_s("amp", "nchw") == pytest.approx(norm_bytes_s("fp32", "nchw"))
    assert norm_bytes_s("amp", "nhwc") == pytest.approx(norm_bytes_s("fp32", "nhwc") / 2)
    # at its own efficiency, not the element-wise one
    feats = features(cost, A100, "fp32", None, "nchw")
    slow = StepParams({**StepParams().values, "normalisation": 0.1})
    assert op_seconds(feats, slow).sum() > op_seconds(feats, StepParams()).sum()


def test_what_autocast_runs_in_float32_keeps_its_fp32_bytes_under_amp():
    cost = step_cost("bert_tiny", 4, attention="decomposed")
    kept = [op for op in cost.ops if op.name in AUTOCAST_FP32_OPS]
    expected = {"aten._log_softmax", "aten.nll_loss_forward", "aten._softmax_backward_data"}
    assert {op.name for op in kept} >= expected
    only_kept = replace(cost, ops=tuple(kept))
    others = replace(cost, ops=tuple(op for op in cost.ops if op.name not in AUTOCAST_FP32_OPS))

    def moved_s(step, precision: str) -> float:
        feats = features(step, A100, precision, None)
        return float((feats.memory_s * feats.count).sum())

    assert moved_s(only_kept, "amp") == pytest.approx(moved_s(only_kept, "fp32"))
    assert moved_s(others, "amp") < moved_s(others, "fp32")


def test_a_figure_timed_without_an_optimizer_step_predicts_no_optimizer_traffic():
    cost = step_cost("resnet18", 32, (3, 64, 64))
    with_step, without = features(cost, A100, "fp32", "sgd"), features(cost, A100, "fp32", "none")
    assert without.optimizer_memory_s == 0 and without.optimizer_kernels == 0
    assert with_step.optimizer_memory_s > 0
    # Under amp the forward still casts every weight; the unscaling belongs to the optimizer step.
    amp_with, amp_without = features(cost, A100, "amp", "sgd"), features(cost, A100, "amp", "none")
    assert 0 < amp_without.optimizer_memory_s < amp_with.optimizer_memory_s


def test_a_per_parameter_optimizer_loop_and_gradient_statistics_count_their_kernels_and_bytes():
    cost = step_cost("resnet18", 32, (3, 64, 64))
    foreach, loop = features(cost, A100, "fp32", "sgd"), features(cost, A100, "fp32", "loop")
    # The same traffic; a kernel per pass per tensor instead of one per pass per chunk.
    assert loop.optimizer_memory_s == foreach.optimizer_memory_s
    assert loop.optimizer_kernels == 4 * cost.param_tensors > foreach.optimizer_kernels
    gns = features(cost, A100, "fp32", "loop", "nchw", "gradient-noise-scale")
    assert gns.optimizer_kernels - loop.optimizer_kernels == 17 * cost.param_tensors
    extra_bytes = (gns.optimizer_memory_s - loop.optimizer_memory_s) * A100.memory_gbs * 1e9
    assert extra_bytes == pytest.approx(92 * cost.param_count)
    assert gns.total_kernels - loop.total_kernels == 17 * cost.param_tensors
    # Gradients filled with zeros (PyTorch 1's zero_grad): a fill and an add per tensor, with or without an
    # optimizer step; extras add up.
    for optimizer in ("none", "loop"):
        plain = features(cost, A100, "fp32", optimizer)
        zeroed = features(cost, A100, "fp32", optimizer, "nchw", "zeroed-gradients")
        assert zeroed.total_kernels - plain.total_kernels == 2 * cost.param_tensors
        zeroed_bytes = (zeroed.optimizer_memory_s - plain.optimizer_memory_s) * A100.memory_gbs * 1e9
        assert zeroed_bytes == pytest.approx(16 * cost.param_count)
    both = features(cost, A100, "fp32", "loop", "nchw", "zeroed-gradients+gradient-noise-scale")
    assert both.total_kernels - loop.total_kernels == (2 + 17) * cost.param_tensors


def test_the_fit_keeps_the_gpu_launch_cost_near_its_prior():
    # Steps that spend tens of microseconds per kernel: a GPU launch does not cost that, so the fit may not
    # explain them by launch_s (the host's dispatch, or the efficiencies, must).
    truth = StepParams({**PRIOR, "launch_s": 3.5e-5})
    probes = [Point("resnet18", batch, "NVIDIA A100 SXM4 40 GB", "fp32", 1.0, "s") for batch in (1, 2, 4, 64)]
    points = [replace(point, step_s=predicted_s(point, truth)) for point in probes]
    assert fit_params(points)["launch_s"] == pytest.approx(PRIOR["launch_s"], rel=0.25)
    # The shipped fit: per-kernel time beyond the launch is host dispatch, well above its prior.
    shipped = fitted_params()
    assert shipped["launch_s"] == pytest.approx(PRIOR["launch_s"], rel=0.25)
    assert shipped["dispatch_s"] > 2 * PRIOR["dispatch_s"]


def test_attention_written_out_is_counted_as_its_matrix_products_and_softmax():
    fused = step_cost("bert_tiny", 4, (128,), attention="fused")
    decomposed = step_cost("bert_tiny", 4, (128,), attention="decomposed")
    assert any(op.op_class == "attention" for op in fused.ops)
    assert not any(op.op_class == "attention" for op in decomposed.ops)
    assert sum(op.name == "aten.bmm" for op in decomposed.ops) > 0
    assert any("softmax" in op.name for op in decomposed.ops if op.name != "aten._log_softmax")
    # The S x S scores exist only when attention is written out: more bytes move.
    assert decomposed.total_bytes > fused.total_bytes
    with pytest.raises(UsageError, match="attention"):
        step_cost("bert_tiny", 4, (128,), attention="flash")


def test_a_matrix_product_knows_how_its_leading_dimensions_are_aligned():
    with torch.device("meta"):
        x, odd, even = torch.empty(8, 768), torch.empty(50257, 768), torch.empty(50304, 768)
        grad = torch.empty(8, 50258)
    assert leading_alignment("aten.mm", (x, odd.t()), torch.empty(8, 50257, device="meta")) == 1
    assert leading_alignment("aten.mm", (x, even.t()), torch.empty(8, 50304, device="meta")) == 16
    # A transposed view's leading dimension is its other stride: the gradient's 50,258 columns.
    assert leading_alignment("aten.mm", (grad.t(), x), torch.empty(50258, 768, device="meta")) == 2
    assert leading_alignment("aten.add", (x, x), x) == 0


def test_a_misaligned_tensor_core_product_runs_at_its_measured_share():
    assert alignment_factor(1, 2) == 0.17 and alignment_factor(2, 2) == alignment_factor(4, 2) == 0.35
    assert alignment_factor(8, 2) == 1.0  # 16 bytes of FP16
    assert alignment_factor(1, 1) == 0.43 and alignment_factor(4, 1) == 1.0  # TF32: 4-byte elements
    assert alignment_factor(1, 0) == 1.0 and alignment_factor(0, 2) == 1.0  # FP32 cores; not a product
    # GPT-2's vocabulary (50,257) makes its output layer's three products misaligned: under amp, slower.
    cost = step_cost("gpt2_tiny", 2, (64,))
    assert sorted(op.alignment for op in cost.ops if op.alignment)[:3] == [1.0, 1.0, 1.0]
    ops = tuple(replace(op, alignment=16.0 if op.alignment else 0.0) for op in cost.ops)
    aligned = replace(cost, ops=ops, model="gpt2_tiny (aligned)")  # another name: features() caches by it
    params = StepParams()
    slow, fast = (op_seconds(features(c, A100, "amp"), params).sum() for c in (cost, aligned))
    assert slow > fast


def test_fused_attention_in_tf32_runs_on_the_fp32_units_and_the_rest_on_tf32():
    cost = step_cost("bert_tiny", 4)
    tf32, fp32 = features(cost, A100, "tf32"), features(cost, A100, "fp32")
    attention = tf32.op_class == CLASSES.index("attention")
    assert attention.any() and (~attention & (tf32.compute_s > 0)).any()
    assert set(tf32.peak_kind[attention]) == {PEAK_KINDS.index("fp32")}
    assert set(tf32.peak_kind[~attention]) == {PEAK_KINDS.index("tf32")}
    # the same seconds at the FP32 peak as in an fp32 step
    fp32_attention = fp32.compute_s[fp32.op_class == CLASSES.index("attention")]
    assert sorted(tf32.compute_s[attention]) == pytest.approx(sorted(fp32_attention))


def test_memory_bound_work_runs_no_faster_than_its_share_per_sm():
    h200, b200, v100 = (find_accelerator(name) for name in ("H200", "B200", "V100"))
    cost = step_cost("resnet18", 32, (3, 64, 64))
    params = StepParams({**StepParams().values, "sm_gbs": 25.0})
    elementwise = CLASSES.index("elementwise")

    def elementwise_s(accelerator) -> tuple[float, float]:
        """Seconds of the element-wise rows as the model times them, and the bytes they move."""
        feats = features(cost, accelerator, "fp32", None)
        rows = feats.op_class == elementwise
        seconds = memory_seconds(feats.memory_s, 0.8, feats.gbs_per_sm, params) * feats.count
        moved_bytes = feats.memory_s * feats.count * accelerator.memory_gbs * 1e9
        return float(seconds[rows].sum()), float(moved_bytes[rows].sum())

    # a V100 (11 GB/s of bandwidth per SM) runs at its class's efficiency of its bandwidth ...
    seconds, moved_bytes = elementwise_s(v100)
    assert seconds == pytest.approx(moved_bytes / (0.8 * v100.memory_gbs * 1e9))
    # ... an H200 and a B200 (36 and 54 GB/s per SM) at 25 GB/s per SM, whatever their bandwidth
    for accelerator in (h200, b200):
        seconds, moved_bytes = elementwise_s(accelerator)
        assert seconds == pytest.approx(moved_bytes / (25.0 * accelerator.sm_count * 1e9))
    # and so it reaches the step: the same step on the H200 gets slower as the per-SM rate falls
    feats = features(cost, h200, "amp", None)
    slower = StepParams({**params.values, "sm_gbs": 12.0})
    assert op_seconds(feats, slower).sum() > op_seconds(feats, params).sum()


def test_compute_counts_at_the_sustained_clock_and_wide_sms_keep_less_of_their_fp32_peak():
    l4, v100 = find_accelerator("L4"), find_accelerator("V100")
    params = StepParams()
    # between base (share 0) and boost (share 1): a 72 W L4 at 795 of 2,040 MHz
    assert sustained_clock_share(l4.base_clock_share, params) == pytest.approx(
        795 / 2040 + PRIOR["boost_share"] * (1 - 795 / 2040)
    )
    at_boost = StepParams({**params.values, "boost_share": 1.0 - 1e-9})
    assert sustained_clock_share(l4.base_clock_share, at_boost) == pytest.approx(1.0)
    # FP32 work on 128 lanes per SM keeps 2^-wide_fp32; a V100's 64 lanes and tensor-core work keep all
    assert fp32_issue_share(fp32_lane_ratio(l4), 0, params) == pytest.approx(
        2.0 ** -PRIOR["wide_fp32"], rel=0.01
    )
    assert fp32_issue_share(fp32_lane_ratio(v100), 0, params) == pytest.approx(1.0, rel=0.01)
    assert fp32_issue_share(fp32_lane_ratio(l4), 1, params) == 1.0
    # and so it reaches the step: a compute-bound FP32 step on the L4 slows as either factor falls
    feats = features(step_cost("bert_base", 32, (128,)), l4, "fp32", None)
    slower_clock = StepParams({**params.values, "boost_share": 0.1})
    narrower = StepParams({**params.values, "wide_fp32": 0.8})
    base_s = op_seconds(feats, params).sum()
    assert op_seconds(feats, slower_clock).sum() > base_s and op_seconds(feats, narrower).sum() > base_s


def test_a_desktop_part_runs_at_desktop_speed_of_its_rated_boost_and_a_data_centre_part_does_not():
    from stash_core.decide.predict.features import desktop_part

    rtx3090, a6000, a10, a100 = (find_accelerator(name) for name in ("RTX3090", "A6000", "A10", "A100"))
    assert desktop_part(rtx3090) and desktop_part(a6000) and not desktop_part(a10) and not desktop_part(a100)
    params = StepParams({**StepParams().values, "desktop_speed": 1.1})
    share = rtx3090.base_clock_share
    assert sustained_clock_share(share, params, 1.0) == pytest.approx(1.1)
    assert sustained_clock_share(share, params, 0.0) == pytest.approx(
        share + params["boost_share"] * (1 - share)
    )
    # and so it reaches the step: a faster desktop clock speeds the 3090's matrix work, not the A10's
    cost = step_cost("resnet18", 32)
    for accelerator, faster in ((rtx3090, True), (a10, False)):
        feats = features(cost, accelerator, "amp", None)
        assert feats.desktop == (1.0 if faster else 0.0)
        quicker = op_seconds(feats, params).sum() < op_seconds(feats, StepParams()).sum()
        assert quicker == faster


def test_element_wise_kernels_take_the_kernel_models_share_of_the_bandwidth_not_a_fitted_one():
    from stash_core.decide.predict.roofline import elementwise_share

    cost = step_cost("resnet18", 32)
    feats = features(cost, find_accelerator("A100"), "fp32", None)
    rows = feats.op_class == CLASSES.index("elementwise")
    terms = {"elementwise_m_max": 0.6, "elementwise_b_half": 1e5}
    params = StepParams({**StepParams().values, **terms})
    share = elementwise_share(feats, params)[rows]
    # m_max y / (1 + y), y the bytes each kernel moves per SM over b_half: below m_max, nearer it when larger
    assert (share < 0.6).all() and (share > 0).all()
    per_kernel = (feats.memory_s / feats.kernels)[rows]
    assert share[per_kernel.argmax()] > share[per_kernel.argmin()]
    # the step fit leaves them as given
    points = [
        Point("resnet18", batch, gpu, "fp32", 1.0, "synthetic")
        for gpu in ("V100", "A100") for batch in (2, 32)
    ]  # fmt: skip
    points = [replace(p, step_s=predicted_s(p, params)) for p in points]
    fitted = fit_params(points, kernel_terms=terms)
    assert {name: fitted[name] for name in terms} == terms and set(KERNEL_TERMS) == set(terms)
