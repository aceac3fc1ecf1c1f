"""Compute time of one training step on an accelerator: a roofline per operator class, launch and dispatch
costs, and wave effects, with a few parameters fitted to measured steps (calibration.py).

Per operator: max(FLOPs / (efficiency of its class x matrix peak of the precision x wave utilisation^w), bytes
/ (memory efficiency of its class x bandwidth)) + launch_s per kernel. Matrix products and convolutions run at
the matrix peak of the precision (FP32 cores; TF32 or FP16/BF16 tensor cores under tf32 and amp), attention at
its own share of it; element-wise operators, normalisation (batch, layer and group norm), reductions and the
optimizer step are bandwidth-bound, each with its own efficiency. The element-wise operators' efficiency is
not fitted to step times: it is the kernel model's memory term (kernels.py) fitted on NeuSight's measured
element-wise kernels of seven GPUs, m_max y / (1 + y) with y the kernel's bytes per SM over b_half
(KERNEL_TERMS; fitted, b_half is so small that the share is m_max, 0.86, for any kernel of a training step,
where the step times alone had given 0.85). The kernel model's fixed cost per kernel (28 us in NeuSight's
timing of single kernels) is not taken: in a step, kernels queue behind each other and the step model's
launch and dispatch costs stand for it. "elementwise" is the memory efficiency of the matrix operators'
traffic and of the NCHW conversion kernels. Wave utilisation: a GEMM of T output tiles
on a GPU of S SMs fills T / (ceil(T / S) x S) of it, so a GEMM too small for the GPU runs below the efficiency
of a large one (features.py). Eager PyTorch dispatches every kernel from the host, so a step also takes at
least dispatch_s per kernel: GPU and host time are combined as a soft maximum (a p-norm, p = 6). Mixed
precision halves activation bytes (not a norm's, unless channels last) and adds the weight casts and gradient
unscaling (features.py); amp_memory scales the memory efficiency of its half-precision operators (not every
byte of them halves). An amp or tf32 convolution on NCHW tensors also pays their conversion to NHWC and back
(features.py): nchw_relayout times its tensors' bytes, at the element-wise efficiency (prior 5: the conversion
kernels of single 3x3 and 7x7 convolutions measured on an H200 took 3.6 to 9.7 times that,
docs/measurements/h200-convolutions.txt); a tf32 one takes the faster of that and its time on the FP32 cores,
as cuDNN does (features.py). Memory traffic (of every operator, the conversion and the optimizer)
also moves no faster than sm_gbs per SM: a kernel keeps a limited number of bytes in flight per SM, so by
Little's law a GPU with much bandwidth per SM cannot use all of it (the H200 has the H100's 132 SMs and 1.43
times its bandwidth; 13 of Stash's 15 steps timed on both, the two host-bound ones aside, ran only 1.02 to
1.25 times faster on it: docs/measurements/h100-gpu-steps-2026-11-26-norms.csv against
h200-gpu-steps-2026-11-26.csv). Fitted, not measured per kernel (validation_summary.json's sm_gbs: about
23 GB/s per SM, 27 when first fitted): it binds where a class's efficiency times the GPU's bandwidth per SM
is above it, on the GPUs with the most bandwidth per SM (H100 SXM 25, H100 NVL 30, GH200 30, H200 36, B200 54
GB/s per SM; the A100 80 GB has 19).

Datasheet peaks are counted at the boost clock, which a GPU holds only with power to spare: every compute
peak is scaled by the sustained clock, the base clock (guaranteed at the power limit) plus boost_share of the
way to boost (a 72 W L4 has a base clock of 795 MHz against 2,040 boost; a 700 W H100 SXM 1,590 against
1,980). FP32 work on an SM of more than 64 FP32 lanes keeps only (lanes / 64)^-wide_fp32 of the share a
V100's or A100's does (fp32_issue_share). Both fitted on the published figures: without them the K80 and the
L4, the two parts with the most lanes per SM or the least power per peak FLOP, were predicted 47% too fast
held out, and the scaled path's FP32 pairs between an L4 or an A100 PCIe and a V100 were 20-75% off.
A desktop part (GeForce and RTX workstation cards, features.desktop_part) is not held to its base clock: its
datasheet boost clock is a typical one, which GPU Boost passes with the power and cooling a desktop card has
(a data-centre part's boost clock is its ceiling). Its compute runs at desktop_speed times the peak at its
rated boost, fitted (prior 1: the rated boost): 1.39 on the published figures and the later sources' PyTorch
rows, more than a clock alone reaches (a 3090 would hold 2.4 GHz), so it also carries what else sets the
GeForce and RTX figures apart from the data-centre ones (without it the RTX 3090, 4090 and A6000 were
predicted 13-30% too slow with their source held out, docs/single-gpu-holdout.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.features import Features, features
from stash_core.decide.predict.step_cost import StepCost

# Efficiencies are fractions of a peak; launch_s and dispatch_s seconds; wave_exponent in [0, 1].
PARAMETERS = (
    "matmul_fp32", "matmul_tf32", "matmul_fp16", "attention", "elementwise", "reduction", "optimizer",
    "launch_s", "dispatch_s", "wave_exponent", "amp_memory", "nchw_relayout", "normalisation", "sm_gbs",
    "boost_share", "wide_fp32", "desktop_speed",
)  # fmt: skip
TIMES_AND_FACTORS = ("launch_s", "dispatch_s", "amp_memory", "nchw_relayout", "sm_gbs", "desktop_speed")
FRACTIONS = frozenset(PARAMETERS) - set(TIMES_AND_FACTORS)
# Where the fit starts and what it is pulled towards when the data say little (calibration.py's prior):
# a large GEMM near 70% of peak, a kernel launch of a few microseconds, eager dispatch ~10 us per kernel; a
# norm at a third of the bandwidth its bytes need (measured on an H200, forward and backward: batch norm
# 29-37%, layer norm 24%; docs/measurements/h200-convolutions.txt); memory-bound kernels at up to 30 GB/s per
# SM, about what an H100 has (3,350 GB/s over 132 SMs), so the prior binds only on GPUs with more; a
# sustained clock halfway between base and boost (no measurement says more); an SM with twice V100's FP32
# lanes keeping 2^-0.3 = 81% of the share a V100's does.
PRIOR = {
    "matmul_fp32": 0.7, "matmul_tf32": 0.5, "matmul_fp16": 0.5, "attention": 0.5, "elementwise": 0.7,
    "reduction": 0.5, "optimizer": 0.7, "launch_s": 4e-6, "dispatch_s": 1e-5, "wave_exponent": 0.5,
    "amp_memory": 1.0, "nchw_relayout": 5.0, "normalisation": 0.33, "sm_gbs": 30.0, "boost_share": 0.5,
    "wide_fp32": 0.3, "desktop_speed": 1.0,
}  # fmt: skip
# Not fitted to step times: the element-wise kernels' share of the bandwidth (m_max) and the bytes per SM at
# which they reach half of it (b_half), from the kernel model fitted on NeuSight's measured element-wise
# kernels (kernels.elementwise_terms). Without a fit (no summary), the kernel fit's starting point.
KERNEL_TERMS = {"elementwise_m_max": 0.8, "elementwise_b_half": 2e5}
SOFT_MAX_P = 6.0


@dataclass(frozen=True)
class StepParams:
    """The fitted parameters of the step model (PARAMETERS), and what they were fitted on."""

    values: dict[str, float] = field(default_factory=lambda: dict(PRIOR))
    fitted_on: str = "prior (not fitted)"

    def __getitem__(self, name: str) -> float:
        return float(self.values.get(name, PRIOR.get(name, KERNEL_TERMS.get(name))))


@dataclass(frozen=True)
class ComputeTime:
    step_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    gpu_s: float = 0.0  # device time (operators + launches)
    host_s: float = 0.0  # eager dispatch time of every kernel
    kernels: int = 0


def compute_time(
    cost: StepCost,
    accelerator: Accelerator,
    precision: str,
    params: StepParams,
    optimizer: str | None = None,
    memory_format: str = "nchw",
) -> ComputeTime:
    """Predicted seconds of one step (forward, backward, optimizer) on one accelerator."""
    feats = features(cost, accelerator, precision, optimizer, memory_format)
    per_op = op_seconds(feats, params)
    forward_s = float((per_op * feats.forward).sum())
    backward_s = float(per_op.sum()) - forward_s
    optimizer_s = optimizer_seconds(feats, params)
    gpu_s = forward_s + backward_s + optimizer_s
    host_s = params["dispatch_s"] * feats.total_kernels
    step_s = soft_max(gpu_s, host_s)
    return ComputeTime(step_s, forward_s, backward_s, optimizer_s, gpu_s, host_s, int(feats.total_kernels))


def op_seconds(feats: Features, params: StepParams) -> np.ndarray:
    """Seconds of each (deduplicated) operator row, times its count."""
    matmul = np.array([params["matmul_fp32"], params["matmul_tf32"], params["matmul_fp16"]])[feats.peak_kind]
    compute_eff = np.where(feats.op_class == 1, matmul * params["attention"], matmul)
    memory_eff = np.where(feats.op_class == 3, params["reduction"], params["elementwise"])
    memory_eff = np.where(feats.op_class == 2, elementwise_share(feats, params), memory_eff)
    memory_eff = memory_eff * params["amp_memory"] ** feats.half
    memory_eff = np.where(feats.op_class == 4, params["normalisation"], memory_eff)
    wave = feats.utilisation ** params["wave_exponent"]
    clock = sustained_clock_share(feats.base_clock_share, params, feats.desktop)
    compute_eff = compute_eff * clock
    compute_eff = compute_eff * fp32_issue_share(feats.fp32_lane_ratio, feats.peak_kind, params)
    memory_s = memory_seconds(feats.memory_s, memory_eff, feats.gbs_per_sm, params)
    seconds = np.maximum(feats.compute_s / (compute_eff * wave), memory_s)
    relayout_s = memory_seconds(feats.relayout_s, params["elementwise"], feats.gbs_per_sm, params)
    seconds = seconds + params["nchw_relayout"] * relayout_s
    seconds = np.minimum(seconds, fp32_choice_seconds(feats, params, clock * wave, memory_s))
    return (seconds + params["launch_s"] * feats.kernels) * feats.count


def fp32_choice_seconds(
    feats: Features, params: StepParams, clock_and_wave: np.ndarray, memory_s: np.ndarray
) -> np.ndarray:
    """A tf32 NCHW convolution's time on the FP32 cores, without the conversion (features.py: cuDNN takes
    the faster), at the row's sustained clock and wave utilisation; infinite for every other row."""
    fp32_eff = params["matmul_fp32"] * fp32_issue_share(feats.fp32_lane_ratio, 0, params) * clock_and_wave
    on_fp32_s = np.maximum(feats.fp32_compute_s / fp32_eff, memory_s)
    return np.where(np.asarray(feats.fp32_compute_s) > 0, on_fp32_s, np.inf)


