"""Fit the step model's parameters (roofline.PARAMETERS) to measured step times (published figures).

A point is one measured step: a model at a batch size (and input shape, e.g. BERT's sequence length) on an
accelerator in a precision, and its seconds, with the source it comes from. The fit is least squares on the
log ratio of predicted to measured step time, every source weighing alike (source_weights), Huber-weighted
beyond 20% so that a figure no model explains pulls less (Levenberg-Marquardt, numeric Jacobian), plus a weak
prior that pulls each parameter towards roofline.PRIOR so that a parameter the training points say nothing
about (TF32 when no TF32 figure is left, the host dispatch cost when every step is large) stays sensible; the
GPU's kernel launch cost, a hardware constant, and the normalisation kernels' measured share of the bandwidth
are held near their priors (PRIOR_WEIGHTS). Efficiencies are fitted as logits (kept in (0, 1)), times as
logarithms. Every point's operators are merged per identical row (features.py), so a fit over a few hundred
figures takes a second or two.

A fit for ratios (`ratios=True`, what the scaled path uses: a profile on one GPU times the ratio of two
predicted steps) also fits the log ratio between every two figures of the same work timed by one software
stack (source and revision) on different GPUs: such a ratio cancels what the stack adds to both, so it
speaks of the GPUs alone. The pairs together weigh as much as the single figures (each pair by the square root
of figures over pairs), so that neither what a step takes nor how it moves between GPUs is given up.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.features import Features, features
from stash_core.decide.predict.roofline import (
    FRACTIONS,
    PARAMETERS,
    PRIOR,
    StepParams,
    memory_seconds,
    op_seconds,
    soft_max,
)  # fmt: skip
from stash_core.decide.predict.step_cost import step_cost

PRIOR_WEIGHT = 0.05  # squared log-ratio units per squared unit of a transformed parameter's distance
# A kernel launch costs the GPU a few microseconds whatever the software above it: launch_s is held near its
# prior, so that time a step spends per kernel beyond that is the host's dispatch (dispatch_s), which eager
# training pays on the CPU and overlaps with the GPU's work, not added to it. The normalisation kernels' share
# of the bandwidth is held near the one measured on an H200 (roofline.PRIOR), which the published step times,
# where it is confounded with the NCHW conversion of the convolutions beside it, cannot separate.
HELD = ("launch_s", "normalisation")
PRIOR_WEIGHTS = {name: (9.0 if name in HELD else PRIOR_WEIGHT) for name in PARAMETERS}
MAX_ITERATIONS = 60
HUBER_DELTA = 0.2  # log ratio: about 20% off


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
    source_id: str = ""  # the independent source (software stack) it comes from
    revision: str = ""
    table: str = ""
    measured: str = ""  # what the figure includes (optimizer step, data loading, host copies)
    memory_format: str = ""  # "nhwc" (channels last) or "nchw" for an image model; "" is PyTorch's nchw
    optimizer: str = ""  # "none" where the timed step has no optimizer step; "" is the model's default
    attention: str = ""  # "decomposed" where the source's model writes attention out; "" is fused (the zoo's)
    step_extras: str = ""  # work the source's loop adds to every step (features.STEP_EXTRAS); "" is none


def arrays_for(point: Point) -> Features:
    """The point's step on its accelerator (ValueError when the accelerator is not in the table)."""
    accelerator = find_accelerator(point.accelerator)
    if accelerator is None:
        raise ValueError(f"no accelerator table entry for {point.accelerator!r}")
    attention = point.attention or "fused"
    cost = step_cost(point.model, point.batch_size, point.input_shape, interpolate=True, attention=attention)
    optimizer = point.optimizer or None
    return features(
        cost, accelerator, point.precision, optimizer, point.memory_format or "nchw", point.step_extras
    )


def predicted_s(point: Point, params: StepParams) -> float:
    return float(_Stack([arrays_for(point)]).step_s(params)[0])


ARRAYS = (
    "compute_s",
    "memory_s",
    "op_class",
    "peak_kind",
    "utilisation",
    "kernels",
    "count",
    "forward",
    "half",
    "relayout_s",
    "fp32_compute_s",
)


class _Stack:
    """Many points' arrays concatenated, evaluated at once."""

    def __init__(self, feats: list[Features]) -> None:
        concat = functools.partial(np.concatenate)
        self.gbs_per_sm = np.array([f.gbs_per_sm for f in feats])
        base_clock_share = np.array([f.base_clock_share for f in feats])
        lane_ratio = np.array([f.fp32_lane_ratio for f in feats])
        desktop = np.array([f.desktop for f in feats])
        self.segment = np.repeat(np.arange(len(feats)), [len(f.count) for f in feats])
        self.rows = Features(
            *(concat([getattr(f, name) for f in feats]) for name in ARRAYS),
            0.0, 0.0, 0.0, self.gbs_per_sm[self.segment], base_clock_share[self.segment],
            lane_ratio[self.segment], desktop[self.segment],
        )  # fmt: skip
        self.optimizer_memory_s = np.array([f.optimizer_memory_s for f in feats])
        self.optimizer_kernels = np.array([f.optimizer_kernels for f in feats])
        self.total_kernels = np.array([f.total_kernels for f in feats])
        self.size = len(feats)

    def step_s(self, params: StepParams) -> np.ndarray:
        ops = np.bincount(self.segment, weights=op_seconds(self.rows, params), minlength=self.size)
        optimizer = (
            memory_seconds(self.optimizer_memory_s, params["optimizer"], self.gbs_per_sm, params)
            + params["launch_s"] * self.optimizer_kernels
        )
        return soft_max(ops + optimizer, params["dispatch_s"] * self.total_kernels)


