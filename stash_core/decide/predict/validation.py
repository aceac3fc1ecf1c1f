"""Published training throughputs (published_throughputs.csv, every figure with its source) and the
leave-one-GPU-out check of the compute prediction against them.

Leave one GPU out: fit the efficiencies on every other GPU's points, predict the held-out GPU's throughput,
compare. A GPU is a chip: table rows with the same peaks and memory bandwidth (V100 16 GB and 32 GB) are one
GPU, left out together, so that a twin's figures never predict it. Scaling: predict a GPU from a measurement
of the same model and precision on another GPU, times the ratio of the two roofline times (efficiencies
fitted without the predicted GPU). Peak ratio (the path of a profiled script, whose operators are unknown): a
measurement on another GPU times the ratio of the two GPUs' matrix peaks. The mean absolute percentage errors
of the three are the expected errors the predictions report (per model where it has published figures).
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.calibration import Point, arrays_for, fit_efficiencies, predicted_s
from stash_core.decide.predict.roofline import Efficiency

PUBLISHED_CSV = Path(__file__).resolve().parent / "published_throughputs.csv"


def published_points(csv_path: Path | str = PUBLISHED_CSV) -> list[Point]:
    """The single-GPU published figures as measured steps (multi-GPU rows include communication)."""
    with open(csv_path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    points = []
    for row in rows:
        if int(row["gpus"]) != 1:
            continue
        batch = int(row["batch_size"])
        shape = tuple(int(size) for size in (row.get("input_shape") or "").split("x") if size)
        points.append(
            Point(row["model"], batch, row["accelerator"], row["precision"],
                  batch / float(row["samples_per_s"]), row["source"], shape)
        )  # fmt: skip
    return points


def predict_step_s(point: Point, efficiency) -> float:
    arrays = arrays_for(point)
    return float(predicted_s(arrays, efficiency.for_precision(point.precision), efficiency.memory)[0])


def leave_one_gpu_out(points: list[Point]) -> pd.DataFrame:
    """One row per point of a GPU that has other GPUs to learn from: measured and predicted throughput."""
    fits = _fits_without_each_chip(points)
    rows = []
    for point in points:
        efficiency = fits.get(_chip(point))
        if efficiency is not None:
            rows.append(_row(point, predict_step_s(point, efficiency), "roofline"))
    return pd.DataFrame(rows)


def scaled_from_other_gpu(points: list[Point]) -> pd.DataFrame:
    """Each point predicted from every measurement of the same model and precision on another GPU."""
    fits = _fits_without_each_chip(points)
    rows = []
    for target in points:
        efficiency = fits.get(_chip(target))
        if efficiency is None:
            continue
        for base in _same_work_elsewhere(points, target):
            ratio = predict_step_s(target, efficiency) / predict_step_s(base, efficiency)
            rows.append(_row(target, base.step_s * ratio, f"scaled from {base.accelerator}"))
    return pd.DataFrame(rows)


def peak_ratio_from_other_gpu(points: list[Point]) -> pd.DataFrame:
    """Each point predicted from a measurement of the same model and precision on another GPU times the ratio
    of the two GPUs' matrix peaks in that precision: the path of a profiled script, whose operators are not
    known (per-sample times, so the batch sizes of the two may differ)."""
    rows = []
    for target in points:
        for base in _same_work_elsewhere(points, target):
            per_sample_s = (
                base.step_s
                / base.batch_size
                * peak_ratio(base.accelerator, target.accelerator, target.precision)
            )
            rows.append(_row(target, per_sample_s * target.batch_size, f"peak ratio to {base.accelerator}"))
    return pd.DataFrame(rows)


def peak_ratio(measured_on: str, predicted_for: str, precision: str) -> float:
    """Seconds on `predicted_for` per second measured on `measured_on`: the ratio of their matrix peaks."""
    base, target = find_accelerator(measured_on), find_accelerator(predicted_for)
    if base is None or target is None:
        raise ValueError(f"no accelerator table entry for {measured_on!r} or {predicted_for!r}")
    return base.matrix_tflops(precision) / target.matrix_tflops(precision)


PATHS = ("roofline", "scaled", "script")


@functools.cache
def validation_frames() -> dict[str, pd.DataFrame]:
    """The three checks over the published figures, by path: roofline, scaled, script (peak ratio)."""
    points = published_points()
    return {
        "roofline": leave_one_gpu_out(points),
        "scaled": scaled_from_other_gpu(points),
        "script": peak_ratio_from_other_gpu(points),
    }


@functools.cache
def expected_errors() -> dict[str, float | None]:
    """Mean absolute relative throughput error of each path over all the published figures."""
    return {path: _mean(frame) for path, frame in validation_frames().items()}


def expected_error(path: str, model: str | None = None) -> float | None:
    """The expected error of a path for a model: over that model's published figures where it has some,
    else over all of them."""
    frame = validation_frames().get(path)
    if frame is None:
        return None
    if model is not None and len(frame) and (frame["model"] == model).any():
        return _mean(frame[frame["model"] == model])
    return expected_errors()[path]


def _mean(frame: pd.DataFrame) -> float | None:
    return float(frame["abs_error"].mean()) if len(frame) else None


def _same_work_elsewhere(points: list[Point], target: Point) -> list[Point]:
    return [
        point
        for point in points
        if _chip(point) != _chip(target)
        and point.model == target.model
        and point.precision == target.precision
    ]


def _fits_without_each_chip(points: list[Point]) -> dict[tuple, Efficiency]:
    """Per chip, the efficiencies fitted on every other chip's points (none for a chip alone)."""
    fits = {}
    for chip in {_chip(point) for point in points}:
        train = [point for point in points if _chip(point) != chip]
        if train:
            fits[chip] = fit_efficiencies(train)
    return fits


def _chip(point: Point) -> tuple:
    """The GPU as the roofline sees it: its peaks and memory bandwidth."""
    accelerator = find_accelerator(point.accelerator)
    if accelerator is None:
        return (point.accelerator,)
    return (accelerator.fp32_tflops, accelerator.tf32_tflops, accelerator.fp16_tflops, accelerator.memory_gbs)


def _row(point: Point, predicted_s: float, method: str) -> dict:
    measured = point.batch_size / point.step_s
    predicted = point.batch_size / predicted_s
    return {
        "model": point.model,
        "accelerator": point.accelerator,
        "precision": point.precision,
        "batch_size": point.batch_size,
        "method": method,
        "measured_samples_per_s": measured,
        "predicted_samples_per_s": predicted,
        "error": predicted / measured - 1.0,
        "abs_error": abs(predicted / measured - 1.0),
    }


def summary(frame: pd.DataFrame, by: tuple[str, ...] = ("model", "accelerator")) -> pd.DataFrame:
    """Mean absolute error per model and GPU (or the columns given)."""
    if frame.empty:
        return frame
    grouped = frame.groupby(list(by), as_index=False)["abs_error"].agg(["mean", "count"])
    return grouped.rename(columns={"mean": "mape"}).assign(mape=lambda f: np.round(f["mape"], 4))
