"""A step's operators as the arrays the step model (roofline.py) evaluates: seconds at 100% of the matrix
peak and of the memory bandwidth, class, wave utilisation, kernels; identical operators merged with a count
(a ResNet's repeated blocks, a transformer's identical layers), so a fit over many steps stays fast.

Precision: FP32 runs matrix operators on the FP32 cores; tf32 on TF32 tensor cores where the GPU has them;
"pytorch", what PyTorch runs when a job sets nothing (torch.backends.cudnn.allow_tf32 on, cuda.matmul's off),
cuDNN's convolutions and recurrent layers as tf32 and the other matrix products (a CNN's fully connected
layers: 8.5% of AlexNet's matrix FLOPs, 1.6% of VGG-11's) as fp32; amp on FP16/BF16 tensor cores, with
activation bytes halved (a norm's only in channels last: measured on an H200, batch norm on half NCHW tensors
takes about its FP32 time, 1.21 against 1.45 ms, and 0.62 against 1.16 ms in NHWC; layer norm, which autocast
runs in FP32, its FP32 time or more; softmax, log-softmax and the loss, which autocast also runs in FP32, keep
their FP32 bytes too), plus what autocast and the gradient scaler add per step: each weight cast to FP16
(read 4, write 2 bytes a parameter, one kernel a weight tensor) and the gradients unscaled and checked (read
and write 4 bytes each). The optimizer reads and writes its state in
FP32: SGD with momentum 20 bytes a parameter (read weight, gradient, momentum; write weight, momentum), AdamW
28 (two moments); torch's foreach implementation launches one kernel per pass per chunk of tensors; a figure
timed without an optimizer step (optimizer "none") has neither, nor the gradient unscaling.

Optimizer "loop": the model's optimizer run parameter by parameter in Python, as PyTorch's optimizers did
before 2.0 (and Hugging Face's AdamW): a kernel per pass per parameter tensor. "KIND:loop" names the
optimizer (sgd, adamw, rmsprop); "KIND:fused" is PyTorch's fused=True: the same bytes, one kernel per chunk
of tensors for every pass.
Step extras are work a source's training loop adds to every step besides forward, backward and the
optimizer, each counted from the source's code, several joined by "+":
- "zeroed-gradients": zero_grad() filling every gradient with zeros, as PyTorch before 2.0 did by default,
  after which backward adds each new gradient into it instead of handing it over: per parameter tensor a
  fill and an add (measured on an H200, docs/measurements/h200-layouts.txt: ResNet-50's step launches 322 =
  2 x 161 more kernels), 16 bytes a parameter (write 4; read 8 and write 4);
- "gradient-noise-scale": AdaptDL's statistics on one replica (adaptdl/torch/gradient_noise_scale.py, the
  difference estimator): per parameter tensor a backward hook (square, float64 sum, indexed add), after
  backward two divisions, three squared norms (square and sum each, and the sum over tensors), an average of
  two gradients (add, divide) and a copy: 17 kernels; about 92 bytes a parameter read and written.

Memory format: PyTorch keeps images in NCHW unless a job asks for channels_last; tensor-core convolutions
(FP16 and TF32) run in NHWC, so cuDNN converts an NCHW convolution's tensors there and back, in kernels of
their own. `relayout_s` is that traffic (the convolution's bytes at the memory bandwidth) for amp and tf32 in
NCHW; NHWC jobs, FP32 convolutions and 1x1 convolutions (which cuDNN runs on NCHW tensors as a matrix product:
no conversion kernel in their time, docs/measurements/h200-convolutions.txt) have none. Measured on an H200
(docs/measurements/h200-layouts.txt): NCHW over NHWC costs ResNet-50 at batch 128 20.5 ms a step in amp, 17.6
ms in tf32 and nothing in fp32 (VGG-16 at 64: 9.4, 10.1 and none). A tf32 conversion is counted at its own
tensors' bytes, twice an amp one's: counted at amp's bytes, as the H200's VGG-16 suggests, the published TF32
figures in NCHW came out too fast with their source held out, six sources of seven
(docs/validation-history.md). TF32 is allowed, not required: cuDNN runs a tf32 NCHW convolution on the FP32
cores where that is faster than the tensor cores plus the conversion (its heuristics and cudnn.benchmark rank
the FP32 kernels too), so such a convolution also carries its FP32 time (`fp32_compute_s`) and takes the
faster of the two (roofline.op_seconds): a GPU whose TF32 peak is about its FP32 peak (the A10G, GeForce
Ampere) or whose bandwidth is small against it (the L4) would otherwise run tf32 slower than fp32. A
prediction for a user's job assumes NCHW, PyTorch's default.

A model built in bfloat16 or float16 (StepCost.half_weights) trains as it is, in whatever precision is asked:
on the 16-bit matrix units, with the 16-bit bytes its operators were counted at, no casts and no gradient
scaler, and its optimizer reading and writing 16-bit weights, gradients and state (run_precision).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.step_cost import StepCost
from stash_core.habits import optimizer_name

CLASSES = ("matmul", "attention", "elementwise", "reduction", "normalisation")
PEAK_KINDS = ("fp32", "tf32", "fp16")
PYTORCH_ARITHMETIC = "pytorch"  # cuDNN's operators in TF32, cuBLAS's in FP32 (the module's docstring)
# RMSprop (no momentum): reads the gradient, reads and writes the weight and the mean square (5 x 4 bytes);
# its foreach passes scale the mean square, add the squared gradient, take the root, add eps, update.
OPTIMIZER_BYTES_PER_PARAM = {"sgd": 5 * 4, "adamw": 7 * 4, "rmsprop": 5 * 4}
OPTIMIZER_PASSES = {"sgd": 3, "adamw": 5, "rmsprop": 5}
FOREACH_CHUNK_TENSORS = 64
# A per-parameter loop: SGD with momentum and weight decay adds the decay, scales and adds the momentum and
# updates the weight (4 kernels); AdamW updates two moments (2 each), the denominator (2), the weight and its
# decay (2).
OPTIMIZER_LOOP_KERNELS_PER_TENSOR = {"sgd": 4, "adamw": 8, "rmsprop": 5}
STEP_EXTRAS = ("zeroed-gradients", "gradient-noise-scale")
ZEROED_KERNELS_PER_TENSOR = 2
ZEROED_BYTES_PER_PARAM = 16
# A tensor-core matrix product whose operands' leading dimensions are not multiples of 16 bytes loads them in
# narrower pieces. Measured on an H200 with PyTorch 2.11's cuBLAS (docs/measurements/h200-gemm-alignment.txt:
# 8192 x 768 x N, forward and both gradients, against N = 50,264): FP16 at 4 or 8 bytes runs at 0.35 of the
# 16-byte rate and at 2 bytes at 0.17; TF32 at 4 or 8 bytes at 0.43. FP32 on the FP32 cores was not measured
# and is left unaffected. Keys: (index into PEAK_KINDS, bytes of alignment).
FP32_UNITS, TF32_UNITS, FP16_UNITS = (PEAK_KINDS.index(kind) for kind in ("fp32", "tf32", "fp16"))
ALIGNMENT_FACTOR = {
    (FP16_UNITS, 2): 0.17, (FP16_UNITS, 4): 0.35, (FP16_UNITS, 8): 0.35,
    (TF32_UNITS, 4): 0.43, (TF32_UNITS, 8): 0.43,
}  # fmt: skip
ELEMENT_BYTES = {TF32_UNITS: 4, FP16_UNITS: 2}
# Autocast runs softmax, log-softmax and the NLL loss in float32 (on its float32 op list), and their backward
# follows the forward's type: under amp they move FP32 bytes (a 50,257-token vocabulary's logits, a softmax
# written out over attention scores).
AUTOCAST_FP32_OPS = frozenset(
    {"aten._softmax", "aten._safe_softmax", "aten._softmax_backward_data", "aten._log_softmax",
     "aten._log_softmax_backward_data", "aten.nll_loss_forward", "aten.nll_loss_backward"}
)  # fmt: skip
GNS_KERNELS_PER_TENSOR = 17
GNS_BYTES_PER_PARAM = 92
AMP_CAST_BYTES_PER_PARAM = 6  # each forward casts the FP32 weight to FP16 (4 read + 2 written)
AMP_UNSCALE_BYTES_PER_PARAM = 8  # the optimizer step unscales and checks each gradient (4 read + 4 written)
NARROW_SM_FP32_LANES = 64
# An accelerator row without an SM count: a mid-size datacenter GPU (V100 and A10G have 80; A100 108).
DEFAULT_SM_COUNT = 80


@dataclass(frozen=True)
class Features:
    compute_s: np.ndarray  # FLOPs / matrix peak (0 for bandwidth-bound classes)
    memory_s: np.ndarray  # bytes / memory bandwidth
    op_class: np.ndarray  # index into CLASSES
    peak_kind: np.ndarray  # index into PEAK_KINDS
    utilisation: np.ndarray  # wave utilisation of the SMs (1 for non-matrix operators)
    kernels: np.ndarray
    count: np.ndarray  # identical operators merged
    forward: np.ndarray  # 1.0 for a forward operator
    half: np.ndarray  # 1.0 where activations are FP16/BF16 (amp)
    relayout_s: np.ndarray  # NCHW <-> NHWC conversion of a tensor-core convolution, at the memory bandwidth
    fp32_compute_s: np.ndarray  # a tf32 convolution's FLOPs / FP32 peak: cuDNN's other choice (0: none)
    optimizer_memory_s: float
    optimizer_kernels: float
    total_kernels: float  # kernels the host dispatches one by one (a library's own launches aside)
    gbs_per_sm: float | np.ndarray  # the GPU's memory bandwidth per SM, GB/s (per row once stacked)
    base_clock_share: float | np.ndarray = 1.0  # base over boost clock (per row once stacked)
    fp32_lane_ratio: float | np.ndarray = 1.0  # FP32 lanes per SM over 64 (per row once stacked)
    desktop: float | np.ndarray = 0.0  # 1.0 on a desktop part (desktop_part; per row once stacked)


def optimizer_kind(optimizer: str, cost: StepCost) -> tuple[str, str]:
    """(kind, implementation) of features' optimizer text: "sgd" (foreach), "adamw:fused", "sgd:loop", or
    "loop" (the model's default optimizer, parameter by parameter)."""
    if optimizer == "loop":
        return default_optimizer(cost), "loop"
    kind, _, impl = optimizer.partition(":")
    return kind, impl or "foreach"


def default_optimizer(cost: StepCost) -> str:
    """What a job of this model trains with, as `stash profile` runs it (zoo.optimizer_name)."""
    return optimizer_name(cost.kind)


def desktop_part(accelerator: Accelerator) -> bool:
    """A GeForce or RTX workstation card: actively cooled, its GPU Boost runs past the boost clock its
    datasheet rates (a typical clock, not the ceiling a data-centre part's boost clock is)."""
    name = accelerator.name.upper()
    return "GEFORCE" in name or " RTX " in f" {name} "


def sm_count(accelerator: Accelerator) -> int:
    count = getattr(accelerator, "sm_count", None)
    return int(count) if count else DEFAULT_SM_COUNT


def run_precision(cost: StepCost, precision: str) -> str:
    """The precision `cost`'s model trains in when asked for `precision`: amp's 16-bit units for a model built
    in 16 bits (its weights are cast by nothing and hold no FP32 copy: see _features)."""
    return "amp" if cost.half_weights else precision


def peak_kind(accelerator: Accelerator, precision: str) -> int:
    """Which matrix units a precision runs on (a GPU without TF32 or fast FP16 runs on its FP32 cores)."""
    if precision == "amp" and (accelerator.fp16_tflops or 0) > 1.5 * accelerator.fp32_tflops:
        return 2
    if precision == "tf32" and accelerator.tf32_tflops:
        return 1
    return 0


def fp32_lane_ratio(accelerator: Accelerator) -> float:
    """FP32 lanes per SM over the 64 that one warp instruction every other clock per scheduler keeps busy
    (V100, A100); at least 1, and 1 where the table cannot tell."""
    lanes = accelerator.fp32_lanes_per_sm
    return max(lanes / NARROW_SM_FP32_LANES, 1.0) if lanes else 1.0


def alignment_factor(alignment_elements: float, kind: int) -> float:
    """The share of its aligned rate a matrix product runs at, from its operands' leading-dimension alignment
    (0: not a cuBLAS product, unaffected)."""
    if not alignment_elements or kind not in ELEMENT_BYTES:
        return 1.0
    aligned_bytes = min(int(alignment_elements) * ELEMENT_BYTES[kind], 16)
    return ALIGNMENT_FACTOR.get((kind, aligned_bytes), 1.0)


def utilisation(tiles: float, sms: int) -> float:
    if tiles <= 0:
        return 1.0
    return tiles / (math.ceil(tiles / sms) * sms)


def features(
    cost: StepCost,
    accelerator: Accelerator,
    precision: str,
    optimizer: str | None = None,
    memory_format: str = "nchw",
    step_extras: str = "",
) -> Features:
    """The arrays of a step on an accelerator, cached by what determines them (a cost is one per model,
    batch and input shape, so predicting many instances builds each GPU's arrays once). optimizer: "sgd",
    "adamw", "none" (no optimizer step timed), "loop" (the model's default, parameter by parameter) or None
    for the model's default; step_extras: STEP_EXTRAS joined by "+" ("" for none)."""
    optimizer = optimizer or default_optimizer(cost)
    precision = run_precision(cost, precision)
    key = (cost.model, cost.batch_size, cost.input_shape, cost.device, len(cost.ops), cost.total_flops,
           cost.total_bytes, cost.weight_bytes, cost.trained_bytes, cost.bfloat16, accelerator, precision,
           optimizer, memory_format, step_extras)  # fmt: skip
    found = _CACHE.get(key)
    if found is None:
        if len(_CACHE) >= 2048:
            _CACHE.clear()
        found = _CACHE[key] = _features(cost, accelerator, precision, optimizer, memory_format, step_extras)
    return found


_CACHE: dict[tuple, Features] = {}


def _features(
    cost: StepCost,
    accelerator: Accelerator,
    precision: str,
    optimizer: str,
    memory_format: str,
    step_extras: str = "",
) -> Features:
    peak = accelerator.matrix_tflops(precision) * 1e12
    fp32_peak = accelerator.fp32_tflops * 1e12
    # a bfloat16 model's products run on BF16 units, which GPUs before Ampere (V100, T4) lack: FP32 cores
    bf16_units = cost.half_weights and cost.bfloat16  # (features() made its precision amp)
    if bf16_units:
        peak = (accelerator.bf16_tflops or accelerator.fp32_tflops) * 1e12
    bandwidth = accelerator.memory_gbs * 1e9
    half = precision == "amp"  # 16-bit activations and matrix units
    amp = half and not cost.half_weights  # autocast over FP32 weights: casts, a scaler, halved FP32 bytes
    byte_scale = 0.5 if amp else 1.0
    state_scale = cost.trained_element_bytes / 4  # the optimizer's and zero_grad's bytes, counted for FP32
    units = peak_kind(accelerator, precision)
    if bf16_units and not accelerator.bf16_tflops:
        units = FP32_UNITS
    # PyTorch's default arithmetic: cuDNN's operators on the TF32 units where the GPU has them, the rest FP32
    cudnn_units, cudnn_peak = (
        (peak_kind(accelerator, "tf32"), accelerator.matrix_tflops("tf32") * 1e12)
        if precision == PYTORCH_ARITHMETIC
        else (units, peak)
    )
    sms = sm_count(accelerator)
    merged: dict[tuple, int] = {}
    for op in cost.ops:
        norm_fp32 = op.op_class == "normalisation" and memory_format != "nhwc"  # see the module's docstring
        keeps_fp32 = norm_fp32 or op.name in AUTOCAST_FP32_OPS
        moved_s = op.bytes * (1.0 if keeps_fp32 else byte_scale) / bandwidth
        op_units, op_peak = (cudnn_units, cudnn_peak) if op.on_cudnn else (units, peak)
        # PyTorch's fused attention computes float32 tensors on the FP32 units, TF32 allowed or not (measured
        # on an H100: the same 24 TFLOP/s either way, docs/measurements/h100-attention.txt)
        if op_units == TF32_UNITS and op.op_class == "attention":
            op_units, op_peak = FP32_UNITS, fp32_peak
        relayout = memory_format != "nhwc" and op_units in (FP16_UNITS, TF32_UNITS)
        converts = relayout and "convolution" in op.name and not op.pointwise
        fp32_choice = converts and op_units == TF32_UNITS and op.matrix
        key = (
            CLASSES.index(op.op_class),
            op.flops / op_peak / alignment_factor(op.alignment, op_units) if op.matrix else 0.0, moved_s,
            utilisation(op.tiles, sms) if op.matrix else 1.0, op.kernels,
            1.0 if op.phase == "forward" else 0.0,
            moved_s if converts else 0.0,
            op_units, op.host_dispatches,
            op.flops / fp32_peak / alignment_factor(op.alignment, FP32_UNITS) if fp32_choice else 0.0,
        )  # fmt: skip
        merged[key] = merged.get(key, 0) + 1
    rows = np.array(list(merged), dtype=float).reshape(-1, 10)
    count = np.array(list(merged.values()), dtype=float)
    chunks = math.ceil(max(cost.trained_tensors, 1) / FOREACH_CHUNK_TENSORS)
    cast_bytes = cost.param_count * AMP_CAST_BYTES_PER_PARAM if amp else 0.0
    cast_kernels = cost.param_tensors if amp else 0
    if optimizer == "none":
        optimizer_bytes, optimizer_kernels = cast_bytes, cast_kernels
    else:
        kind, impl = optimizer_kind(optimizer, cost)
        unscale = AMP_UNSCALE_BYTES_PER_PARAM if amp else 0
        per_param = OPTIMIZER_BYTES_PER_PARAM[kind] * state_scale + unscale
        optimizer_bytes = cast_bytes + cost.trained_count * per_param
        if impl == "loop":
            passes = OPTIMIZER_LOOP_KERNELS_PER_TENSOR[kind] * cost.trained_tensors
        elif impl == "fused":  # one kernel does every pass over a chunk of tensors
            passes = chunks
        else:
            passes = OPTIMIZER_PASSES[kind] * chunks
        optimizer_kernels = passes + cast_kernels + (2 * chunks if amp else 0)
    extras = set(step_extras.split("+")) - {""}
    if "zeroed-gradients" in extras:
        optimizer_bytes += cost.trained_count * ZEROED_BYTES_PER_PARAM * state_scale
        optimizer_kernels += ZEROED_KERNELS_PER_TENSOR * cost.trained_tensors
    if "gradient-noise-scale" in extras:
        optimizer_bytes += cost.trained_count * GNS_BYTES_PER_PARAM
        optimizer_kernels += GNS_KERNELS_PER_TENSOR * cost.trained_tensors
    op_dispatches = float((rows[:, 8] * count).sum())
    return Features(
        compute_s=rows[:, 1], memory_s=rows[:, 2], op_class=rows[:, 0].astype(int),
        peak_kind=rows[:, 7].astype(int), utilisation=rows[:, 3],
        kernels=rows[:, 4], count=count, forward=rows[:, 5], half=np.full(len(rows), 1.0 if half else 0.0),
        relayout_s=rows[:, 6], fp32_compute_s=rows[:, 9], optimizer_memory_s=optimizer_bytes / bandwidth,
        optimizer_kernels=float(optimizer_kernels), total_kernels=op_dispatches + optimizer_kernels,
        gbs_per_sm=accelerator.memory_gbs / sms, base_clock_share=accelerator.base_clock_share,
        fp32_lane_ratio=fp32_lane_ratio(accelerator), desktop=1.0 if desktop_part(accelerator) else 0.0,
    )  # fmt: skip