def elementwise_share(feats: Features, params: StepParams) -> np.ndarray:
    """Of the bandwidth, the share an element-wise kernel reaches, by its size (the kernel model's memory
    term, kernels.py): m_max y / (1 + y), y its bytes per SM over b_half; per row of any class (op_seconds
    uses it for the element-wise rows only)."""
    kernels = np.maximum(np.asarray(feats.kernels, dtype=float), 1.0)
    per_sm_bytes = np.asarray(feats.memory_s) * np.asarray(feats.gbs_per_sm) * 1e9 / kernels
    y = per_sm_bytes / params["elementwise_b_half"]
    return params["elementwise_m_max"] * y / (1.0 + y)


def sustained_clock_share(
    base_clock_share: float | np.ndarray, params: StepParams, desktop: float | np.ndarray = 0.0
) -> float | np.ndarray:
    """The share of the boost clock (at which datasheet peaks are counted) a GPU holds under training's
    sustained load: its base clock (guaranteed at the power limit) plus boost_share of the way to boost; a
    desktop part (features.desktop_part) desktop_speed times its rated boost (the module's docstring)."""
    data_centre = base_clock_share + params["boost_share"] * (1.0 - base_clock_share)
    return np.where(np.asarray(desktop) > 0, params["desktop_speed"], data_centre)