def _to_params(vector: np.ndarray) -> StepParams:
    values = {}
    for name, value in zip(PARAMETERS, vector, strict=True):
        values[name] = float(1.0 / (1.0 + np.exp(-value))) if name in FRACTIONS else float(np.exp(value))
    return StepParams(values)


def _to_vector(params: dict[str, float]) -> np.ndarray:
    return np.array(
        [np.log(params[n] / (1.0 - params[n])) if n in FRACTIONS else np.log(params[n]) for n in PARAMETERS]
    )


def huber(log_ratio: np.ndarray) -> np.ndarray:
    """Residuals whose squares are the Huber loss: quadratic within HUBER_DELTA, linear beyond, so that a
    figure no model explains (a data-bound run, a source far from the others) pulls the fit less."""
    size = np.abs(log_ratio)
    outer = np.sqrt(np.maximum(2.0 * HUBER_DELTA * size - HUBER_DELTA**2, 0.0))
    return np.where(size <= HUBER_DELTA, log_ratio, np.sign(log_ratio) * outer)


def source_weights(points: list[Point]) -> np.ndarray:
    """Each figure's weight on its residual, so that every source's squared residuals weigh alike (sqrt(N / (S
    n)) for a source of n of N figures from S sources): a stack that published many figures (Lambda's 138,
    timm's 60 over three PyTorch versions) does not set the efficiencies every other stack shares, and a
    prediction is for a stack the fit has not seen."""
    sources = [point.source_id or point.source for point in points]
    counts = Counter(sources)
    return np.sqrt([len(points) / (len(counts) * counts[source]) for source in sources])


def same_work_pairs(points: list[Point]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (first < second) of figures of the same work by one source and revision on two GPUs."""
    groups: dict[tuple, list[int]] = {}
    for index, point in enumerate(points):
        work = (
            point.source_id, point.revision, point.model, point.precision, point.input_shape,
            point.batch_size, point.memory_format, point.optimizer, point.attention, point.step_extras,
        )  # fmt: skip
        groups.setdefault(work, []).append(index)
    pairs = [
        (first, second)
        for members in groups.values()
        for first in members
        for second in members
        if first < second and points[first].accelerator != points[second].accelerator
    ]
    return np.array([p[0] for p in pairs], dtype=int), np.array([p[1] for p in pairs], dtype=int)


def fit_params(
    points: list[Point], ratios: bool = False, kernel_terms: dict[str, float] | None = None
) -> StepParams:
    """The parameters that best explain the points (ValueError without points); with ratios, also the ratios
    between GPUs of the same work timed by one stack (the module's docstring). kernel_terms: the parameters
    taken from the kernel model, not fitted here (roofline.KERNEL_TERMS; None: kernels.elementwise_terms()
    on every GPU's kernels)."""
    if not points:
        raise ValueError("no measured steps to calibrate on")
    if kernel_terms is None:
        from stash_core.decide.predict.kernels import elementwise_terms

        kernel_terms = elementwise_terms()
    stack = _Stack([arrays_for(point) for point in points])
    measured = np.log([point.step_s for point in points])
    figure_weight = source_weights(points)
    first, second = same_work_pairs(points) if ratios else (np.zeros(0, int), np.zeros(0, int))
    measured_ratio = measured[first] - measured[second]
    pair_weight = np.sqrt(len(points) / len(first)) if len(first) else 0.0
    start = _to_vector(PRIOR)
    weight = np.sqrt([PRIOR_WEIGHTS[name] for name in PARAMETERS])

    def residual(vector: np.ndarray) -> np.ndarray:
        predicted = np.log(stack.step_s(StepParams({**_to_params(vector).values, **kernel_terms})))
        pair_ratio = predicted[first] - predicted[second] - measured_ratio
        figures = figure_weight * huber(predicted - measured)
        return np.concatenate([figures, pair_weight * huber(pair_ratio), weight * (vector - start)])

    vector, damping = start.copy(), 1e-2
    current = residual(vector)
    for _ in range(MAX_ITERATIONS):
        jacobian = np.empty((len(current), len(vector)))
        for index in range(len(vector)):
            step = np.zeros_like(vector)
            step[index] = 1e-5
            jacobian[:, index] = (residual(vector + step) - current) / 1e-5
        normal = jacobian.T @ jacobian
        gradient = jacobian.T @ current
        improved = False
        for _ in range(8):
            delta = np.linalg.solve(
                normal + damping * (np.diag(np.diag(normal)) + np.eye(len(vector))), -gradient
            )
            trial = residual(vector + delta)
            if trial @ trial < current @ current:
                gain = current @ current - trial @ trial
                vector, current, damping, improved = vector + delta, trial, damping / 3.0, True
                break
            damping *= 4.0
        if not improved or gain < 1e-9:
            break
    sources = len({point.source_id or point.source for point in points})
    fitted = StepParams({**_to_params(vector).values, **kernel_terms})
    ratio_note = f" and {len(first)} ratios between GPUs" if len(first) else ""
    return StepParams(fitted.values, f"{len(points)} published figures{ratio_note} from {sources} sources")
