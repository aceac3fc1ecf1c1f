"""Intervals from several launches per run, in rounds: the pooling math, and drift that the interleaving
cancels (stats.pool_rounds, stats.combination_by_round, stalls.breakdown with rounds)."""

from __future__ import annotations

import math

import pytest

from stash_core.analysis.stalls import REMAINDER, PhaseTime, breakdown
from stash_core.analysis.stats import combination_by_round, pool_rounds, resolved
from stash_core.engine.plan import PhasePlan, round_order


def test_rounds_that_disagree_give_the_student_t_interval_over_rounds() -> None:
    pooled = pool_rounds([1.0, 1.2, 1.1], [0.01, 0.01, 0.01])
    assert pooled.mean == pytest.approx(1.1)
    # sd of the rounds 0.1, t(2 dof) = 4.303: 4.303 * 0.1 / sqrt(3)
    assert pooled.between_ci95 == pytest.approx(4.303 * 0.1 / math.sqrt(3))
    assert pooled.within_ci95 == pytest.approx(math.sqrt(3 * 0.01**2) / 3)
    assert pooled.ci95 == pooled.between_ci95 and pooled.rounds == 3


def test_rounds_that_agree_keep_the_interval_of_their_iterations() -> None:
    pooled = pool_rounds([2.0, 2.0, 2.0, 2.0], [0.04, 0.04, 0.04, 0.04])
    assert pooled.between_ci95 == 0.0
    assert pooled.ci95 == pytest.approx(0.02)  # sqrt(4 * 0.04^2) / 4: the floor


def test_one_round_is_one_launch_as_before() -> None:
    pooled = pool_rounds([0.5], [0.03])
    assert (pooled.mean, pooled.ci95, pooled.between_ci95) == (0.5, 0.03, None)
    with pytest.raises(ValueError):
        pool_rounds([0.5, 0.6], [0.03])


def test_a_combination_is_taken_round_by_round() -> None:
    rounds = {"R0": [(1.0, 0.03), (2.0, 0.03)], "R1": [(1.5, 0.04), (2.5, 0.04)]}
    values, cis = combination_by_round({"R1": 1, "R0": -1}, rounds)
    assert values == [0.5, 0.5] and cis == pytest.approx([0.05, 0.05])


def _plans(names: list[str]) -> list[PhasePlan]:
    return [PhasePlan(name, 2, 1, "synthetic") for name in names]


def _drifting_rounds(names, true_s, launches, drift_s_per_slot, interleaved=True):
    """Each launch's mean: the run's true time plus a drift linear in the launch's position."""
    order = (
        round_order(_plans(names), launches)
        if interleaved
        else [(r, plan) for r in range(launches) for plan in _plans(names)]
    )
    rounds: dict[str, list] = {name: [None] * launches for name in names}
    for position, (round_index, plan) in enumerate(order):
        rounds[plan.name][round_index] = (true_s[plan.name] + drift_s_per_slot * position, 0.001)
    return rounds


def _breakdown_of(rounds, chain):
    times = {}
    for name, values in rounds.items():
        pooled = pool_rounds([v for v, _ in values], [c for _, c in values])
        times[name] = PhaseTime(pooled.mean, pooled.ci95)
    return breakdown(times, chain, None, None, rounds)


def test_linear_drift_cancels_in_the_stalls_when_rounds_alternate() -> None:
    chain = ["R0", "R1", "R3", "R2"]
    true_s = {"R0": 0.100, "R1": 0.130, "R3": 0.150, "R2": 0.190}
    truth = {"compute": 0.100, "interconnect": 0.030, "cpu": 0.020, "disk": 0.040}
    drift = 0.002  # 2 ms slower at each launch: 30 ms over a profile of 16 launches
    result = _breakdown_of(_drifting_rounds(chain, true_s, 4, drift), chain)
    for stall in ("interconnect", "cpu", "disk"):
        assert result["stalls"][stall]["seconds"] == pytest.approx(truth[stall], abs=1e-12)
    # The same drift with every round in chain order: each stall is off by one launch's drift.
    same_order = _breakdown_of(_drifting_rounds(chain, true_s, 4, drift, interleaved=False), chain)
    for stall in ("interconnect", "cpu", "disk"):
        assert same_order["stalls"][stall]["seconds"] == pytest.approx(truth[stall] + drift, abs=1e-12)


