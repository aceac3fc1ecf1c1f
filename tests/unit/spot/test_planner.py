"""spotDNN's sliding-window planner on a hand-made offer whose answers are worked out by hand.

Communication is made negligible (1-byte model), so a worker's iteration is its compute time, and the loss
model j = 10 sqrt((R + 1) n) / L with L = 0.1 gives j = 100 sqrt((R + 1) n):
  1 x A (1.0 s, $1/h): j = 100, T = 100 s, $0.0278      1 x B (0.25 s, $5/h): j = 100, T = 25 s, $0.0347
  2 x A: R = 0.707, j = 184.8, T_exp = 0.5 s, T = 92.4 s  B + A: T_exp = 0.2 s, R = 0.283, T = 32.0 s
"""

from __future__ import annotations

import math

import pytest

from stash_core.errors import UsageError
from stash_core.spot import InstanceOffer, Worker, Workload, evaluate, plan_spot_cluster, plan_table

WORKLOAD = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                    loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
A = Worker("A", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)
B = Worker("B", gpus=1, compute_s=0.25, batch=32, usd_per_h=5.0)
OFFERS = [InstanceOffer(A, 4), InstanceOffer(B, 2)]
LINKS = {"ps_Bps": 1e9, "pcie_Bps": 1e10}


def plan(budget_s, offers=OFFERS, **extra):
    return plan_spot_cluster(offers, WORKLOAD, 0.1, budget_s, **LINKS, **extra)


def test_hand_worked_candidates():
    one_a = evaluate([A], WORKLOAD, 0.1, 1e9, **LINKS)
    assert one_a.training_s == pytest.approx(100.0, rel=1e-4)
    assert one_a.cost_usd == pytest.approx(100.0 / 3600, rel=1e-4)
    two_a = evaluate([A, A], WORKLOAD, 0.1, 1e9, **LINKS)
    assert two_a.training_s == pytest.approx(100 * math.sqrt((math.sqrt(0.5) + 1) * 2) * 0.5, rel=1e-4)
    mixed = evaluate([B, A], WORKLOAD, 0.1, 1e9, **LINKS)
    assert mixed.iteration_s == pytest.approx(0.2, rel=1e-4)
    assert mixed.convergence == pytest.approx(math.sqrt(0.08), rel=1e-4)


def test_a_loose_budget_rents_the_cheapest_single_instance():
    result = plan(200.0)
    assert result.best.counts == {"A": 1}
    assert result.best.training_s == pytest.approx(100.0, rel=1e-4)


def test_a_tight_budget_pays_for_the_faster_instance():
    result = plan(50.0)
    # 1 x A (100 s) and 2..4 x A (>= 68 s) miss 50 s; of those that make it, 1 x B is cheapest
    assert result.best.counts == {"B": 1}
    assert result.best.cost_usd == pytest.approx(25.0 / 3600 * 5, rel=1e-4)
    assert all(p.cost_usd >= result.best.cost_usd for p in result.candidates if p.meets_budget)


def test_an_impossible_budget_says_what_the_fastest_cluster_needs():
    result = plan(10.0)
    assert result.best is None
    assert result.bounds[0] == 3  # eq. 16: 3200 samples at 128 samples/s in 10 s
    # the fastest of the clusters searched (a cluster below the bound may be faster, and still too slow)
    reason = result.infeasible_reason
    assert "no cluster of 3 to 6 workers trains within 10 s: the fastest of them, " in reason


def test_quotas_bound_the_cluster():
    result = plan(10.0, offers=[InstanceOffer(B, 2)])
    assert result.best is None
    assert "at least 3 workers" in result.infeasible_reason and "quotas" in result.infeasible_reason


def test_spot_and_on_demand_price_the_same_plan():
    spot = plan(200.0)
    # every price 3.3 times higher (as on-demand is over spot): the same plan, 3.3 times the cost
    dearer = [InstanceOffer(Worker(o.worker.instance, 1, o.worker.compute_s, 32, o.worker.usd_per_h * 3.3),
                            o.quota) for o in OFFERS]  # fmt: skip
    on_demand = plan(200.0, offers=dearer)
    assert on_demand.best.counts == spot.best.counts == {"A": 1}
    assert on_demand.best.cost_usd / spot.best.cost_usd == pytest.approx(3.3)


def test_revocation_overhead_is_added():
    assert plan(200.0, revocation_s=30.0).best.training_s == pytest.approx(130.0, rel=1e-4)


def test_table_lists_within_budget_first_by_cost():
    rows = plan_table(plan(50.0), limit=5)
    inside = [row for row in rows if row["within_budget"]]
    assert rows[0]["cluster"] == "1 x B"
    assert [row["cost_usd"] for row in inside] == sorted(row["cost_usd"] for row in inside)


