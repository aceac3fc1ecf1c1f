"""Published training throughputs (published_throughputs.csv, every figure with its source) and the
leave-one-GPU-out check of the compute prediction against them.

Leave one GPU out: fit the efficiencies on every other GPU's points, predict the held-out GPU's throughput,
compare. A GPU is a chip: table rows with the same peaks and memory bandwidth (V100 16 GB and 32 GB) are one
GPU, left out together, so that a twin's figures never predict it. Scaling: predict a GPU from a measurement
of the same model and precision on another GPU, times the ratio of the two roofline times (efficiencies
fitted without the predicted GPU). The mean absolute percentage errors of the two are the expected errors the
predictions report.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.decide.predict.accelerators import find_accelerator
from stash_core.decide.predict.calibration import Point, arrays_for, fit_efficiencies, predicted_s

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
        points.append(
            Point(row["model"], batch, row["accelerator"], row["precision"],
                  batch / float(row["samples_per_s"]), row["source"])
        )  # fmt: skip
    return points


def predict_step_s(point: Point, efficiency) -> float:
    arrays = arrays_for(point)
    return float(predicted_s(arrays, efficiency.for_precision(point.precision), efficiency.memory)[0])


def leave_one_gpu_out(points: list[Point]) -> pd.DataFrame:
    """One row per point of a GPU that has other GPUs to learn from: measured and predicted throughput."""
    rows = []
    for chip in sorted({_chip(point) for point in points}):
        train = [point for point in points if _chip(point) != chip]
        if not train:
            continue
        efficiency = fit_efficiencies(train)
        for point in (point for point in points if _chip(point) == chip):
            predicted = predict_step_s(point, efficiency)
            rows.append(_row(point, predicted, "roofline"))
    return pd.DataFrame(rows)


def scaled_from_other_gpu(points: list[Point]) -> pd.DataFrame:
    """Each point predicted from every measurement of the same model and precision on another GPU."""
    rows = []
    for target in points:
        others = [p for p in points if _chip(p) != _chip(target)]
        if not others:
            continue
        efficiency = fit_efficiencies(others)
        for base in others:
            if base.model != target.model or base.precision != target.precision:
                continue
            ratio = predict_step_s(target, efficiency) / predict_step_s(base, efficiency)
            rows.append(_row(target, base.step_s * ratio, f"scaled from {base.accelerator}"))
    return pd.DataFrame(rows)


@functools.cache
def expected_errors() -> dict[str, float | None]:
    """Mean absolute relative throughput error of each path over the published figures."""
    points = published_points()
    loo, scaled = leave_one_gpu_out(points), scaled_from_other_gpu(points)
    return {
        "roofline": float(loo["abs_error"].mean()) if len(loo) else None,
        "scaled": float(scaled["abs_error"].mean()) if len(scaled) else None,
    }


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


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean absolute error per model and GPU."""
    if frame.empty:
        return frame
    grouped = frame.groupby(["model", "accelerator"], as_index=False)["abs_error"].agg(["mean", "count"])
    return grouped.rename(columns={"mean": "mape"}).assign(mape=lambda f: np.round(f["mape"], 4))
