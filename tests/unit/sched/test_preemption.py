"""Baselines and preemption on hand-worked cases: every start and finish time is computed in the comments.

Estimates are the users' (trace column estimate_s); where they differ from the true durations the test says
so, and the schedule must follow the estimate, never the truth."""

from __future__ import annotations

import pytest

from stash_core.errors import UsageError
from stash_core.sched import Cluster, Policy, TraceJob, simulate
from stash_core.sched.fabric import Fabric
from stash_core.sched.policy import POLICIES


def job(job_id, gpus, submit_s, duration_s, slowdown=1.5, estimate_s=None):
    estimate_s = duration_s if estimate_s is None else estimate_s
    return TraceJob(job_id, gpus, submit_s, duration_s, None, slowdown, "trace", None, estimate_s)


def times(jobs, cluster, policy):
    return [(o.start_s, o.finish_s) for o in simulate(jobs, cluster, policy)]


def same(got, expected):
    """Start and finish times equal to the worked-out ones (to rounding)."""
    flat = [t for pair in got for t in pair]
    return flat == pytest.approx([float(t) for pair in expected for t in pair])


# One node of 4 GPUs. A holds all four until 100; B (4 GPUs, 50 s) arrives at 1, C and D (2 GPUs, 10 s)
# at 2 and 3.
QUEUE = [job("A", 4, 0.0, 100.0), job("B", 4, 1.0, 50.0), job("C", 2, 2.0, 10.0), job("D", 2, 3.0, 10.0)]


@pytest.mark.parametrize(
    "name, expected",
    [
        # arrival order: B at 100-150, then C and D together 150-160
        ("fifo", [(0, 100), (100, 150), (150, 160), (150, 160)]),
        ("spread", [(0, 100), (100, 150), (150, 160), (150, 160)]),
        ("las", [(0, 100), (100, 150), (150, 160), (150, 160)]),  # 400 GPU-s: all stay in queue 0
        # shortest estimate first: C and D at 100-110, B once they are done, 110-160
        ("sjf", [(0, 100), (110, 160), (100, 110), (100, 110)]),
    ],
)
def test_queue_order_of_the_baselines(name, expected):
    assert same(times(QUEUE, Cluster(1, 1, 4), Policy(name)), expected)


def test_sjf_follows_the_estimates_not_the_true_durations():
    # C and D are estimated at 60 s (they take 10): B (estimated 50) goes first, 100-150; C, D 150-160
    wrong = [*QUEUE[:2], job("C", 2, 2.0, 10.0, estimate_s=60.0), job("D", 2, 3.0, 10.0, estimate_s=60.0)]
    assert same(times(wrong, Cluster(1, 1, 4), Policy("sjf")), [(0, 100), (100, 150), (150, 160), (150, 160)])


def test_fifo_blocks_behind_its_head_where_spread_lets_a_small_job_pass():
    # A holds 3 of 4 GPUs until 100; B (4 GPUs) waits; C (1 GPU, 10 s) arrives at 2
    jobs = [job("A", 3, 0.0, 100.0), job("B", 4, 1.0, 50.0), job("C", 1, 2.0, 10.0)]
    assert same(times(jobs, Cluster(1, 1, 4), Policy("fifo")), [(0, 100), (100, 150), (150, 160)])
    assert same(times(jobs, Cluster(1, 1, 4), Policy("spread")), [(0, 100), (100, 150), (2, 12)])


# LAS: L (4 GPUs, 2000 s) reaches 3600 GPU-s at 900 and drops to queue 1; S (4 GPUs, 100 s) then preempts it.
@pytest.mark.parametrize(
    "s_at, settings, expected",
    [
        # S at 1000: L has run 1000 s (>= 600) and is in queue 1: stopped, 1000 s of work left.
        # S 1000-1100; L restarts at 1100, pays 30 s checkpoint: 1100 + 30 + 1000 = 2130
        (1000.0, {}, [(0, 2130), (1000, 1100)]),
        # minimum run 1200 s: S waits for L's guard to end at 1200; L resumes at 1300: 1300 + 30 + 800
        (1000.0, {"min_run_s": 1200.0}, [(0, 2130), (1200, 1300)]),
        # no preemption allowed: S after L, 2000-2100
        (1000.0, {"max_preemptions": 0}, [(0, 2000), (2000, 2100)]),
        # S at 500: L still in queue 0, same priority; at 900 L drops to queue 1 and S takes its GPUs:
        # S 900-1000, L 1000 + 30 + 1100 = 2130
        (500.0, {}, [(0, 2130), (900, 1000)]),
    ],
)
def test_las_preempts_a_job_that_has_had_more_service(s_at, settings, expected):
    jobs = [job("L", 4, 0.0, 2000.0), job("S", 4, s_at, 100.0)]
    outcomes = simulate(jobs, Cluster(1, 1, 4), Policy("las", **settings))
    assert same([(o.start_s, o.finish_s) for o in outcomes], expected)
    preempted = expected[0][1] == 2130
    assert outcomes[0].preemptions == int(preempted)
    assert outcomes[0].checkpoint_s == (30.0 if preempted else 0.0)


