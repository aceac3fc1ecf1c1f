"""Fit the roofline's efficiency factors to measured step times (published figures, stored GPU profiles).

A point is one measured step: a model at a batch size (and input shape, e.g. BERT's sequence length) on an
accelerator in a precision, and its seconds.
The fit minimises the squared log ratio of predicted to measured times over a grid of efficiencies (2% to
100%, 80 steps, geometric): for each memory efficiency, the best matrix efficiency per precision and the best
pooled one (used for a precision the points do not cover); then the memory efficiency with the least total.
Vectorised over the grid with numpy, so a fit over a few dozen points takes milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stash_core.catalog.accelerators import Accelerator, find_accelerator
from stash_core.decide.predict.roofline import OPTIMIZER_BYTES_PER_PARAM, Efficiency
from stash_core.decide.predict.step_cost import StepCost, step_cost

GRID = np.geomspace(0.02, 1.0, 80)


@dataclass(frozen=True)
class Point:
    """One measured training step."""

    model: str
    batch_size: int
    accelerator: str
    precision: str
    step_s: float
    source: str
    input_shape: tuple[int, ...] = ()  # one sample; () is the model's default


@dataclass(frozen=True)
class _Arrays:
    """A point's operators as arrays: seconds at 100% of the matrix roof and of the memory roof."""

    matrix_s: np.ndarray
    memory_s: np.ndarray
    optimizer_s: float


def point_arrays(cost: StepCost, accelerator: Accelerator, precision: str) -> _Arrays:
    peak = accelerator.matrix_tflops(precision) * 1e12
    bandwidth = accelerator.memory_gbs * 1e9
    byte_scale = 0.5 if precision == "amp" else 1.0
    matrix_s = np.array([op.flops / peak if op.matrix else 0.0 for op in cost.ops])
    memory_s = np.array([op.bytes * byte_scale / bandwidth for op in cost.ops])
    return _Arrays(matrix_s, memory_s, cost.param_count * OPTIMIZER_BYTES_PER_PARAM / bandwidth)


def predicted_s(arrays: _Arrays, matrix_eff: np.ndarray | float, memory_eff: float) -> np.ndarray:
    """Step seconds for each matrix efficiency given (vectorised over the first argument)."""
    matrix = np.atleast_1d(matrix_eff)[:, None]
    per_op = np.maximum(arrays.matrix_s[None, :] / matrix, arrays.memory_s[None, :] / memory_eff)
    return per_op.sum(axis=1) + arrays.optimizer_s / memory_eff


def arrays_for(point: Point) -> _Arrays:
    accelerator = find_accelerator(point.accelerator)
    if accelerator is None:
        raise ValueError(f"no accelerator table entry for {point.accelerator!r}")
    cost = step_cost(point.model, point.batch_size, point.input_shape)
    return point_arrays(cost, accelerator, point.precision)


def fit_efficiencies(points: list[Point]) -> Efficiency:
    """The efficiencies that best explain the points (ValueError without points)."""
    if not points:
        raise ValueError("no measured steps to calibrate on")
    prepared = [(point, arrays_for(point)) for point in points]
    best: tuple[float, Efficiency] | None = None
    for memory_eff in GRID:
        # Squared log error of every point at every matrix efficiency of the grid: [points, grid].
        errors = np.array(
            [np.log(predicted_s(arrays, GRID, memory_eff) / point.step_s) ** 2 for point, arrays in prepared]
        )
        precisions = sorted({point.precision for point, _ in prepared})
        matrix, total = {}, 0.0
        for precision in precisions:
            rows = [i for i, (point, _) in enumerate(prepared) if point.precision == precision]
            column = errors[rows].sum(axis=0)
            matrix[precision] = float(GRID[int(column.argmin())])
            total += float(column.min())
        matrix["pooled"] = float(GRID[int(errors.sum(axis=0).argmin())])
        if best is None or total < best[0]:
            best = (total, Efficiency(matrix, float(memory_eff)))
    return best[1]
