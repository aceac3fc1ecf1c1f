"""Held-out checks of the predicted training step against published figures, none of which flatter:

- leave one source out: fit the step model on every other source's figures (another software stack), predict
  the left-out source's;
- leave one GPU out: fit without every figure of a GPU die (its variants left out together: H100 SXM, PCIe
  and H200; A10 and A10G), predict it;
- scaled: a measurement of the same model, precision, input and batch on another GPU times the ratio of the
  two predicted steps, the model fitted for ratios (calibration.py) without the target's die and without the
  target's source; "within"
  one software stack when both figures come from one source and revision, "across" otherwise;
- GPU ratio (the path of a profiled script, whose operators are unknown): a measurement on another GPU times
  a blend of the two GPUs' matrix-peak and bandwidth ratios (gpu_ratio.py), the blend fitted without the
  figure's source;
- other sources (no model, a yardstick): the same work on the same GPU variant as other sources timed it,
  which bounds what leaving a source out can reach.
Every row says its path, how it was held out, its source, die and batch regime (published.py), so the bench
reports errors by each, and stated_error.py takes the error a prediction prints from them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from stash_core.decide.predict.calibration import Point, fit_params, predicted_s
from stash_core.decide.predict.gpu_ratio import fit_share, gpu_ratio
from stash_core.decide.predict.kernels import elementwise_terms, kernel_gpus
from stash_core.decide.predict.published import chip, regime
from stash_core.decide.predict.roofline import StepParams

PATHS = ("roofline", "scaled", "script")


def leave_one_source_out(points: list[Point]) -> pd.DataFrame:
    return _held_out(points, lambda point: point.source_id, "source")


def leave_one_gpu_out(points: list[Point]) -> pd.DataFrame:
    return _held_out(points, lambda point: chip(point.accelerator), "gpu")


def _held_out(points: list[Point], group: Callable[[Point], str], held_out: str) -> pd.DataFrame:
    rows = []
    for key in sorted({group(point) for point in points}):
        train = [point for point in points if group(point) != key]
        if not train:
            continue
        params = fit_params(train, kernel_terms=_kernel_terms(key if held_out == "gpu" else ""))
        for point in points:
            if group(point) == key:
                rows.append(_row(point, predicted_s(point, params), "roofline", held_out))
    return pd.DataFrame(rows, columns=COLUMNS)


def scaled_from_other_gpu(points: list[Point]) -> pd.DataFrame:
    """Each point predicted from every figure of the same model, input and precision on another die."""
    fits: dict[tuple[str, str], StepParams | None] = {}
    rows = []
    for target in points:
        bases = _same_work_elsewhere(points, target)
        if not bases:
            continue
        key = (chip(target.accelerator), target.source_id)
        if key not in fits:
            train = [p for p in points if chip(p.accelerator) != key[0] and p.source_id != key[1]]
            terms = _kernel_terms(key[0])
            fits[key] = fit_params(train, ratios=True, kernel_terms=terms) if train else None
        params = fits[key]
        if params is None:
            continue
        target_s = predicted_s(target, params)
        for base in bases:
            per_sample_s = (
                base.step_s
                / base.batch_size
                * (target_s / target.batch_size)
                / (predicted_s(base, params) / base.batch_size)
            )
            rows.append(_row(target, per_sample_s * target.batch_size, "scaled", _stack(base, target), base))
    return pd.DataFrame(rows, columns=COLUMNS)


def ratio_from_other_gpu(points: list[Point]) -> pd.DataFrame:
    """Each point from a figure of the same work on another die times the GPUs' ratio for unknown operators
    (gpu_ratio.py), its share fitted without the point's source."""
    pairs = [(base, target) for target in points for base in _same_work_elsewhere(points, target)]
    shares: dict[str, float] = {}
    rows = []
    for base, target in pairs:
        source = target.source_id
        if source not in shares:
            shares[source] = fit_share([(b, t) for b, t in pairs if source not in (b.source_id, t.source_id)])
        ratio = gpu_ratio(base.accelerator, target.accelerator, target.precision, shares[source])
        per_sample_s = base.step_s / base.batch_size * ratio
        rows.append(_row(target, per_sample_s * target.batch_size, "script", _stack(base, target), base))
    return pd.DataFrame(rows, columns=COLUMNS)


def script_share(points: list[Point]) -> float:
    """The share gpu_ratio uses for a profiled script, fitted on every pair of published figures."""
    return fit_share([(base, target) for target in points for base in _same_work_elsewhere(points, target)])