# One switch, two nodes of 4 GPUs. X (3 GPUs) ends at 100, Z (3 GPUs) at 1000; Y (2 GPUs, 1000 s, 1.5 times
# slower spread) arrives at 1 and, with timers of zero, spreads at once over the two nodes.
MOVE = [job("X", 3, 0.0, 100.0), job("Z", 3, 0.0, 1000.0), job("Y", 2, 1.0, 1000.0)]


@pytest.mark.parametrize(
    "jobs, policy, finish_s, preemptions",
    [
        # never moved: 1 + 1000 x 1.5
        (MOVE, Policy("network-delay", scale=0.0), 1501.0, 0),
        # X ends at 100: Y has done 99 / 1.5 = 66 s of work, would save 0.5 x 934 s > 30 s checkpoint:
        # moved to node 0, 100 + 30 + 934 = 1064
        (MOVE, Policy("network-preempt", scale=0.0, min_run_s=0.0), 1064.0, 1),
        # guard of 600 s: at 100 it is too early; when the guard runs out at 601 it has done 400 s and would
        # save 0.5 x 600 > 30, node 0 is free since 100: 601 + 30 + 600 = 1231 (not 1364, at Z's end)
        (MOVE, Policy("network-preempt", scale=0.0), 1231.0, 1),
        # estimated at 100 s, it has outrun its estimate by 1000: no gain expected, not moved
        ([*MOVE[:2], job("Y", 2, 1.0, 1000.0, estimate_s=100.0)], Policy("network-preempt", scale=0.0),
         1501.0, 0),
        # a checkpoint of 500 s costs more than the 467 s it would save at 100 (and 167 at 1000)
        (MOVE, Policy("network-preempt", scale=0.0, min_run_s=0.0, checkpoint_s=500.0), 1501.0, 0),
    ],
)  # fmt: skip
def test_network_preemption_moves_a_sensitive_spread_job_when_it_pays(jobs, policy, finish_s, preemptions):
    y = simulate(jobs, Cluster(1, 2, 4), policy)[2]
    assert (y.start_s, y.finish_s, y.preemptions, y.level) == (1.0, pytest.approx(finish_s), preemptions,
                                                                "switch")  # fmt: skip


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_on_a_congested_link_shared_by_two_jobs(name):
    # One switch, 3 nodes of 4 GPUs, node uplinks 100 Gbit/s, slowdowns read at 100 Gbit/s: a slowdown of
    # 1.5 is 50 Gbit per consolidated second (fabric.py). C (6 GPUs, 100 s) and D (6 GPUs, 200 s) both start
    # at 0 at their tightest (2 nodes each), their durations holding 50/100 = 0.5 s of communication per
    # second alone; they share node 1's uplink, 50 Gbit/s each: 1 + 50/50 - 0.5 = 1.5 times slower while
    # both run. C ends at 150; D has done 100 s by then, the rest alone: 250. Every policy starts both at
    # once (nothing to wait for or preempt).
    jobs = [job("C", 6, 0.0, 100.0), job("D", 6, 0.0, 200.0)]
    fabric = Fabric(node_gbps=100.0, uplink_gbps=100.0, reference_gbps=100.0)
    outcomes = simulate(jobs, Cluster(1, 3, 4), Policy(name), fabric=fabric)
    assert same([(o.start_s, o.finish_s) for o in outcomes], [(0, 150), (0, 250)])


def test_the_online_delay_timer_is_the_observed_queueing_delay():
    # 1 switch x 2 nodes x 4 GPUs. A (4 GPUs) takes node 0 until 50, B (3) node 1. W (4) waits 50 s: the
    # observed wait becomes 0.1 x 50 = 5 s; P (3) starts at once at 61 on node 0: 5 + 0.1 x (0 - 5) = 4.5.
    # Y (2 GPUs) arrives at 62 with one GPU free per node: skipped, it spreads at 62 + 4.5 = 66.5.
    jobs = [job("A", 4, 0.0, 50.0), job("B", 3, 0.0, 2000.0), job("W", 4, 0.0, 10.0),
            job("P", 3, 61.0, 1000.0), job("Y", 2, 62.0, 100.0)]  # fmt: skip
    outcomes = simulate(jobs, Cluster(1, 2, 4), Policy("delay", online=True))
    w, y = outcomes[2], outcomes[4]
    assert (w.start_s, w.finish_s) == (50.0, 60.0)
    assert (y.start_s, y.finish_s, y.level) == (pytest.approx(66.5), pytest.approx(66.5 + 150.0), "switch")