def fp32_issue_share(
    fp32_lane_ratio: float | np.ndarray, peak_kind: int | np.ndarray, params: StepParams
) -> float | np.ndarray:
    """Of the FP32 peak, the share an SM with more than 64 FP32 lanes keeps: a scheduler issues one warp
    instruction a clock, so 32 lanes per scheduler (Hopper, Ada, GA10x; Kepler's 192 by dual issue) are busy
    only when every instruction is an FMA, while 16 (V100, A100) leave every other slot for the loads and
    address arithmetic a GEMM also needs. Tensor-core work (peak_kind 1, 2) is not affected."""
    return np.where(
        np.asarray(peak_kind) == 0, np.asarray(fp32_lane_ratio, dtype=float) ** -params["wide_fp32"], 1.0
    )


def memory_seconds(
    at_bandwidth_s: float | np.ndarray,
    efficiency: float | np.ndarray,
    gbs_per_sm: float | np.ndarray,
    params: StepParams,
) -> float | np.ndarray:
    """Seconds of memory traffic that takes at_bandwidth_s at the full memory bandwidth: at its class's
    efficiency, but never faster than sm_gbs per SM (a GPU with much bandwidth per SM cannot keep enough bytes
    in flight to use it)."""
    slowest = np.maximum(1.0 / efficiency, gbs_per_sm / params["sm_gbs"])
    return at_bandwidth_s * slowest


def optimizer_seconds(feats: Features, params: StepParams) -> float:
    memory_s = memory_seconds(feats.optimizer_memory_s, params["optimizer"], feats.gbs_per_sm, params)
    return float(memory_s) + params["launch_s"] * feats.optimizer_kernels


def soft_max(gpu_s: float | np.ndarray, host_s: float | np.ndarray) -> float | np.ndarray:
    return (gpu_s**SOFT_MAX_P + host_s**SOFT_MAX_P) ** (1.0 / SOFT_MAX_P)
