"""Does one training step fit the accelerator's memory: weights, gradients, optimizer state, activations.

FP32 weights and gradients (4 bytes each per parameter; mixed precision keeps FP32 master weights and
gradients too), SGD momentum as Stash's worker trains (4 more; Adam would need 8), and the activations
autograd saves for backward at the batch size (halved under mixed precision). The CUDA context and the
allocator's fragmentation come on top and are not modelled, so a verdict near the limit is marked.
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.step_cost import StepCost

GB = 1e9
NEAR_LIMIT = 0.9  # above this share of the memory: fits on paper, but context and fragmentation may not
WEIGHT_BYTES = GRADIENT_BYTES = MOMENTUM_BYTES = 4  # per parameter, FP32


@dataclass(frozen=True)
class MemoryCheck:
    needed_gb: float
    available_gb: float
    fits: bool
    note: str
    weights_gb: float = 0.0  # each of weights, gradients and momentum (the same FP32 size)
    activations_gb: float = 0.0


def memory_check(cost: StepCost, accelerator: Accelerator, precision: str) -> MemoryCheck:
    """Whether `cost`'s step fits one `accelerator` in `precision`, with the reason when it does not."""
    weights_gb = cost.param_count * WEIGHT_BYTES / GB
    state_gb = cost.param_count * (WEIGHT_BYTES + GRADIENT_BYTES + MOMENTUM_BYTES) / GB
    activations_gb = cost.activation_bytes * (0.5 if precision == "amp" else 1.0) / GB
    needed = state_gb + activations_gb
    available = accelerator.memory_gb
    if needed > available:
        parts = (
            f"weights {weights_gb:.1f} + gradients {weights_gb:.1f} + momentum {weights_gb:.1f} "
            f"+ activations {activations_gb:.1f}"
        )
        if state_gb > available:
            why = "the model alone does not fit, whatever the batch"
        else:
            why = f"a smaller batch than {cost.batch_size} may fit"
        note = (
            f"batch {cost.batch_size} in {precision} needs {needed:.1f} GB ({parts}) but {accelerator.name} "
            f"has {available:g} GB: {why}"
        )
        return MemoryCheck(needed, available, False, note, weights_gb, activations_gb)
    near = needed > NEAR_LIMIT * available
    note = f"needs {needed:.1f} of {available:g} GB: near the limit" if near else ""
    return MemoryCheck(needed, available, True, note, weights_gb, activations_gb)
