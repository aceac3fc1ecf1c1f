"""The spotDNN equations against values worked out by hand and the paper's own figures."""

from __future__ import annotations

import math

import pytest

from stash_core.errors import UsageError
from stash_core.spot.model import (
    Worker,
    Workload,
    cluster_iteration_s,
    convergence_coefficient,
    iterations_to_loss,
    least_samples,
    predicted_loss,
    ps_bottleneck_probability,
    weighted_batch,
    worker_bandwidth_Bps,
    worker_bounds,
    worker_iteration_s,
)

WORKLOAD = Workload(
    param_bytes=11.54e6, solo_bandwidth_Bps=142e6, contention_a1=0.1, contention_b1=0.2,
    loss_g=(50.0, -0.001, 2.0, 1.0, 0.3),
)  # fmt: skip


@pytest.mark.parametrize("n, expected", [(2, 0.71), (3, 0.82), (4, 0.87)])
def test_identical_workers_give_the_papers_convergence_coefficients(n, expected):
    assert convergence_coefficient([32] * n, [0.5] * n) == pytest.approx(expected, abs=0.005)
    assert convergence_coefficient([32] * n, [0.5] * n) == pytest.approx(math.sqrt((n - 1) / n))


def test_one_worker_has_no_staleness():
    assert convergence_coefficient([64], [0.3]) == 0.0


def test_asynchronous_workers_add_their_rates():
    # 1 / (1/0.25 + 1/1.0) = 0.2 s per normalised iteration
    assert cluster_iteration_s([0.25, 1.0]) == pytest.approx(0.2)
    # identical workers: the batch average is the batch, a faster worker pulls it towards its own
    assert weighted_batch([32, 32, 32], [0.5, 0.5, 0.5]) == pytest.approx(32)
    assert weighted_batch([64, 32], [0.25, 1.0]) == pytest.approx((64 / 0.25 + 32 / 1.0) * 0.2)


def test_uneven_shares_raise_the_coefficient():
    # speeds 128 and 32 samples/s: shares 0.8 and 0.2, R = sqrt(0.2^2 + 0.2^2)
    assert convergence_coefficient([32, 32], [0.25, 1.0]) == pytest.approx(math.sqrt(0.08))


def test_bandwidth_is_the_solo_need_until_the_ps_share_is_smaller():
    ps_Bps = 1.2e9
    assert worker_bandwidth_Bps(4, WORKLOAD, ps_Bps) == WORKLOAD.solo_bandwidth_Bps  # 300 MB/s each > 142
    p = ps_bottleneck_probability(16, WORKLOAD)  # 0.1 x 4 + 0.2
    assert p == pytest.approx(0.6)
    assert worker_bandwidth_Bps(16, WORKLOAD, ps_Bps) == pytest.approx(0.6 * 75e6 + 0.4 * 142e6)
    assert ps_bottleneck_probability(100, WORKLOAD) == 1.0  # capped


def test_a_worker_never_gets_more_than_the_parameter_servers_bandwidth():
    """At 125 B/s (1 kbit/s) eq. 8 still gave each of 16 workers 40% of its solo 142 MB/s."""
    assert worker_bandwidth_Bps(16, WORKLOAD, 125.0) == 125.0
    assert worker_bandwidth_Bps(16, WORKLOAD, 1.2e9) == pytest.approx(0.6 * 75e6 + 0.4 * 142e6)  # unchanged


def test_the_contention_margin_over_predicts_the_bottleneck():
    careful = Workload(**{**WORKLOAD.__dict__, "contention_margin": 0.05})
    assert ps_bottleneck_probability(16, careful) == pytest.approx(0.6 * 1.05)


def test_worker_iteration_adds_push_pull_and_pcie():
    worker = Worker("g3.8xlarge", gpus=2, compute_s=0.4, batch=256, usd_per_h=0.69)
    expected = 0.4 + 2 * 11.54e6 / 142e6 + 2 * 2 * 11.54e6 / 10e9
    assert worker_iteration_s(worker, 2, WORKLOAD, 1.2e9, 10e9) == pytest.approx(expected)


def test_iterations_to_loss_inverts_the_loss_model():
    j = iterations_to_loss(200.0, 0.71, 2, 0.8, WORKLOAD.loss_g)
    assert predicted_loss(200.0, 0.71, 2, j, WORKLOAD.loss_g) == pytest.approx(0.8)
    # (g2 b + g3) sqrt((R + g4) n) / (L - g5) - g1 with b = 200: 1.8 x sqrt(3.42) / 0.5 - 50
    assert j == pytest.approx(1.8 * math.sqrt(1.71 * 2) / 0.5 - 50)
    with pytest.raises(UsageError, match="floor"):
        iterations_to_loss(200.0, 0.71, 2, 0.3, WORKLOAD.loss_g)


def test_worker_bounds():
    # upper: ((1 - 0.2) / 0.1)^2 = 64
    assert worker_bounds(WORKLOAD, 0.8, budget_s=1.0, smallest_batch=32, fastest_speed=100.0)[1] == 64
    # lower: one worker of batch 32 needs 32 x (10 x sqrt(1) / 0.1) = 3200 samples; at 128 samples/s
    # that is 25 s, so a 10 s budget needs ceil(3200 / 1280) = 3 workers
    simple = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                      loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
    assert worker_bounds(simple, 0.1, budget_s=10.0, smallest_batch=32, fastest_speed=128.0) == (3, 100)
    assert worker_bounds(simple, 0.1, budget_s=100.0, smallest_batch=32, fastest_speed=128.0)[0] == 1


def test_the_lower_bound_takes_the_least_samples_over_the_batches_on_offer():
    # g2 < 0: b j1(b) = b (10 (-0.1 b + 10)) = b (100 - b): 2176 samples at batch 32 but 384 at batch 96.
    # At 128 samples/s and 1 s, eq. 16 at b_min alone would ask 17 workers; a 96-batch worker needs 3.
    falling = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                       loss_g=(0.0, -0.1, 10.0, 1.0, 0.0))  # fmt: skip
    assert worker_bounds(falling, 0.1, 1.0, 32, 128.0)[0] == 17
    assert worker_bounds(falling, 0.1, 1.0, 32, 128.0, largest_batch=96)[0] == 3
    # g2 > 0: b (b - 50) curves upwards; its least between 10 and 40 is at its vertex, 25: -625
    assert least_samples((50.0, 0.1, 0.0, 1.0, 0.0), 0.1, 10, 40) == pytest.approx(-625.0)
    assert least_samples((50.0, 0.1, 0.0, 1.0, 0.0), 0.1, 30, 40) == pytest.approx(-600.0)


def test_a_bad_workload_is_refused():
    with pytest.raises(UsageError, match="param_bytes"):
        Workload(param_bytes=0, solo_bandwidth_Bps=1, contention_a1=0.1, contention_b1=0, loss_g=(0,) * 5)
    with pytest.raises(UsageError, match="g1..g5"):
        Workload(param_bytes=1, solo_bandwidth_Bps=1, contention_a1=0.1, contention_b1=0, loss_g=(0, 1))
