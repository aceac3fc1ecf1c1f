"""Does one training step fit the accelerator's memory: parameters, gradients, optimizer state, activations.

FP32 weights and gradients (4 bytes each per parameter), SGD momentum (4 more; Adam would need 8), and the
activations autograd saves for backward at the batch size (halved under mixed precision). The CUDA context
and the allocator's fragmentation come on top and are not modelled, so a verdict near the limit is marked.
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.step_cost import StepCost

GB = 1e9
NEAR_LIMIT = 0.9  # above this share of the memory: fits on paper, but context and fragmentation may not


@dataclass(frozen=True)
class MemoryCheck:
    needed_gb: float
    available_gb: float
    fits: bool
    note: str


def memory_check(cost: StepCost, accelerator: Accelerator, precision: str) -> MemoryCheck:
    state = cost.param_count * (4 + 4 + 4)  # weights, gradients, momentum
    activations = cost.activation_bytes * (0.5 if precision == "amp" else 1.0)
    needed = (state + activations) / GB
    available = accelerator.memory_gb
    if needed > available:
        note = (
            f"batch {cost.batch_size} needs {needed:.1f} GB (weights, gradients, momentum, activations) "
            f"but {accelerator.name} has {available:g} GB"
        )
        return MemoryCheck(needed, available, False, note)
    near = needed > NEAR_LIMIT * available
    note = f"needs {needed:.1f} of {available:g} GB: near the limit" if near else ""
    return MemoryCheck(needed, available, True, note)
