"""How much longer work takes on one GPU than on another when its operators are unknown (a profiled script).

Part of a step is bound by the matrix units, part by memory bandwidth, and a script's split is not known. The
ratio is therefore a geometric blend of the two GPUs' matrix-peak ratio (in the precision) and their
memory-bandwidth ratio: peak_ratio^share x bandwidth_ratio^(1 - share). `share` is fitted over published
figures of the same work on two dies (validation.py holds each source out of the fit that predicts it); the
fit on every figure is stored in validation_summary.json and read by `stash predict --script-run`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stash_core.catalog.accelerators import find_accelerator

SHARES = tuple(float(share) for share in np.round(np.linspace(0.0, 1.0, 21), 2))
DEFAULT_SHARE = 0.5  # without a fit: the two ratios weighed alike


def gpu_ratio(measured_on: str, predicted_for: str, precision: str, share: float) -> float:
    """Seconds on `predicted_for` per second measured on `measured_on` (ValueError for a GPU not in the
    accelerator table)."""
    base, target = find_accelerator(measured_on), find_accelerator(predicted_for)
    if base is None or target is None:
        raise ValueError(f"no accelerator table entry for {measured_on!r} or {predicted_for!r}")
    peaks = base.matrix_tflops(precision) / target.matrix_tflops(precision)
    bandwidths = base.memory_gbs / target.memory_gbs
    return float(peaks**share * bandwidths ** (1.0 - share))


def fit_share(pairs: Sequence[tuple]) -> float:
    """The share that predicts (base, target) figure pairs best (least mean absolute error); pairs are
    calibration.Point couples of the same work on two GPUs."""
    if not pairs:
        return DEFAULT_SHARE
    return min(SHARES, key=lambda share: float(np.mean(ratio_errors(pairs, share))))


def ratio_errors(pairs: Sequence[tuple], share: float) -> list[float]:
    """Absolute throughput error of each target predicted from its base by gpu_ratio."""
    errors = []
    for base, target in pairs:
        ratio = gpu_ratio(base.accelerator, target.accelerator, target.precision, share)
        predicted = base.step_s / base.batch_size * ratio
        errors.append(abs(predicted / (target.step_s / target.batch_size) - 1.0))
    return errors
