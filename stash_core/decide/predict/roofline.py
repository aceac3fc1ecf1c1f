"""Compute time of one training step on an accelerator: a roofline per operator, with efficiency factors.

Each operator takes max(FLOPs / (efficiency x peak), bytes / (memory efficiency x bandwidth)): matrix
operators (convolutions, matrix products, attention) against the matrix peak of the precision (FP32, TF32, or
FP16 tensor cores under mixed precision), every other operator against memory bandwidth. Mixed precision
halves the bytes of activations; the optimizer step (SGD with momentum, as Stash's worker) reads weights,
gradients and momentum and writes weights and momentum in FP32: 5 x 4 bytes per parameter.

The efficiencies are not guessed: fit_efficiencies (calibration.py) fits them to measured step times, one
matrix efficiency per precision (falling back to the pooled one for a precision without measurements) and
one memory efficiency for all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.step_cost import StepCost

OPTIMIZER_BYTES_PER_PARAM = 5 * 4


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak reached: matrix units per precision ("pooled" for any other) and memory."""

    matrix: dict[str, float] = field(default_factory=dict)
    memory: float = 1.0

    def for_precision(self, precision: str) -> float:
        return self.matrix.get(precision, self.matrix.get("pooled", 1.0))


@dataclass(frozen=True)
class ComputeTime:
    step_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float


def compute_time(
    cost: StepCost, accelerator: Accelerator, precision: str, efficiency: Efficiency
) -> ComputeTime:
    """Predicted seconds of one step (forward, backward, optimizer) on one accelerator."""
    matrix_peak = accelerator.matrix_tflops(precision) * 1e12 * efficiency.for_precision(precision)
    bandwidth = accelerator.memory_gbs * 1e9 * efficiency.memory
    byte_scale = 0.5 if precision == "amp" else 1.0
    phases = {"forward": 0.0, "backward": 0.0}
    for op in cost.ops:
        phases[op.phase] += max(
            op.flops / matrix_peak if op.matrix else 0.0, op.bytes * byte_scale / bandwidth
        )
    optimizer_s = cost.param_count * OPTIMIZER_BYTES_PER_PARAM / bandwidth
    total = phases["forward"] + phases["backward"] + optimizer_s
    return ComputeTime(total, phases["forward"], phases["backward"], optimizer_s)