def test_the_table_starts_with_the_plan_of_the_tie_rule_when_clusters_cost_the_same():
    """Two instance types alike in all but the name tie on every mix: the table's first row (what `stash
    spot --json` and the API call best) is the planner's own choice, the one its risk line is of."""
    twin = Worker("twin", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)  # A under another name
    slow = Worker("slow", gpus=1, compute_s=1.6, batch=32, usd_per_h=0.4)
    for offers in ([InstanceOffer(A, 3), InstanceOffer(twin, 3), InstanceOffer(slow, 6)],
                   [InstanceOffer(twin, 3), InstanceOffer(A, 3), InstanceOffer(slow, 6)]):  # fmt: skip
        result = plan(90.0, offers=offers)
        rows = plan_table(result, limit=10)
        tied = [row for row in rows if row["cost_usd"] == rows[0]["cost_usd"]]
        assert rows[0]["cluster"] == result.best.label() and len(tied) >= 2, rows


def test_bad_requests_are_refused():
    with pytest.raises(UsageError, match="no instances"):
        plan(10.0, offers=[])
    with pytest.raises(UsageError, match="quota of 0"):
        plan(10.0, offers=[InstanceOffer(A, 0)])
    with pytest.raises(UsageError, match="time budget"):
        plan(-1.0)


def test_a_batch_outside_the_loss_model_is_refused_not_free():
    """g2 b_w + g3 <= 0 would make j negative: a plan of zero seconds and zero dollars."""
    shrinking = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                         loss_g=(0.0, -1.0, 20.0, 1.0, 0.0))  # fmt: skip
    big = Worker("BIG", gpus=1, compute_s=0.5, batch=64, usd_per_h=1.0)  # -64 + 20 < 0
    small = Worker("SMALL", gpus=1, compute_s=1.0, batch=8, usd_per_h=2.0)  # -8 + 20 > 0
    outside = evaluate([big], shrinking, 0.1, 1e9, **LINKS)
    assert outside.outside_loss_model and not outside.meets_budget and outside.training_s == math.inf
    result = plan_spot_cluster([InstanceOffer(big, 1), InstanceOffer(small, 1)], shrinking, 0.1, 1e6, **LINKS)
    assert result.best is not None and result.best.counts == {"SMALL": 1} and result.best.cost_usd > 0
    with pytest.raises(
        UsageError, match="does not hold at any batch on offer: g2 x batch [+] g3 is -44 at batch 64 "
    ):
        plan_spot_cluster([InstanceOffer(big, 2)], shrinking, 0.1, 1e6, **LINKS)


def test_offering_a_smaller_batch_does_not_exclude_a_one_worker_plan():
    """g2 < 0 (j = 10 (10 - 0.1 b), L = 0.1): 1 x BIG (batch 96, 1 s) needs 4 iterations, 4 s. Offering a
    smaller type too must not raise the worker bound past it (eq. 16 at b_min alone asked 5 workers)."""
    falling = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                       loss_g=(0.0, -0.1, 10.0, 1.0, 0.0))  # fmt: skip
    big = Worker("BIG", gpus=1, compute_s=1.0, batch=96, usd_per_h=1.0)
    small = Worker("SMALL", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)
    alone = plan_spot_cluster([InstanceOffer(big, 1)], falling, 0.1, 5.0, **LINKS)
    both = plan_spot_cluster([InstanceOffer(big, 1), InstanceOffer(small, 4)], falling, 0.1, 5.0, **LINKS)
    assert alone.best is not None and alone.best.counts == {"BIG": 1}
    assert alone.best.training_s == pytest.approx(4.0, rel=1e-4)
    assert both.bounds[0] == 1 and both.best is not None and both.best.label() == alone.best.label()


def test_the_upper_bound_keeps_p_below_one_with_the_contention_margin():
    from stash_core.spot.model import ps_bottleneck_probability, worker_bounds

    for margin in (0.0, 0.05):
        workload = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.8, contention_b1=-1.92,
                            loss_g=(0.0, 0.0, 10.0, 1.0, 0.0), contention_margin=margin)  # fmt: skip
        _, upper = worker_bounds(workload, 0.1, 1e9, 32, 1e3)
        assert ps_bottleneck_probability(upper, workload) < 1.0
        assert ps_bottleneck_probability(upper + 1, workload) == 1.0
    assert upper == 12  # 13 without the margin (the public profile's a1, b1)


def test_a_plan_that_rests_on_one_coefficient_is_called_fragile():
    from stash_core.spot.fragility import fragile_coefficients

    # 1 x B meets 50 s with T = 25 s; 1 x A (T = 100 s) would need twice the budget: robust to 5% nudges
    robust = plan(50.0)
    assert fragile_coefficients(robust, OFFERS, WORKLOAD, 0.1, 50.0, **LINKS) == []
    # at a budget of 101 s, 1 x A (100 s) just fits: g3 +5% makes it miss and the plan changes
    edge = plan(101.0)
    assert edge.best.counts == {"A": 1}
    moved = fragile_coefficients(edge, OFFERS, WORKLOAD, 0.1, 101.0, **LINKS)
    assert "g3 +5%" in moved and "g3 -5%" not in moved


