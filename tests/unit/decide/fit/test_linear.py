"""Least squares with R², residuals and held-out error (decide/fit/linear.py)."""

from __future__ import annotations

import numpy as np
import pytest

from stash_core.decide.fit import (
    fit_linear,
    mape,
)


def test_least_squares_recovers_known_coefficients():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1e8, size=(30, 2)) * [1, 1e-6]
    y = 0.004 + 2e-9 * x[:, 0] + 3e-4 * x[:, 1]
    fit = fit_linear(x, y, ("grad_bytes", "grad_tensor_count"))
    assert fit.intercept == pytest.approx(0.004, rel=1e-6)
    assert fit.coefficients == pytest.approx((2e-9, 3e-4), rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict([[5e7, 50.0]])[0] == pytest.approx(0.004 + 0.1 + 0.015)


def test_least_squares_with_noise_keeps_r2_below_one_and_too_few_points_gives_none():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, size=(40, 1))
    y = 1.0 + 0.5 * x[:, 0] + rng.normal(0, 0.3, 40)
    fit = fit_linear(x, y, ("x",))
    assert 0.8 < fit.r2 < 1.0
    assert fit.coefficients[0] == pytest.approx(0.5, abs=0.05)
    assert fit_linear(x[:1], y[:1], ("x",)) is None


def test_mape_ignores_zero_measurements():
    assert mape(np.array([1.1, 0.9, 5.0]), np.array([1.0, 1.0, 0.0])) == pytest.approx(0.1)
    assert mape(np.array([1.0]), np.array([0.0])) is None


def test_fitted_values_are_the_fits_predictions_to_the_last_bit():
    import numpy as np

    from stash_core.decide.fit.linear import fit_linear, fitted_values

    rng = np.random.default_rng(3)
    x = np.asfortranarray(rng.uniform(1e6, 2e8, size=(9, 2)))
    y = 0.002 + 1e-9 * x[:, 0] + rng.normal(0, 1e-3, 9)
    new = rng.uniform(1e6, 2e8, size=(4, 2))
    assert np.array_equal(fitted_values(x, y, new), fit_linear(x, y, ("a", "b")).predict(new))
    assert fitted_values(x[:2], y[:2], new) is None  # fewer points than parameters