def test_an_odd_number_of_rounds_leaves_a_bias_inside_the_interval() -> None:
    chain = ["R0", "R1"]
    drift = 0.003
    result = _breakdown_of(_drifting_rounds(chain, {"R0": 0.1, "R1": 0.13}, 3, drift), chain)
    stall = result["stalls"]["interconnect"]
    assert stall["seconds"] - 0.03 == pytest.approx(drift / 3)  # rounds +d, -d, +d
    assert abs(stall["seconds"] - 0.03) < stall["ci95_s"]


def test_drift_between_rounds_widens_a_run_but_not_its_paired_stall() -> None:
    # Every run 20 ms slower in round 2 than in round 1 (the machine got busier): R1 - R0 is the same in both.
    rounds = {
        "R0": [(0.100, 0.001), (0.120, 0.001), (0.100, 0.001)],
        "R1": [(0.130, 0.001), (0.150, 0.001), (0.130, 0.001)],
    }
    result = _breakdown_of(rounds, ["R0", "R1"])
    interconnect = result["stalls"]["interconnect"]
    assert interconnect["seconds"] == pytest.approx(0.030)
    assert interconnect["ci95_s"] == pytest.approx(math.sqrt(3 * 2 * 0.001**2) / 3)  # only the iterations
    assert result["iteration_ci95_s"] > 0.02  # the run itself carries the drift
    total = math.fsum(s["seconds"] for s in result["stalls"].values() if s["seconds"] is not None)
    assert total + result[REMAINDER]["seconds"] == pytest.approx(result["iteration_s"], rel=1e-12)


def test_a_within_noise_stall_keeps_its_paired_interval_in_the_remainder() -> None:
    rounds = {
        "R0": [(0.100, 0.002), (0.104, 0.002), (0.098, 0.002)],
        "R1": [(0.101, 0.002), (0.100, 0.002), (0.097, 0.002)],
    }
    result = _breakdown_of(rounds, ["R0", "R1"])
    stall = result["stalls"]["interconnect"]
    values, cis = combination_by_round({"R1": 1, "R0": -1}, rounds)
    assert stall["status"] == "clamped_zero" and stall["ci95_s"] == pytest.approx(
        pool_rounds(values, cis).ci95
    )
    assert result[REMAINDER]["seconds"] == pytest.approx(sum(values) / 3)
    assert result[REMAINDER]["ci95_s"] == pytest.approx(stall["ci95_s"])


def test_one_round_without_an_interval_of_its_own_is_never_certain() -> None:
    pooled = pool_rounds([0.5], [0.0])  # one group of blocks: nothing tells its spread
    assert pooled.ci95 == math.inf and pooled.between_ci95 is None
    assert not resolved(pooled.mean, pooled.ci95)


def test_a_stall_between_paired_groups_and_a_run_of_its_own_is_paired_launch_by_launch() -> None:
    """R1 timed in groups of blocks beside R0 and R3 in launches of its own, in the same rounds: the CPU stall
    (R3 - R1) was taken as if unpaired (their keys never matched), 2.3 times too wide on a real profile. Now
    R1's groups are pooled per launch and the difference is taken round by round, so the drift between
    rounds, shared by both runs, cancels."""
    from stash_core.analysis.stats import group_round_key, paired_rounds

    levels = [1.0, 1.3, 0.9]  # the machine's speed in each round: shared by every run of the round
    groups = [0.01, -0.01, 0.005, -0.005]
    r1 = {group_round_key(r, g): (level + d, 0.0)
          for r, level in enumerate(levels) for g, d in enumerate(groups)}  # fmt: skip
    r0 = {key: (mean_s - 0.2, 0.0) for key, (mean_s, _) in r1.items()}
    r3 = {r: (level + 0.05, 0.004) for r, level in enumerate(levels)}
    rounds = {"R0": r0, "R1": r1, "R3": r3}
    keys, figures = paired_rounds(rounds, ["R1", "R3"])
    assert keys == [0, 1, 2] and [mean_s for mean_s, _ in figures["R1"]] == pytest.approx(levels)
    times = {name: PhaseTime(pool_rounds([v for v, _ in f.values()], [c for _, c in f.values()]).mean,
                             pool_rounds([v for v, _ in f.values()], [c for _, c in f.values()]).ci95)
             for name, f in rounds.items()}  # fmt: skip
    result = breakdown(times, ["R0", "R1", "R3"], None, None, rounds)
    cpu = result["stalls"]["cpu"]
    unpaired = math.hypot(times["R1"].ci95_s, times["R3"].ci95_s)
    assert cpu["seconds"] == pytest.approx(0.05) and cpu["ci95_s"] < unpaired / 5
    assert paired_rounds(rounds, ["R0", "R1"])[0] == sorted(r1)  # groups beside groups: paired group by group