def test_quotas_beyond_the_upper_bound_change_nothing_and_cost_no_time():
    """n_upper = 100 here (a1 0.1, b1 0): 10,000 instances of A plan as 100 do, without wider windows."""
    capped = plan(150.0, offers=[InstanceOffer(A, 100), InstanceOffer(B, 2)])
    huge = plan(150.0, offers=[InstanceOffer(A, 10_000), InstanceOffer(B, 2)])
    assert huge.bounds == capped.bounds and huge.bounds[1] == 100
    assert huge.best.label() == capped.best.label() and len(huge.candidates) == len(capped.candidates)
    assert huge.best.cost_usd == pytest.approx(capped.best.cost_usd)


def test_a_search_too_large_to_run_is_refused_with_one_line():
    # no parameter-server limit (b1 far below 1, a1 tiny): nothing caps 5,000 instances
    open_ended = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=1e-9, contention_b1=-1.0,
                          loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
    with pytest.raises(UsageError, match="too many to evaluate"):
        plan_spot_cluster([InstanceOffer(A, 5_000)], open_ended, 0.1, 1e6, **LINKS)


BIG = Worker("BIG", gpus=1, compute_s=1.0, batch=64, usd_per_h=1.0)
SMALL = Worker("SMALL", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)
BOTH = [InstanceOffer(BIG, 2), InstanceOffer(SMALL, 2)]


@pytest.mark.parametrize(
    "g, offers, message",
    [
        ((-1.0, -1.0, -1.0, -1.0, -1.0), BOTH, "g4 = -1 is negative"),
        (
            (0.0, -1.0, -1.0, 1.0, -1.0),
            BOTH,
            "does not hold at any batch on offer: .* -33 at batch 32 and -65",
        ),
        ((0.0, -1.0, 40.0, 1.0, 0.0), [InstanceOffer(BIG, 2)], "is -24 at batch 64 [(]"),
        ((0.0, 0.0, 10.0, 1.0, 0.5), BOTH, "at or below the loss model's floor g5 = 0.5"),
    ],
)
def test_loss_coefficients_that_cannot_plan_are_refused(g, offers, message):
    with pytest.raises(UsageError, match=message):
        workload = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                            loss_g=g)  # fmt: skip
        plan_spot_cluster(offers, workload, 0.1, 1e6, **LINKS)


def test_each_distinct_window_is_evaluated_once_and_gives_what_evaluate_gives(monkeypatch):
    """A quota of 40 of one type and 3 of another: 862 windows but few distinct clusters. Every candidate
    equals evaluate() of its window, float for float (both sum over the types in the pool's order), and a
    cluster is evaluated once however many windows hold it."""
    import stash_core.spot.clusters as clusters

    workload = Workload(param_bytes=4e6, solo_bandwidth_Bps=1e8, contention_a1=0.1, contention_b1=0.2,
                        loss_g=(100.0, -0.01, 1000.0, 1.0, 0.3))  # fmt: skip
    offers = [InstanceOffer(A, 40), InstanceOffer(B, 3)]
    calls = []
    real = clusters.evaluate_counts
    monkeypatch.setattr(clusters, "evaluate_counts", lambda kinds, counts, *a, **k: calls.append(counts) or real(
        kinds, counts, *a, **k))  # fmt: skip
    result = plan_spot_cluster(offers, workload, 0.8, 1e6, **LINKS)
    lower, upper = result.bounds
    pool = sorted([A] * min(40, upper) + [B] * min(3, upper),
                  key=lambda w: (w is A, w.instance))  # B is faster alone: first  # fmt: skip
    windows = [pool[s : s + n] for n in range(lower, min(upper, len(pool)) + 1)
               for s in range(len(pool) - n + 1)]  # fmt: skip
    assert len(result.candidates) == len(windows) > 2 * len(calls)
    assert len(calls) == len(set(calls)) == len({tuple(w.instance for w in window) for window in windows})
    monkeypatch.setattr(clusters, "evaluate_counts", real)
    for got, window in zip(result.candidates, windows, strict=True):
        assert got == evaluate(window, workload, 0.8, 1e6, **LINKS)


