"""The planner's exact search (every mix of counts, eqs. 11-14) against a brute force on small random
catalogs, the reviewer's catalog where the paper's window heuristic missed the cheapest cluster, and the
fallback to that heuristic on a catalog too large to search, said in the answer."""

from __future__ import annotations

import itertools
import math
import random

import pytest

import stash_core.spot.planner as planner
from stash_core.spot import InstanceOffer, Worker, Workload, evaluate, plan_spot_cluster
from stash_core.spot.model import most_workers
from stash_core.spot.planner import WINDOW_NOTE, searched_workers

# A workload file as tests/unit/cli/test_cli_spot.py writes one: compute times for the g3 types.
WORKLOAD_FILE = {
    "param_mb": 11.54, "solo_bandwidth_mbps": 142, "a1": 0.1, "b1": 0.2,
    "g": [100.0, -1.0, 1000.0, 1.0, 0.3], "batch_per_gpu": 128,
    "compute_s": {"g3.4xlarge": 0.9, "g3.8xlarge": 0.95, "g3.16xlarge": 1.0},
}  # fmt: skip

# examples/workload.json: the paper's ResNet-110 (11.54 MB, 142 MB/s, a1 0.8, b1 -1.92, g1..g5)
EXAMPLE = Workload(11.54e6, 142e6, 0.8, -1.92, (876.5, -0.2, 1903.6, 1.0, 0.5))
LINKS = {"ps_Bps": 1.2e9, "pcie_Bps": 10e9}
REVIEWED = [
    InstanceOffer(Worker("t0", 1, 1.21, 128, 2.50), 2),
    InstanceOffer(Worker("t1", 4, 0.76, 512, 2.57), 3),
    InstanceOffer(Worker("t2", 1, 1.09, 512, 1.45), 3),
    InstanceOffer(Worker("t3", 8, 1.31, 4096, 11.75), 3),
]


def test_a_cheaper_mix_that_skips_a_type_in_speed_order_is_found():
    """Sorted by speed the types are t1, t2, t0, t3: 3 x t1 + 3 x t2 + 1 x t3 skips t0, so no window holds
    it, and the windows' best (2 x t0 + 3 x t1 + 3 x t2 + 1 x t3, 4158 s, $33.28) cost $4.26 more."""
    result = plan_spot_cluster(REVIEWED, EXAMPLE, 0.70, 4400.0, **LINKS)
    assert result.best.label() == "3 x t1 + 3 x t2 + 1 x t3"
    assert result.best.training_s == pytest.approx(4387, abs=0.5)
    assert result.best.cost_usd == pytest.approx(29.02, abs=0.005)
    assert result.search == "exact"
    assert WINDOW_NOTE not in searched_workers(result)


def test_the_window_heuristic_misses_it_and_says_so(monkeypatch):
    monkeypatch.setattr(planner, "MAX_EXACT_MIXES", 0)  # as if the catalog were too large to search
    result = plan_spot_cluster(REVIEWED, EXAMPLE, 0.70, 4400.0, **LINKS)
    assert result.search == "window"
    assert result.best.label() == "2 x t0 + 3 x t1 + 3 x t2 + 1 x t3"
    assert result.best.cost_usd == pytest.approx(33.28, abs=0.005)
    assert searched_workers(result).endswith(f"; {WINDOW_NOTE}")


def brute_force_cost(offers, workload, target_loss, budget_s):
    """The least cost over every count vector n_m <= quota_m with 1..n_upper workers, None if none meets
    the budget (eqs. 11-14 as written, no bound of eq. 16 and no ordering)."""
    upper = most_workers(workload)
    best = None
    for counts in itertools.product(*(range(o.quota + 1) for o in offers)):
        if not 1 <= sum(counts) <= upper:
            continue
        cluster = [o.worker for o, k in zip(offers, counts, strict=True) for _ in range(k)]
        plan = evaluate(cluster, workload, target_loss, budget_s, **LINKS)
        if plan.meets_budget and (best is None or plan.cost_usd < best):
            best = plan.cost_usd
    return best


def random_catalog(rng: random.Random) -> list[InstanceOffer]:
    offers = []
    for m in range(rng.randint(2, 4)):
        gpus = rng.choice([1, 2, 4, 8])
        worker = Worker(f"t{m}", gpus, round(rng.uniform(0.5, 1.5), 2), 128 * gpus * rng.choice([1, 2, 4]),
                        round(gpus * rng.uniform(0.3, 1.6), 2))  # fmt: skip
        offers.append(InstanceOffer(worker, rng.randint(1, 4)))
    return offers


def test_the_plan_costs_the_brute_force_minimum_on_random_catalogs(monkeypatch):
    rng = random.Random(20231)
    beaten = 0  # catalogs where the window heuristic pays more than the exact search: the test's teeth
    for _ in range(60):
        offers = random_catalog(rng)
        target_loss = rng.choice([0.7, 0.8, 1.0])
        budget_s = rng.uniform(1500, 9000)
        want = brute_force_cost(offers, EXAMPLE, target_loss, budget_s)
        got = plan_spot_cluster(offers, EXAMPLE, target_loss, budget_s, **LINKS)
        if want is None:
            assert got.best is None and got.infeasible_reason
            continue
        assert got.best is not None and got.best.meets_budget
        assert got.best.cost_usd == pytest.approx(want, rel=1e-9)
        assert got.search == "exact"
        with monkeypatch.context() as patched:
            patched.setattr(planner, "MAX_EXACT_MIXES", 0)
            window = plan_spot_cluster(offers, EXAMPLE, target_loss, budget_s, **LINKS).best
        beaten += window is None or window.cost_usd > want * (1 + 1e-9)
    assert beaten >= 3


