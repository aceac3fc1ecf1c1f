"""Re-planning after a revocation, on the hand-worked offer of test_planner.py.

Communication is negligible and j = 10 sqrt((R + 1) n) / L (g = 0, 0, 10, 1, 0), target L = 0.1. A (1.0 s,
$1/h) is still running and the loss stands at 0.2:
  A alone:  j_now = 10 / 0.2 = 50 of 100, 50 iterations of 1 s left: 50 s, $0.0139
  A + B:    T_exp = 0.2 s, R = sqrt(0.08), c = 10 sqrt(2 (1 + R)) = 16.018; j_now = c / 0.2 = 80.09 of
            c / 0.1 = 160.18, 80.09 iterations of 0.2 s left: 16.02 s at $6/h, $0.0267
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from stash_core.errors import UsageError
from stash_core.spot import InstanceOffer, Worker, Workload
from stash_core.spot.replan import loss_after, remaining_plan, replan

WORKLOAD = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                    loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
A = Worker("A", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)
B = Worker("B", gpus=1, compute_s=0.25, batch=32, usd_per_h=5.0)
LINKS = {"ps_Bps": 1e9, "pcie_Bps": 1e10}
MIXED_S = 10 * math.sqrt(2 * (1 + math.sqrt(0.08))) / 0.2 * 0.2


def test_what_is_left_of_the_loss_on_a_running_cluster():
    alone = remaining_plan([A], WORKLOAD, 0.1, 0.2, 1e9, **LINKS)
    assert alone.iterations == pytest.approx(50.0, rel=1e-4)
    assert alone.training_s == pytest.approx(50.0, rel=1e-4)
    mixed = remaining_plan([A, B], WORKLOAD, 0.1, 0.2, 1e9, **LINKS)
    assert mixed.training_s == pytest.approx(MIXED_S, rel=1e-4)
    assert mixed.cost_usd == pytest.approx(MIXED_S / 3600 * 6, rel=1e-4)


def test_a_loose_budget_keeps_the_running_instance_alone():
    result = replan([A], [InstanceOffer(A, 2), InstanceOffer(B, 1)], WORKLOAD, 0.1, 0.2, 60.0, **LINKS)
    assert result.best.counts == {"A": 1}
    assert result.best.training_s == pytest.approx(50.0, rel=1e-4)


def test_a_tight_budget_adds_the_fast_instance_to_the_running_one():
    result = replan([A], [InstanceOffer(A, 1), InstanceOffer(B, 1)], WORKLOAD, 0.1, 0.2, 30.0, **LINKS)
    assert result.best.counts == {"A": 1, "B": 1}  # A's quota of 1 is the running A: no second A
    assert result.best.training_s == pytest.approx(MIXED_S, rel=1e-4)
    assert all("A" in plan.counts for plan in result.candidates)  # the running instance is in every one


def test_the_revocation_overhead_counts_against_what_is_left():
    result = replan([A], [InstanceOffer(B, 1)], WORKLOAD, 0.1, 0.2, 60.0, **LINKS, revocation_s=15.0)
    assert result.best.counts == {"A": 1, "B": 1}  # A alone needs 50 + 15 = 65 s > 60 s
    assert result.best.training_s == pytest.approx(MIXED_S + 15.0, rel=1e-4)
    none = replan([A], [InstanceOffer(B, 1)], WORKLOAD, 0.1, 0.2, 20.0, **LINKS, revocation_s=15.0)
    assert none.best is None and "within the 20 s left" in none.infeasible_reason


def test_the_loss_moves_along_the_clusters_curve():
    alone = remaining_plan([A], WORKLOAD, 0.1, 0.2, 1e9, **LINKS)
    assert loss_after(alone, WORKLOAD, 0.1, 0.2, 50.0) == pytest.approx(0.1, rel=1e-4)  # j = 50 + 50
    assert loss_after(alone, WORKLOAD, 0.1, 0.2, 25.0) == pytest.approx(10 / 75, rel=1e-4)
    assert loss_after(alone, WORKLOAD, 0.1, 0.2, 1e6) == pytest.approx(0.1)  # never below the target


@pytest.mark.parametrize(
    "g, current, message",
    [
        ((0.0, -1.0, -1.0, 1.0, -1.0), 0.2, "does not hold at any batch on offer"),
        ((0.0, 0.0, 10.0, 1.0, 0.15), 0.2, "target loss 0.1 is at or below the loss model's floor g5 = 0.15"),
    ],
)
def test_replan_refuses_loss_coefficients_as_the_planner_does(g, current, message):
    workload = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                        loss_g=g)  # fmt: skip
    with pytest.raises(UsageError, match=message):
        replan([A], [InstanceOffer(A, 2), InstanceOffer(B, 2)], workload, 0.1, current, 1e6, **LINKS)


def test_replan_offers_no_more_than_the_upper_bound():
    """n_upper = 100: a quota of 10,000 gives the same answer as 100, in as few candidates."""
    few = replan([A], [InstanceOffer(A, 100), InstanceOffer(B, 2)], WORKLOAD, 0.1, 0.2, 60.0, **LINKS)
    many = replan([A], [InstanceOffer(A, 10_000), InstanceOffer(B, 2)], WORKLOAD, 0.1, 0.2, 60.0, **LINKS)
    assert many.bounds == few.bounds == (1, 100)
    assert many.best.label() == few.best.label() and len(many.candidates) == len(few.candidates)


def test_each_distinct_window_is_planned_once_and_every_candidate_is_its_remaining_plan(monkeypatch):
    import stash_core.spot.clusters as clusters

    workload = Workload(param_bytes=4e6, solo_bandwidth_Bps=1e8, contention_a1=0.1, contention_b1=0.2,
                        loss_g=(100.0, -0.01, 1000.0, 1.0, 0.3))  # fmt: skip
    calls = []
    real = clusters.evaluate_counts
    monkeypatch.setattr(clusters, "evaluate_counts", lambda kinds, counts, *a, **k: calls.append(
        [kind for kind, count in zip(kinds, counts, strict=True) for _ in range(count)]
    ) or real(kinds, counts, *a, **k))
    result = replan([A], [InstanceOffer(A, 30), InstanceOffer(B, 2)], workload, 0.8, 2.0, 1e6, **LINKS)
    distinct = {tuple(sorted(w.instance for w in cluster)) for cluster in calls}
    assert len(calls) == len(distinct) and 2 * len(calls) < len(result.candidates)
    assert all(sum(w is A for w in cluster) >= 1 for cluster in calls)  # the running A is in every one
    monkeypatch.setattr(clusters, "evaluate_counts", real)
    planned = {tuple(sorted(plan.counts.items())): plan for plan in result.candidates}
    assert len(planned) == len(calls)
    for cluster in calls:  # each the remaining plan of its cluster, summed by worker in any order
        plan = planned[tuple(sorted(Counter(w.instance for w in cluster).items()))]
        expected = remaining_plan(cluster[::-1], workload, 0.8, 2.0, 1e6, *LINKS.values(), 0.0)
        assert plan.label() == expected.label() and plan.meets_budget == expected.meets_budget
        for field in ("iteration_s", "weighted_batch", "convergence", "iterations", "training_s", "cost_usd"):
            assert getattr(plan, field) == pytest.approx(getattr(expected, field), rel=1e-12), field


def test_a_replan_outside_the_loss_model_says_so_not_that_time_ran_out():
    """g2 b + g3 = 10 - 0.1 b: it holds at batch 32 but not at 200; three BIG (batch 200) running, with or
    without a SMALL (b_w 158), are all outside the loss model: the budget is not what fails."""
    shrinking = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                         loss_g=(0.0, -0.1, 10.0, 1.0, 0.0))  # fmt: skip
    big = Worker("BIG", gpus=1, compute_s=1.0, batch=200, usd_per_h=1.0)
    small = Worker("SMALL", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)
    offers = [InstanceOffer(big, 3), InstanceOffer(small, 1)]
    result = replan([big] * 3, offers, shrinking, 0.1, 0.2, 1e6, **LINKS)
    assert result.best is None and result.candidates
    assert result.infeasible_reason.startswith("the loss model does not hold at the batch sizes on offer")


def test_a_replan_that_evaluates_no_cluster_does_not_blame_the_loss_model():
    """A parameter server that saturates before one worker (eq. 15 allows none) leaves no candidate: the
    loss model, which holds at the batch on offer (g2 b + g3 > 0), is not what fails."""
    saturated = Workload(param_bytes=7e6, solo_bandwidth_Bps=1e9, contention_a1=0.1, contention_b1=1.0,
                         loss_g=(10.0, 0.001, 1.0, 4.0, 0.1))  # fmt: skip
    worker = Worker("W", gpus=2, compute_s=0.1, batch=64, usd_per_h=1.0)
    result = replan([], [InstanceOffer(worker, 4)], saturated, 0.5, 2.0, 3600, **LINKS)
    assert result.best is None and not result.candidates
    assert result.infeasible_reason.startswith("the parameter server saturates before 1 worker(s)")


def test_a_loss_model_whose_iterations_overflow_leaves_no_plan_not_a_free_one():
    """With g4 = 1e308, eq. 3's sqrt((R + g4) n) overflows: j = inf, and what is left, inf - inf, was taken
    for nothing left (max(0.0, NaN) is 0.0): a 30 s, $0.01 re-plan where `stash spot` says there is none."""
    huge = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                    loss_g=(0.0, 0.0, 10.0, 1e308, 0.0))  # fmt: skip
    left = remaining_plan([A, A], huge, 0.1, 0.2, 1e9, **LINKS)
    assert left.iterations == math.inf and not left.meets_budget
    assert replan([A], [InstanceOffer(A, 2)], huge, 0.1, 0.2, 60.0, **LINKS).best is None


def test_a_tie_between_mixes_of_identical_types_keeps_the_first_found():
    """Summed by type, 7 x a + 2 x b and 6 x a + 3 x b of two identical types differ in the last bit, where
    summed by worker they did not: the later mix won the tie (the planner keeps the first found)."""
    from stash_core.spot.simulate import without_contention

    example = Workload(param_bytes=11.54e6, solo_bandwidth_Bps=142e6 / 8, contention_a1=0.8,
                       contention_b1=-1.92, loss_g=(876.5, -0.2, 1903.6, 1.0, 0.5))  # fmt: skip
    a, b = (Worker(name, gpus=1, compute_s=0.8387, batch=1024, usd_per_h=0.3) for name in "ab")
    offers = [InstanceOffer(a, 7), InstanceOffer(b, 11)]
    result = replan([], offers, without_contention(example), 0.8, 3.0, 5000, 1.2e9, 1e10, 30)
    assert result.search == "exact" and result.best.label() == "7 x a + 2 x b"
