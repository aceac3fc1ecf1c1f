"""Does one training step fit the accelerator's memory: weights, gradients, optimizer state, activations.

FP32 weights and gradients (4 bytes each per parameter; mixed precision keeps FP32 master weights and
gradients too), the optimizer's state (SGD's momentum 4 bytes a parameter, RMSprop's mean square 4, AdamW's
two moments 8), and the activations autograd saves for backward at the batch size (halved under mixed
precision). A model built in bfloat16 or float16 holds all of these in 16 bits (2 bytes where FP32 has 4;
its activations were counted at 16 bits). The CUDA context and the
allocator's fragmentation come on top and are not modelled, so a verdict near the limit is marked.
Every figure is in GiB, as the capacity is: the vendors' GB of GPU memory are binary (an H100's 80 GB are
80 GiB, catalog/accelerators.py), so a need counted in decimal GB was held against a capacity 7% larger.
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.step_cost import StepCost

GIB = 2**30  # bytes: the unit of every figure here and of the accelerators' memory_gb
NEAR_LIMIT = 0.9  # above this share of the memory: fits on paper, but context and fragmentation may not
WEIGHT_BYTES = 4  # per parameter, FP32
# The optimizer's FP32 state per parameter: PyTorch's SGD with momentum keeps one buffer, RMSprop (without
# momentum) its mean square, AdamW its two moments.
STATE_BYTES = {"sgd": 4, "rmsprop": 4, "adamw": 8}
STATE_NAMES = {"sgd": "momentum", "rmsprop": "mean square", "adamw": "two moments"}


@dataclass(frozen=True)
class MemoryCheck:
    needed_gb: float
    available_gb: float
    fits: bool
    note: str
    weights_gb: float = 0.0  # the weights in their type (gradients: those of the trained ones only)
    activations_gb: float = 0.0
    optimizer_gb: float = 0.0  # the optimizer's state


def memory_check(
    cost: StepCost, accelerator: Accelerator, precision: str, optimizer: str = "sgd"
) -> MemoryCheck:
    """Whether `cost`'s step fits one `accelerator` in `precision` trained with `optimizer` (sgd, adamw,
    rmsprop), with the reason when it does not."""
    if optimizer not in STATE_BYTES:
        raise ValueError(f"no optimizer state known for {optimizer!r}")
    weights_gb = cost.weight_bytes / GIB
    gradients_gb = cost.trained_bytes / GIB  # a frozen parameter has no gradient, no state
    # PyTorch's optimizers keep their state in the parameter's type
    optimizer_gb = cost.trained_bytes * STATE_BYTES[optimizer] / WEIGHT_BYTES / GIB  # 2 or 4 bytes a value
    state_gb = weights_gb + gradients_gb + optimizer_gb
    autocast = precision == "amp" and not cost.half_weights  # halves FP32 activations counted at 4 bytes
    activations_gb = cost.activation_bytes * (0.5 if autocast else 1.0) / GIB
    needed = state_gb + activations_gb
    available = accelerator.memory_gb
    if needed > available:
        parts = (
            f"weights {weights_gb:.1f} + gradients {gradients_gb:.1f} + {optimizer} {STATE_NAMES[optimizer]} "
            f"{optimizer_gb:.1f} + activations {activations_gb:.1f}"
        )
        if state_gb > available:
            why = "the model alone does not fit, whatever the batch"
        elif cost.batch_size > 1:  # activations grow with the batch (the step is traced at two batches)
            most = int((available - state_gb) / (activations_gb / cost.batch_size))
            why = (f"a batch of about {most:,} or fewer may fit" if most >= 1
                   else "not even one sample fits: a shorter input (--input-shape) may")  # fmt: skip
        else:  # one sample's activations are too many: only a shorter input (or less per sample) fits
            why = "not even one sample fits: a shorter input (--input-shape) may"
        # a GPU without TF32 units runs a tf32 job in FP32: said, not left to read as a TF32 GPU
        fp32_here = precision == "tf32" and not accelerator.tf32_tflops
        shown = f"{precision} (FP32 here)" if fp32_here else precision
        note = (
            f"batch {cost.batch_size} in {shown} needs {needed:.1f} GiB ({parts}) but {accelerator.name} "
            f"has {available:g} GiB: {why}"
        )
        return MemoryCheck(needed, available, False, note, weights_gb, activations_gb, optimizer_gb)
    near = needed > NEAR_LIMIT * available
    note = f"needs {needed:.1f} of {available:g} GiB: near the limit" if near else ""
    return MemoryCheck(needed, available, True, note, weights_gb, activations_gb, optimizer_gb)
