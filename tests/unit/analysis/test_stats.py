import math
import random

import pytest

from stash_core.analysis.stats import (
    converged,
    difference_ci95,
    lag1_autocorrelation,
    linear_combination_ci95,
    mean_ci95,
    mser_truncation,
    resolved,
    sign_verdict,
    summarise,
    t_quantile_975,
)


def test_t_quantile_matches_tables():
    # Published two-sided 95% quantiles.
    for dof, expected in [(2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042), (1000, 1.962)]:
        assert abs(t_quantile_975(dof) - expected) < 0.02


def test_ci_covers_true_mean_about_95_percent_of_the_time():
    rng = random.Random(1)
    covered = 0
    trials = 400
    for _ in range(trials):
        samples = [rng.gauss(1.0, 0.1) for _ in range(20)]
        m, ci = mean_ci95(samples)
        covered += abs(m - 1.0) <= ci
    assert 0.90 <= covered / trials <= 0.99


def test_autocorrelated_samples_get_a_wider_interval():
    rng = random.Random(2)
    independent = [rng.gauss(1.0, 0.1) for _ in range(200)]
    correlated = []
    value = 0.0
    for _ in range(200):
        value = 0.9 * value + rng.gauss(0, 0.1)
        correlated.append(1.0 + value)
    assert lag1_autocorrelation(correlated) > 0.5
    scale = summarise(correlated).std / summarise(independent).std
    # Same spread would give the same naive interval; the corrected one must be wider.
    assert mean_ci95(correlated)[1] / scale > 1.5 * mean_ci95(independent)[1]


def test_mser_cuts_a_warm_up_transient():
    rng = random.Random(3)
    warmup = [2.0 - 0.1 * i for i in range(10)]  # slow first iterations
    steady = [1.0 + rng.gauss(0, 0.01) for _ in range(90)]
    cut = mser_truncation(warmup + steady)
    assert 10 <= cut <= 20


def test_mser_keeps_a_stationary_series():
    rng = random.Random(4)
    assert mser_truncation([1.0 + rng.gauss(0, 0.01) for _ in range(100)]) <= 10


def quadratic_mser(values, batch=5):
    """MSER-5 as its definition reads: every cut's score summed afresh (MSER-1 under four batches)."""
    n_batches = len(values) // batch
    if n_batches < 4:
        return 0 if batch == 1 else quadratic_mser(values, 1)
    means = [sum(values[i * batch : (i + 1) * batch]) / batch for i in range(n_batches)]
    best_d, best_score = 0, math.inf
    for d in range(n_batches // 2 + 1):
        rest = means[d:]
        m = sum(rest) / len(rest)
        score = sum((x - m) ** 2 for x in rest) / len(rest) ** 2
        if score < best_score:
            best_d, best_score = d, score
    return best_d * batch


def test_a_series_too_short_for_five_batches_still_loses_its_slow_start():
    """Ten kept steps of a fixed count, the first four still warming up: MSER-5 has two batches and could
    cut nothing, so single samples are judged."""
    slow_start = [0.80, 0.51, 1.47, 1.04, *(0.08 + 0.001 * (i % 3) for i in range(8))]
    assert mser_truncation(slow_start) == 4
    assert mser_truncation([1.0, 1.0, 1.0]) == 0  # too short for any judgement


def test_mser_cuts_where_its_definition_does():
    rng = random.Random(5)
    for trial in range(200):
        n = rng.randint(0, 400)
        level = rng.choice([1e-4, 0.01, 1.0, 300.0])
        drop = rng.choice([0.0, 0.5, 3.0]) * level
        warm = rng.randint(0, n // 2 + 1)
        values = [level + (drop if i < warm else 0.0) + rng.gauss(0, 0.02 * level) for i in range(n)]
        assert mser_truncation(values) == quadratic_mser(values), trial
    assert mser_truncation([0.003] * 1000) == 0  # a constant series keeps everything


def test_converged_needs_enough_samples_and_a_tight_interval():
    rng = random.Random(5)
    tight = [1.0 + rng.gauss(0, 0.005) for _ in range(30)]
    noisy = [1.0 + rng.gauss(0, 0.3) for _ in range(30)]
    assert converged(tight, 0.02)
    assert not converged(noisy, 0.02)
    assert not converged(tight[:4], 0.02)


def test_single_sample_has_infinite_interval_and_difference_adds_in_quadrature():
    assert math.isinf(mean_ci95([1.0])[1])
    assert difference_ci95(3.0, 4.0) == 5.0


def test_interval_of_a_combination_of_independent_means():
    # t2 - t0 + t1 - t1: the coefficients of R1 cancel, so its interval plays no part.
    assert linear_combination_ci95({"R2": 1, "R0": -1, "R1": 0}, {"R0": 3.0, "R1": 100.0, "R2": 4.0}) == 5.0
    assert linear_combination_ci95({"R0": 2}, {"R0": 1.5}) == 3.0
    assert linear_combination_ci95({}, {}) == 0.0


def test_resolved_means_the_interval_does_not_reach_past_zero():
    assert resolved(0.05, 0.01) and resolved(-0.05, 0.01) and resolved(0.05, None)
    assert not resolved(0.0, 3.39)  # "0 us ± 3.39 s"
    assert not resolved(0.002, 0.003) and not resolved(-0.002, 0.003)
    assert not resolved(1.0, math.inf) and not resolved(1.0, math.nan)
    assert sign_verdict(0.05, 0.01) == "positive" and sign_verdict(-0.539, 0.01) == "negative"
    assert sign_verdict(-0.539, 0.6) == "within_noise" and sign_verdict(0.002, 0.003) == "within_noise"
    assert sign_verdict(-0.1, None) == "negative"


def test_a_fractional_degree_of_freedom_takes_the_quantile_there_not_the_whole_number_below():
    """2.8 effective samples (lag-1 autocorrelation 0.36 over 6) took t(1) = 12.706, an interval 2.7x the
    Student one; the 97.5% quantiles of Student's t at those degrees of freedom."""
    for dof, expected in ((1.5, 6.0167), (1.818, 4.7430), (2.5, 3.5747), (3.6, 2.9024), (29.5, 2.0437)):
        assert t_quantile_975(dof) == pytest.approx(expected, abs=2e-4)
    for dof, table in ((1, 12.706), (2, 4.303), (10, 2.228), (29, 2.045)):  # the table where it has one
        assert t_quantile_975(dof) == table
    assert t_quantile_975(0.5) == 12.706  # never fewer than one degree of freedom
    assert t_quantile_975(2.0001) == pytest.approx(4.303, abs=2e-3)  # continuous with the table


def test_a_share_of_trials_has_wilsons_interval():
    from stash_core.analysis.stats import share_ci95

    assert share_ci95(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)  # the textbook figures
    assert share_ci95(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # not empty at none
    assert share_ci95(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert share_ci95(0, 0) == (0.0, 1.0)