def other_sources_same_work(points: list[Point]) -> pd.DataFrame:
    """Each figure predicted by the mean of what other sources measured for the same work (model, precision,
    input shape, batch) on the same GPU variant: no model at all, only another software stack. Its error is
    how far stacks disagree on identical work, which no GPU model can close when a source is held out."""

    def work(point: Point) -> tuple:
        return (point.model, point.precision, point.input_shape, point.batch_size, point.accelerator)

    same_work: dict[tuple, list[Point]] = {}
    for point in points:
        same_work.setdefault(work(point), []).append(point)
    rows = []
    for target in points:
        others = [
            point.batch_size / point.step_s
            for point in same_work[work(target)]
            if point.source_id != target.source_id
        ]
        if others:
            predicted_s = target.batch_size / float(np.mean(others))
            rows.append(_row(target, predicted_s, "other sources", "source"))
    return pd.DataFrame(rows, columns=COLUMNS)


def validation_frames(points: list[Point]) -> dict[str, pd.DataFrame]:
    """Every held-out check: roofline (leave one source out, then leave one GPU out), scaled, script."""
    roofline = pd.concat([leave_one_source_out(points), leave_one_gpu_out(points)], ignore_index=True)
    return {
        "roofline": roofline,
        "scaled": scaled_from_other_gpu(points),
        "script": ratio_from_other_gpu(points),
    }


def _kernel_terms(die: str) -> dict[str, float]:
    """The kernel model's element-wise terms, fitted without the kernels of GPU die `die` ("" for none)."""
    return elementwise_terms(tuple(gpu for gpu in kernel_gpus() if die and chip(gpu) == die))


def _stack(base: Point, target: Point) -> str:
    """ "within" one software stack: the same source and revision (one container, one framework version)."""
    return "within" if (base.source_id, base.revision) == (target.source_id, target.revision) else "across"


def _same_work_elsewhere(points: list[Point], target: Point) -> list[Point]:
    """Figures of the same work on another die: model, precision, input shape and batch size, as a profile
    anchors a prediction only at its own batch (configuration.py, script.py) and a figure's per-step
    overheads do not scale with the batch."""
    target_chip = chip(target.accelerator)
    work = (target.model, target.precision, target.input_shape, target.batch_size)
    return [
        point
        for point in points
        if chip(point.accelerator) != target_chip
        and (point.model, point.precision, point.input_shape, point.batch_size) == work
    ]


COLUMNS = [
    "model", "input_shape", "accelerator", "gpu", "precision", "batch_size", "regime", "source_id", "path",
    "held_out", "base", "measured_samples_per_s", "predicted_samples_per_s", "error", "abs_error", "layout",
]  # fmt: skip


def _row(point: Point, predicted_step_s: float, path: str, held_out: str, base: Point | None = None) -> dict:
    measured = point.batch_size / point.step_s
    predicted = point.batch_size / predicted_step_s
    return {
        "model": point.model,
        "input_shape": "x".join(str(size) for size in point.input_shape),
        "accelerator": point.accelerator,
        "gpu": chip(point.accelerator),
        "precision": point.precision,
        "batch_size": point.batch_size,
        "regime": regime(point.batch_size),
        "source_id": point.source_id,
        "path": path,
        "held_out": held_out,
        "base": f"{base.accelerator} ({base.source_id})" if base else "",
        "measured_samples_per_s": measured,
        "predicted_samples_per_s": predicted,
        "error": predicted / measured - 1.0,
        "abs_error": abs(predicted / measured - 1.0),
        "layout": point.memory_format or "-",
    }


def summary(frame: pd.DataFrame, by: tuple[str, ...] = ("model", "accelerator")) -> pd.DataFrame:
    """Mean absolute error, its 80th percentile, the mean error (bias: above 0, predicted faster than
    measured) and the count per group."""
    if frame.empty:
        return frame
    grouped = frame.groupby(list(by), as_index=False)
    table = grouped.agg(
        mape=("abs_error", "mean"), p80=("abs_error", lambda errors: float(np.quantile(errors, 0.8))),
        bias=("error", "mean"), count=("abs_error", "count"),
    )  # fmt: skip
    return table.round({"mape": 4, "p80": 4, "bias": 4})


# instances.py reads the stated errors through this module.
from stash_core.decide.predict.stated_error import expected_error, expected_errors  # noqa: E402, F401