# LAS starvation, one node of 4 GPUs, at most one preemption per job. L (2000 s) drops to queue 1 at 900 and
# is preempted at 1000 by S1 (100 s, 1000-1100), having run 1000 s. S2 (2000 s) arrives at 1050 in queue 0
# and runs from 1100; it reaches queue 1 at 2000.
STARVING = [job("L", 4, 0.0, 2000.0), job("S1", 4, 1000.0, 100.0), job("S2", 4, 1050.0, 2000.0)]


@pytest.mark.parametrize(
    "factor, expected",
    [
        # off: L (queue 1) never preempts S2 (queue 1 from 2000): L waits for S2's end, 3100 + 30 + 1000
        (0.0, [(0, 4130), (1000, 1100), (1100, 3100)]),
        # 0.8: L is back in queue 0 at 1000 + 0.8 x 1000 = 1800; at 2000 S2 drops to queue 1 and L preempts
        # it: 2000 + 30 + 1000 = 3030. S2 (900 s done, preempted once: L may not be preempted again) then
        # 3030 + 30 + 1100 = 4160, though it is promoted itself at 2000 + 0.8 x 900 = 2720
        (0.8, [(0, 3030), (1000, 1100), (1100, 4160)]),
        # the default, 10: L would be promoted at 11000, long after S2 ends
        (None, [(0, 4130), (1000, 1100), (1100, 3100)]),
    ],
)
def test_las_promotes_a_starving_preempted_job_to_the_top_queue(factor, expected):
    settings = {} if factor is None else {"starve_factor": factor}
    outcomes = simulate(STARVING, Cluster(1, 1, 4), Policy("las", max_preemptions=1, **settings))
    assert same([(o.start_s, o.finish_s) for o in outcomes], expected)
    assert [o.preemptions for o in outcomes] == ([1, 0, 1] if factor == 0.8 else [1, 0, 0])


def test_las_queue_limits_are_an_option():
    # one limit of 1000 GPU-s: L (4 GPUs) reaches queue 1 at 250. S arrives at 500, waits for L's guard
    # (600 s), preempts it at 600: S 600-700; L 700 + 30 + 1400 = 2130 (default limits: S at 900, above)
    jobs = [job("L", 4, 0.0, 2000.0), job("S", 4, 500.0, 100.0)]
    outcomes = simulate(jobs, Cluster(1, 1, 4), Policy("las", las_limits_gpu_s=(1000.0,)))
    assert same([(o.start_s, o.finish_s) for o in outcomes], [(0, 2130), (600, 700)])
    with pytest.raises(UsageError, match="LAS queue limits"):
        Policy("las", las_limits_gpu_s=(3600.0, 100.0))


def test_fifo_consolidate_lets_nobody_pass_a_job_waiting_for_its_tightest_placement():
    # 1 switch x 2 nodes x 4 GPUs. A (4 GPUs) holds node 0 and B (3) node 1 until 100. W (4 GPUs) arrives at
    # 1 and waits for a whole node; S (1 GPU, 10 s) arrives at 2. consolidate lets S pass on node 1's free
    # GPU: 2-12; fifo-consolidate keeps it behind W: both start at 100, W on node 0, S on node 1
    jobs = [job("A", 4, 0.0, 100.0), job("B", 3, 0.0, 100.0), job("W", 4, 1.0, 100.0), job("S", 1, 2.0, 10.0)]
    backfilled = times(jobs, Cluster(1, 2, 4), Policy("consolidate"))
    assert same(backfilled, [(0, 100), (0, 100), (100, 200), (2, 12)])
    in_line = simulate(jobs, Cluster(1, 2, 4), Policy("fifo-consolidate"))
    assert same([(o.start_s, o.finish_s) for o in in_line], [(0, 100), (0, 100), (100, 200), (100, 110)])
    assert [o.level for o in in_line] == ["node"] * 4


def test_the_queueing_delay_counts_the_wait_after_a_preemption():
    """L (0-1000, preempted) waits 1000-1100 while S runs; S waits nothing. The average counted only first
    starts: 0 s, where L waited 100 s."""
    from stash_core.sched.metrics import schedule_metrics

    jobs = [job("L", 4, 0.0, 2000.0), job("S", 4, 1000.0, 100.0)]
    cluster = Cluster(1, 1, 4)
    outcomes = simulate(jobs, cluster, Policy("las"))
    assert [o.queued_s for o in outcomes] == pytest.approx([100.0, 0.0])
    assert schedule_metrics(outcomes, cluster)["avg_queue_s"] == pytest.approx(50.0)