def test_a_cluster_summed_by_type_is_the_paper_summed_by_worker():
    """Eqs. 2, 4 and 5 over three types of several workers each, by the model's per-worker functions."""
    from stash_core.spot.model import cluster_iteration_s, convergence_coefficient, weighted_batch

    c = Worker("C", gpus=2, compute_s=0.4, batch=128, usd_per_h=3.0)
    cluster = [B, B, A, A, A, c]
    times = [0.3, 0.3, 0.9, 0.9, 0.9, 0.5]
    plan = evaluate(cluster, WORKLOAD, 0.1, 1e9, **LINKS, times=times)
    batches = [w.batch for w in cluster]
    assert plan.iteration_s == pytest.approx(cluster_iteration_s(times), rel=1e-14)
    assert plan.weighted_batch == pytest.approx(weighted_batch(batches, times), rel=1e-14)
    assert plan.convergence == pytest.approx(convergence_coefficient(batches, times), rel=1e-14)
    assert plan.counts == {"A": 3, "B": 2, "C": 1} and plan.workers == 6
    assert plan.usd_per_h == pytest.approx(2 * B.usd_per_h + 3 * A.usd_per_h + 3.0)


def test_crossed_worker_bounds_are_said_as_none_searched():
    from stash_core.spot.planner import PlanResult, searched_workers

    text = searched_workers(PlanResult(best=None, bounds=(4815, 13)))
    assert text.startswith("none") and "at least 4,815" in text and "at most 13" in text
    searched = PlanResult(best=None, bounds=(2, 3), candidates=[evaluate([A] * n, WORKLOAD, 0.1, 1e9, **LINKS)
                                                                for n in (2, 3)])  # fmt: skip
    assert searched_workers(searched) == "2 to 3 (eqs. 15-16)"


def test_no_count_searched_where_the_quotas_hold_fewer_workers_than_the_budget_needs():
    """A budget of 30 s needs at least 4 workers of A (eq. 16) but 2 are offered: none is evaluated."""
    from stash_core.spot.planner import searched_workers

    result = plan(30.0, offers=[InstanceOffer(A, 2)])
    assert result.bounds == (4, 100) and not result.candidates  # 3,200 samples at 32 samples/s: 100 s alone
    assert searched_workers(result) == (
        "none (eqs. 15-16 need at least 4 workers within the budget; the offered instances hold fewer)"
    )
    said = "training within 30 s needs at least 4 workers but the quotas allow at most 2"
    assert result.infeasible_reason == said


def test_an_upper_bound_at_its_cap_is_said_as_no_bound_not_as_the_cap():
    from stash_core.spot.model import MAX_WORKER_BOUND
    from stash_core.spot.planner import searched_workers

    uncontended = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=1e-6, contention_b1=-1.0,
                           loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
    result = plan_spot_cluster([InstanceOffer(A, 4)], uncontended, 0.1, 1e6, **LINKS)
    assert result.bounds == (1, MAX_WORKER_BOUND)
    text = searched_workers(result)
    assert text == "1 to 4 (eqs. 15-16 set no upper bound that a quota reaches; the offered instances hold 4)"


def test_a_worker_bound_at_its_cap_is_said_in_words_and_an_overflowing_speed_is_refused():
    from stash_core.spot.planner import searched_workers
    from stash_core.spot.replan import replan

    slow = Worker("SLOW", gpus=1, compute_s=1e300, batch=32, usd_per_h=1.0)  # eq. 16 asks beyond the cap
    result = plan(3000.0, offers=[InstanceOffer(slow, 2)])
    assert result.infeasible_reason == (
        "training within 3,000 s needs over 1,000,000,000 workers but the quotas allow at most 2"
    )  # a figure: "more workers than any quota holds" gave none
    assert searched_workers(result).startswith("none (eqs. 15-16 need over 1,000,000,000 workers within")
    # 1 / T overflows: T_exp = 0 and b_w = 0 x inf, NaN: refused, never "needs nan s"
    instant = Worker("INSTANT", gpus=1, compute_s=1e-320, batch=32, usd_per_h=1.0)
    tiny = Workload(param_bytes=1e-314, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                    loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
    with pytest.raises(
        UsageError, match="INSTANT: an iteration of .* beyond what the model can compute with"
    ):
        plan_spot_cluster([InstanceOffer(instant, 2)], tiny, 0.1, 100.0, **LINKS)
    with pytest.raises(
        UsageError, match="INSTANT: an iteration of .* beyond what the model can compute with"
    ):
        replan([instant], [InstanceOffer(instant, 2)], tiny, 0.1, 0.2, 100.0, **LINKS)


def test_a_target_the_loss_starts_below_is_said_so():
    """A target above the model's loss before any training (g1 = 100: it starts near 0.1-0.3 here) was
    answered "the loss model does not hold at the batch sizes on offer ... refit g1..g5", the words of a
    model that fails, where the target is met untrained."""
    early = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                     loss_g=(100.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
    result = plan_spot_cluster(OFFERS, early, 0.5, 1e6, **LINKS)
    assert result.best is None and all(candidate.untrained for candidate in result.candidates)
    assert result.infeasible_reason.startswith("the loss model has the loss below the target 0.5 before any")
