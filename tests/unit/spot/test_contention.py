"""a1, b1 of eq. 9 fitted from bandwidth-profile points; the workload fields and their refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stash_core.errors import UsageError
from stash_core.spot.contention import (
    bandwidth_errors,
    fit_contention,
    merged_compute_s,
    replaced_job_notes,
    workload_fields,
)
from stash_core.spot.ps_exchanges import CountMeasure
from stash_core.spot.workload_profile import ContentionProfile


def test_the_fit_recovers_known_coefficients_from_synthetic_observations():
    a1, b1 = 0.21, -0.18
    rng = np.random.default_rng(3)
    points = [(n, a1 * math.sqrt(n) + b1 + rng.normal(0, 0.005)) for n in (2, 3, 4, 5, 6, 7)]
    fit = fit_contention(points)
    assert fit.a1 == pytest.approx(a1, abs=0.02) and fit.b1 == pytest.approx(b1, abs=0.04)
    assert 0 < fit.rms_error < 0.01 and fit.max_error >= fit.rms_error


def test_eq8_with_the_fitted_p_reproduces_synthetic_bandwidths():
    """Bandwidths made by eq. 8 from known a1, b1, B_req, B_ps: P recovered from them, then eq. 8 again."""
    a1, b1, solo, ps = 0.3, -0.2, 600e6, 1000e6
    measured, points = [], []
    for n in (2, 4, 7):
        p = a1 * math.sqrt(n) + b1
        bandwidth = p * ps / n + (1 - p) * solo
        measured.append((n, bandwidth))
        points.append((n, (solo - bandwidth) / (solo - ps / n)))  # eq. 8 solved for P
    fit = fit_contention(points)
    assert (fit.a1, fit.b1) == (pytest.approx(a1), pytest.approx(b1))
    assert all(row["rel_error"] < 1e-9 for row in bandwidth_errors(fit, solo, ps, measured))


def test_one_worker_count_is_not_enough():
    with pytest.raises(UsageError, match="two worker counts"):
        fit_contention([(1, 0.0), (4, 0.5), (4, 0.6)])


def _measure(n, bandwidth_Bps, p):
    return CountMeasure(n, 50, bandwidth_Bps, (bandwidth_Bps, bandwidth_Bps), p, 900e6, 0.01)


def test_workload_fields_carry_b_req_s_parm_and_the_fit():
    profile = ContentionProfile("m", 16, 1_000_000, [_measure(1, 800e6, 0.0), _measure(2, 500e6, 0.3),
                                                     _measure(4, 300e6, 0.6)], ["a note"])  # fmt: skip
    fields = workload_fields(profile, fit_contention([(2, 0.3), (4, 0.6)]))
    assert fields["param_bytes"] == 4_000_000 and fields["solo_bandwidth_mbps"] == pytest.approx(800)
    assert fields["a1"] > 0 and fields["batch_per_gpu"] == 16 and fields["ps_bandwidth_mbps"] == 900
    assert fields["contention_fit"]["notes"] == ["a note"] and len(fields["contention_fit"]["bandwidth"]) == 3


def test_contention_that_does_not_grow_is_refused():
    profile = ContentionProfile("m", 16, 10, [_measure(1, 8e6, 0.0), _measure(2, 5e6, 0.5),
                                              _measure(4, 5e6, 0.4)], [])  # fmt: skip
    with pytest.raises(UsageError, match="does not grow"):
        workload_fields(profile, fit_contention([(2, 0.5), (4, 0.4)]))
    without_solo = ContentionProfile("m", 16, 10, [_measure(2, 5e6, 0.3), _measure(4, 4e6, 0.6)], [])
    with pytest.raises(UsageError, match="one worker alone"):
        workload_fields(without_solo, fit_contention([(2, 0.3), (4, 0.6)]))


def test_a_profile_of_another_model_or_batch_keeps_none_of_the_files_compute_times():
    """The example's ResNet-110 times at batch 512 were kept (and printed as T_comp) after a profile of a tiny
    model at batch 8; `stash spot` then planned with them."""
    times = {"g3.8xlarge": 0.839, "g3.16xlarge": 0.855}
    old = {"model": "resnet110", "batch_per_gpu": 512, "compute_s": times}
    found = {"g3.8xlarge": 0.01}
    assert merged_compute_s(old, "tiny.py:make", 8, found) == found
    assert merged_compute_s(old, "resnet110", 8, found) == found
    assert merged_compute_s(old, "resnet110", 512, found) == {"g3.8xlarge": 0.01, "g3.16xlarge": 0.855}
    assert merged_compute_s({}, "resnet110", 512, {}) == {}
    zoo = {"model": "resnet18", "batch_per_gpu": 32, "compute_s": {"g3.8xlarge": 0.8}}
    assert merged_compute_s(zoo, " ResNet18", 32, {}) == {"g3.8xlarge": 0.8}  # the zoo builds it as resnet18


def test_what_a_profile_of_another_job_leaves_out_or_keeps_is_said():
    """spot-profile dropped the file's compute times of another job unsaid ("written to wp.json" alone), and
    the next `stash spot` failed on a compute time it had a moment before."""
    old = {"model": "resnet110", "batch_per_gpu": 512, "compute_s": {"g3.8xlarge": 0.8, "g3.16xlarge": 0.9},
           "g": [1.0, 2.0, 3.0, 4.0, 5.0]}  # fmt: skip
    found = {"g3.8xlarge": 0.01}
    (dropped, loss) = replaced_job_notes(old, "resnet10", 8, merged_compute_s(old, "resnet10", 8, found))
    assert dropped == ("compute_s of g3.16xlarge left out: the file's were of resnet110 at batch 512 per "
                       "GPU, this profile is of resnet10 at batch 8")  # fmt: skip
    assert loss.startswith("g (the loss model) is still the file's, fitted for resnet110")
    # the same model at another batch: its g stands (the loss model takes the batch), its times do not
    assert len(replaced_job_notes(old, "resnet110", 8, found)) == 1
    assert replaced_job_notes(old, "resnet110", 512, merged_compute_s(old, "resnet110", 512, found)) == []
    unnamed = {key: value for key, value in old.items() if key != "model"}  # as examples/workload.json
    assert "the file's were of a model the file does not name at batch 512" in replaced_job_notes(
        unnamed, "resnet10", 8, found)[0]
