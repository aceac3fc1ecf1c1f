"""R0 and R1 in one launch: the groups' figures, the stop rule's widest interval, the groups' means."""

from __future__ import annotations

import pytest

from stash_core.analysis.stats import pool_rounds
from stash_core.measure.paired_loop import group_figures, group_means, warmup_groups, worst_ratio
from stash_core.measure.timed_loop import StepTimes


def test_group_figures_are_t_intervals_over_the_groups_and_the_difference_is_paired() -> None:
    a = [0.110, 0.130, 0.112, 0.128, 0.111]
    b = [0.070, 0.090, 0.072, 0.088, 0.071]  # moves with a: the machine's speed, shared within a group
    figures = group_figures(a, b)
    assert figures["R1"].mean == pytest.approx(sum(a) / 5)
    assert figures["R1"].ci95 == pytest.approx(pool_rounds(a, [0.0] * 5).ci95)
    assert figures["difference"].mean == pytest.approx(0.04)
    # the same drift in both: the paired difference is exact, the unpaired one would not be
    assert figures["difference"].ci95 == pytest.approx(0.0, abs=1e-12)
    assert (figures["R1"].ci95**2 + figures["R0"].ci95**2) ** 0.5 > 0.01


def test_worst_ratio_counts_the_difference_only_when_it_is_a_stall_of_the_target_share() -> None:
    a = [0.100, 0.104, 0.098, 0.102, 0.100, 0.101, 0.099, 0.100]
    tight_b = [x - 0.004 for x in a]
    tight_b[0] += 0.003  # a difference of 4% of R1, noisy: below 10%, so it does not count
    small = worst_ratio(a, tight_b, 0.10)
    assert small < 1.0
    b = [x - 0.040 for x in a]
    b[::2] = [x + 0.01 for x in b[::2]]  # a 35 ms stall whose groups scatter by 10 ms
    figures = group_figures(a, b)
    expected = figures["difference"].ci95 / (0.10 * figures["difference"].mean)
    assert worst_ratio(a, b, 0.10) == pytest.approx(max(expected, small))
    assert worst_ratio([0.1], [0.05], 0.10) == float("inf")


def test_group_means_take_two_blocks_of_one_kind_and_warmup_waits_for_enough_groups() -> None:
    times = StepTimes()
    times.iteration_s = [1.0] * 6 + [2.0] * 6 + [3.0] * 5  # the last group is not whole yet
    assert group_means(times, 3) == [1.0, 2.0]
    a = [0.2, 0.15] + [0.1] * 8
    assert warmup_groups(a, [0.0] * 10) == 0  # fewer than 20 groups: nothing judged, nothing cut
    a = [0.375] * 5 + [0.125] * 35  # exact in binary: the settled groups do not differ at all
    assert warmup_groups(a, [0.0] * 40) == 5