def test_a_tie_goes_to_the_fewest_workers_then_to_the_faster_types():
    """Two types of one speed and price: sorted by name, the first wins the tie (as its window would)."""
    uncontended = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                           loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
    a, b = Worker("A", 1, 1.0, 32, 1.0), Worker("B", 1, 1.0, 32, 1.0)
    result = plan_spot_cluster([InstanceOffer(b, 3), InstanceOffer(a, 3)], uncontended, 0.1, 200.0, **LINKS)
    assert result.search == "exact" and result.best.counts == {"A": 1}


def test_a_catalog_too_large_to_search_falls_back_to_windows_and_says_so():
    """Eight types of quota 13 below n_upper = 13 (the example's a1, b1): some 200,000 mixes."""
    offers = [InstanceOffer(Worker(f"t{m}", 1, 0.8 + 0.05 * m, 512, 0.5 + 0.1 * m), 13) for m in range(8)]
    result = plan_spot_cluster(offers, EXAMPLE, 0.8, 3000.0, **LINKS)
    assert result.search == "window" and result.best is not None
    assert searched_workers(result).endswith(f"; {WINDOW_NOTE}")
    assert not planner.exact_search_fits([13] * 8, 1, 13) and planner.exact_search_fits([3] * 4, 1, 12)


def test_the_mixes_are_every_count_vector_once_in_the_windows_order():
    got = list(planner.mix_counts([2, 1, 2], 2, 3))
    want = sorted((v for v in itertools.product(range(3), range(2), range(3)) if 2 <= sum(v) <= 3),
                  key=lambda v: (sum(v), [-k for k in v]))  # fmt: skip
    assert got == want
    assert math.prod(c + 1 for c in [2, 1, 2]) == 18  # of which 10 hold 2 or 3 workers
    assert len(got) == 10


def test_a_window_answer_is_not_called_the_cheapest_on_the_command_line(monkeypatch, tmp_path, capsys):
    """The window heuristic may miss a cheaper mix: `stash spot` says "cheapest found" then, and its JSON
    which search it was."""
    import json

    from stash_core.cli.main import main

    monkeypatch.setattr(planner, "MAX_EXACT_MIXES", 0)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD_FILE))
    argv = ["spot", "--workload", str(workload), "--instances", "g3.4xlarge:4,g3.8xlarge:5,g3.16xlarge:3",
            "--target-loss", "0.8", "--budget-s", "3000", "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cheapest found: " in out and "a cheaper mix may exist" in out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["search"] == "window"


def test_the_mixes_of_a_large_catalog_step_only_through_the_kinds_they_hold():
    """A mix stepped through every kind of the catalog: 140 kinds took 1.4 s a plan, and 1,000 kinds of
    quota 1 overflowed the stack (one recursion per kind)."""
    def held(counts: tuple[int, ...]) -> list[int]:  # the kinds a mix holds, as many times as it holds each
        return [kind for kind, count in enumerate(counts) for _ in range(count)]

    kinds = list(range(3000))
    singles = [held(counts) for counts in planner.mix_counts([1] * 3000, 1, 1)]
    assert singles == [[kind] for kind in kinds]
    pairs = [held(counts) for counts in planner.mix_counts([1] * 140, 2, 2)]
    assert len(pairs) == 140 * 139 // 2 and pairs[0] == [0, 1] and pairs[-1] == [138, 139]


def test_a_replan_costs_the_brute_force_minimum_with_the_running_instances_kept(monkeypatch):
    """spot-replan slid windows only: a cheaper mix of the offered kinds beside the running ones was
    missed."""
    from stash_core.spot.replan import remaining_plan, replan

    rng = random.Random(7)
    beaten = 0
    for _ in range(40):
        offers = random_catalog(rng)
        running = [offers[0].worker]  # one instance of the first kind still runs
        left = [InstanceOffer(o.worker, o.quota - (o is offers[0])) for o in offers]
        target_loss, current_loss, budget_s = rng.choice([0.7, 0.8]), 1.5, rng.uniform(1000, 6000)
        upper = most_workers(EXAMPLE)
        want = None
        for counts in itertools.product(*(range(o.quota + 1) for o in left)):
            if len(running) + sum(counts) > upper:
                continue
            cluster = [*running, *(o.worker for o, k in zip(left, counts, strict=True) for _ in range(k))]
            plan = remaining_plan(cluster, EXAMPLE, target_loss, current_loss, budget_s, **LINKS)
            if plan.meets_budget and (want is None or plan.cost_usd < want):
                want = plan.cost_usd
        got = replan(running, offers, EXAMPLE, target_loss, current_loss, budget_s, **LINKS)
        assert got.search == "exact"
        assert (got.best is None) == (want is None)
        if want is not None:
            assert got.best.cost_usd == pytest.approx(want, rel=1e-9)
            with monkeypatch.context() as patched:
                patched.setattr(planner, "MAX_EXACT_MIXES", 0)
                window = replan(running, offers, EXAMPLE, target_loss, current_loss, budget_s, **LINKS).best
            beaten += window is None or window.cost_usd > want * (1 + 1e-9)
    assert beaten >= 1
