"""Ordinary least squares with an intercept, R², residuals and held-out error (numpy only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinearFit:
    """stall_s = intercept + sum(coefficient_i x feature_i)."""

    features: tuple[str, ...]
    intercept: float
    coefficients: tuple[float, ...]
    r2: float | None
    rank_deficient: bool

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions for rows of x (one column per feature, in `features` order)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        return self.intercept + x @ np.asarray(self.coefficients, dtype=float)


def fit_linear(x: np.ndarray, y: np.ndarray, features: tuple[str, ...]) -> LinearFit | None:
    """Least squares of y on the columns of x plus an intercept; None with fewer points than parameters.

    Columns are scaled to unit size before solving (gradient bytes are ~1e8, tensor counts ~1e2), which
    keeps the problem well conditioned; coefficients are returned in the original units.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    if x.shape[0] != y.shape[0]:
        raise ValueError("x and y differ in length")
    parameters = x.shape[1] + 1
    if len(y) < parameters:
        return None
    design, solution, rank, scale = _solve(x, y)
    intercept = float(solution[0])
    coefficients = tuple(float(value) for value in solution[1:] / scale)
    fitted = design @ solution
    total = float(((y - y.mean()) ** 2).sum())
    r2 = None if total == 0 else 1.0 - float(((y - fitted) ** 2).sum()) / total
    return LinearFit(tuple(features), intercept, coefficients, r2, bool(rank < parameters))


def fitted_values(x: np.ndarray, y: np.ndarray, x_new: np.ndarray) -> np.ndarray | None:
    """fit_linear(x, y).predict(x_new) by the same arithmetic, without the fit's own figures (R², rank): a
    held-out error makes thousands of these fits on the Models page."""
    if len(y) < x.shape[1] + 1:
        return None
    _, solution, _, scale = _solve(x, y)
    coefficients = np.asarray([float(value) for value in solution[1:] / scale], dtype=float)
    return float(solution[0]) + np.atleast_2d(x_new) @ coefficients


def _solve(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(design, solution, rank, scale): least squares on the columns scaled to unit size and an intercept."""
    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0
    design = np.column_stack([np.ones(len(y)), x / scale])
    solution, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    return design, solution, rank, scale


def mape(predicted: np.ndarray, measured: np.ndarray) -> float | None:
    """Mean absolute percentage error (as a fraction) over points whose measured value is above zero."""
    predicted = np.asarray(predicted, dtype=float)
    measured = np.asarray(measured, dtype=float)
    usable = (measured > 0) & np.isfinite(predicted)
    if not usable.any():
        return None
    return float(np.mean(np.abs(predicted[usable] - measured[usable]) / measured[usable]))
