"""The loss-model fit (eq. 3) recovers known g1..g5 from synthetic curves and refuses one it cannot fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stash_core.errors import UsageError
from stash_core.spot.inputs import load_workload
from stash_core.spot.lossfit import MAX_FIT_ERROR, curves, fit_loss, predict, read_loss_csv

# g1, g2 and g5 of the public spotDNN ResNet-110 profile; g3 and g4 chosen so g2 b + g3 > 0 at b <= 256.
TRUE_G = (876.5, -0.2, 300.0, 1.0, 0.5)


def _grid(batches=(64, 128, 256), workers=(1, 2, 4), last=6000):
    rows = [(b, n, j) for b in batches for n in workers for j in range(0, last + 1, 250)]
    b, n, j = (np.array(column, dtype=float) for column in zip(*rows, strict=True))
    return b, n, j


def _synthetic(noise=0.0, seed=0):
    b, n, j = _grid()
    clean = predict(TRUE_G, curves(b, n, j, np.ones_like(b)))
    noisy = clean * (1 + noise * np.random.default_rng(seed).standard_normal(clean.size))
    return curves(b, n, j, noisy)


def test_like_workers_r_is_eq_5():
    data = curves([32, 32, 32], [1, 2, 4], [0, 1, 2], [1, 1, 1])
    assert data.r == pytest.approx([0.0, np.sqrt(0.5), np.sqrt(0.75)])


def test_exact_curves_give_back_the_coefficients():
    fit = fit_loss(_synthetic())
    assert fit.g == pytest.approx(TRUE_G, rel=1e-4)
    assert fit.mean_rel_error < 1e-6 and fit.acceptable
    assert fit.batches == (64, 128, 256) and fit.worker_counts == (1, 2, 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_curves_give_the_coefficients_within_a_few_per_cent(seed):
    fit = fit_loss(_synthetic(noise=0.005, seed=seed))
    assert fit.g == pytest.approx(TRUE_G, rel=0.05)
    assert 0.002 < fit.mean_rel_error < 0.01  # the noise, reported as the fit's error


def test_a_curve_of_another_shape_is_beyond_the_bound():
    b, n, j = _grid()
    # a loss that rises and falls in steps: no (j + g1)^-1 curve follows it
    wild = 1 + 0.8 * np.sin(j / 300.0) ** 2 + 0.5 * (b == 128)
    fit = fit_loss(curves(b, n, j, wild))
    assert fit.mean_rel_error > MAX_FIT_ERROR and not fit.acceptable


def test_one_worker_count_cannot_tell_g4_apart():
    b, n, j = _grid(workers=(2,))
    with pytest.raises(UsageError, match="two worker counts"):
        fit_loss(curves(b, n, j, np.ones_like(b)))


def test_csv_columns_are_read_by_their_names(tmp_path):
    path = tmp_path / "loss.csv"
    path.write_text("step,Loss,batch,workers\n0,2.5,64,1\n10,2.0,64,1\n")
    data = read_loss_csv(path)
    assert list(data.loss) == [2.5, 2.0] and list(data.batch) == [64, 64]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("step,loss,workers\n0,2.5,1\n", "no batch column"),
        ("step,loss,batch,workers\n0,abc,64,1\n", "line 2: loss 'abc' is not a number"),
        ("step,loss,batch,workers\n0,-1,64,1\n", "loss > 0"),
        # a short row was "batch None is not a number"; a blank line moved every later line's number
        ("step,loss,batch,workers\n0,2.5,64,1\n\n100,3\n", "line 4 has 2 fields where the header has 4$"),
        ("step,loss,batch,workers\n0,2.5,64,1,9\n", "line 2 has 5 fields where the header has 4$"),
        ("step,loss,batch,workers\n\n0,2.5, ,1\n", "line 3: batch is empty$"),
    ],
    ids=["no-batch", "text", "negative", "short-row", "long-row", "empty-cell"],
)
def test_csv_refusals(tmp_path, text, message):
    path = tmp_path / "loss.csv"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        read_loss_csv(path)


def test_the_planner_refuses_a_workload_with_a_bad_recorded_fit(tmp_path):
    doc = {"param_mb": 1, "solo_bandwidth_mbps": 1, "a1": 0.1, "b1": 0.1, "g": list(TRUE_G)}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**doc, "loss_fit": {"mean_rel_error": 0.03}}))
    assert load_workload(path)[0].loss_g == TRUE_G
    path.write_text(json.dumps({**doc, "loss_fit": {"mean_rel_error": MAX_FIT_ERROR + 0.01}}))
    with pytest.raises(UsageError, match="beyond"):
        load_workload(path)


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("iteration", 1e300, "iteration up to 1,000,000,000"),
        ("batch", 1e300, "batch up to 1,048,576"),
        ("workers", 1e6, "workers up to 10,000"),
        ("loss", 1e300, "loss up to 1,000,000"),
    ],
)
def test_values_beyond_sane_bounds_are_refused_without_numpy_warnings(column, value, message):
    import warnings

    b, n, j = _grid()
    values = {"batch": b, "workers": n, "iteration": j, "loss": np.ones_like(b)}
    values[column] = values[column].copy()
    values[column][-1] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UsageError, match=message):
            curves(values["batch"], values["workers"], values["iteration"], values["loss"])


def test_curves_at_the_bounds_fit_without_numpy_warnings():
    """The largest iterations and batches allowed: the fit runs without an overflow warning."""
    import warnings

    b, n, j = _grid(last=6000)
    j = j / j.max() * 1e9
    b = b / b.max() * 2**20
    data = curves(b, n, j, predict((1e8, 1e-6, 3.0, 1.0, 0.5), curves(b, n, j, np.ones_like(b))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_loss(data)
    assert all(np.isfinite(fit.g)) and fit.mean_rel_error < MAX_FIT_ERROR


@pytest.mark.parametrize("batch", ["0.5", "1.5"])
def test_a_fractional_batch_size_is_refused_on_its_line(tmp_path, batch):
    path = tmp_path / "loss.csv"
    path.write_text(f"step,loss,batch,workers\n0,2.5,64,1\n10,2.0,{batch},1\n")
    with pytest.raises(UsageError, match=rf"line 3: batch '{batch}' is not a whole number"):
        read_loss_csv(path)
    b, n, j = _grid()
    b = b.astype(float)
    b[-1] = float(batch)
    with pytest.raises(UsageError, match="whole batch >= 1"):
        curves(b, n, j, np.ones_like(b))
