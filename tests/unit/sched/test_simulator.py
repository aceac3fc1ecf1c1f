"""The scheduling policies on a hand-made case whose outcome is worked out by hand.

One switch, two nodes of 4 GPUs. At t = 0 jobs X and Z take 3 GPUs on each node for 100 s; at t = 1 job Y
asks for 2 GPUs for 100 s (consolidated) and runs 1.5 times slower spread over the two nodes.
  spread         Y starts at 1 on 1 + 1 GPUs, runs 150 s: finishes at 151
  consolidate    Y waits for a node: starts at 100, finishes at 200
  delay 30 s     Y is skipped at 1, spreads at 31: finishes at 181
  network-delay  timer = scale x (1.5 - 1) x 100 s: with scale 1, starts at 51, finishes at 201
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from stash_core.errors import UsageError
from stash_core.sched import Cluster, JobOutcome, Policy, TraceJob, schedule_metrics, simulate, tune
from stash_core.sched.fabric import Fabric


def job(job_id, gpus, submit_s, duration_s, slowdown=1.5, estimate_s=None):
    """A job whose user estimate is its duration unless told otherwise."""
    estimate_s = duration_s if estimate_s is None else estimate_s
    return TraceJob(job_id, gpus, submit_s, duration_s, None, slowdown, "trace", None, estimate_s)


JOBS = [job("X", 3, 0.0, 100.0), job("Z", 3, 0.0, 100.0), job("Y", 2, 1.0, 100.0)]


def y_outcome(policy):
    return simulate(JOBS, Cluster(1, 2, 4), policy)[2]


@pytest.mark.parametrize(
    "policy, start_s, finish_s, level",
    [
        (Policy("spread"), 1.0, 151.0, "switch"),
        (Policy("consolidate"), 100.0, 200.0, "node"),
        (Policy("delay", delay_s=30.0), 31.0, 181.0, "switch"),
        (Policy("network-delay", scale=1.0), 51.0, 201.0, "switch"),
        (Policy("network-delay", scale=2.0), 100.0, 200.0, "node"),  # timer 100 s: a node frees first
        (Policy("fifo"), 1.0, 151.0, "switch"),
        (Policy("sjf"), 1.0, 151.0, "switch"),
        (Policy("las"), 1.0, 151.0, "switch"),
        (Policy("network-preempt", scale=1.0), 51.0, 201.0, "switch"),  # min_run_s 600: never moved
    ],
)
def test_policies_place_the_waiting_job_as_worked_out(policy, start_s, finish_s, level):
    outcome = y_outcome(policy)
    assert (outcome.start_s, outcome.finish_s, outcome.level) == pytest.approx((start_s, finish_s, level))


def test_an_insensitive_job_does_not_wait_under_network_delay():
    jobs = [*JOBS[:2], job("Y", 2, 1.0, 100.0, slowdown=1.0)]
    outcome = simulate(jobs, Cluster(1, 2, 4), Policy("network-delay", scale=4.0))[2]
    assert outcome.start_s == 1.0 and outcome.finish_s == 101.0


def test_crossing_switches_costs_the_uplink_factor():
    jobs = [job("X", 3, 0.0, 100.0), job("Z", 3, 0.0, 100.0), job("Y", 2, 1.0, 100.0)]
    outcome = simulate(jobs, Cluster(2, 1, 4), Policy("spread"), uplink_factor=3.0)[2]
    assert outcome.level == "any"
    assert outcome.run_s == pytest.approx(100.0 * (1 + 0.5 * 3.0))


def test_metrics_of_the_spread_schedule():
    outcomes = simulate(JOBS, Cluster(1, 2, 4), Policy("spread"))
    metrics = schedule_metrics(outcomes, Cluster(1, 2, 4))
    assert metrics["makespan_s"] == pytest.approx(151.0)
    assert metrics["avg_jct_s"] == pytest.approx((100 + 100 + 150) / 3)
    assert metrics["avg_queue_s"] == 0.0
    assert metrics["comm_overhead_s"] == pytest.approx(50.0)
    assert metrics["spread_jobs"] == 1
    assert metrics["gpu_busy_share"] == pytest.approx((3 * 100 + 3 * 100 + 2 * 150) / (8 * 151))


def test_a_job_bigger_than_the_cluster_is_refused():
    with pytest.raises(UsageError, match="more GPUs than the cluster has"):
        simulate([job("huge", 16, 0.0, 10.0)], Cluster(1, 2, 4), Policy("spread"))


def test_unknown_policy_is_refused():
    with pytest.raises(UsageError, match="unknown policy"):
        Policy("fastest")


def test_delay_takes_the_tightest_free_placement_once_the_timer_runs_out():
    # 2 switches x 2 nodes x 4 GPUs; A, B, C, D leave one free GPU on nodes 1 and 3 only, until t = 100.
    # Y (2 GPUs) is skipped at 1; at 31 (the timer is the break-even point: no second wait for one switch)
    # it takes what is free, across both switches: 100 x (1 + 0.5 x 2) = 200 s, finishing at 231.
    jobs = [job("A", 4, 0.0, 100.0), job("B", 3, 0.0, 100.0), job("C", 4, 0.0, 100.0),
            job("D", 3, 0.0, 100.0), job("Y", 2, 1.0, 100.0)]  # fmt: skip
    outcome = simulate(jobs, Cluster(2, 2, 4), Policy("delay", delay_s=30.0))[4]
    assert (outcome.start_s, outcome.finish_s, outcome.level) == pytest.approx((31.0, 231.0, "any"))


def test_a_job_bigger_than_a_switch_is_charged_only_for_what_its_placement_crosses():
    # 3 switches x 2 nodes x 4 GPUs: 12 GPUs must cross two switches, and that is its consolidated run
    alone = simulate([job("B", 12, 0.0, 100.0)], Cluster(3, 2, 4), Policy("spread"), uplink_factor=3.0)[0]
    assert (alone.level, alone.run_s) == ("node", pytest.approx(100.0))
    # with 3 GPUs taken on each of the first four nodes it spreads over three switches: 1 + 0.5 x 3
    small = [job(f"s{i}", 3, 0.0, 1000.0) for i in range(4)]
    big = simulate([*small, job("B", 12, 1.0, 100.0)], Cluster(3, 2, 4), Policy("spread"), 3.0)[4]
    assert big.level == "any" and big.run_s == pytest.approx(250.0)


def test_p95_is_the_interpolated_95th_percentile_of_completion_times():
    outcomes = [JobOutcome(job(f"j{i}", 1, 0.0, 1.0), 0.0, float(i), "node", 1) for i in range(1, 21)]
    metrics = schedule_metrics(outcomes, Cluster(1, 1, 1))
    assert metrics["p95_jct_s"] == pytest.approx(19.05)  # 1..20: 19 + 0.05 x (20 - 19)
    assert metrics["avg_jct_s"] == pytest.approx(10.5)


def repeated(jobs: list, times: int, gap_s: float = 10_000.0) -> list:
    """`times` copies of `jobs`, each `gap_s` after the last (every copy meets an empty cluster)."""
    return [replace(j, job_id=f"{j.job_id}{k}", submit_s=j.submit_s + k * gap_s)
            for k in range(times) for j in jobs]  # fmt: skip


def test_the_tuner_picks_the_timer_with_the_lowest_average_jct():
    # delay 0: Y spreads at 1, JCT 150; 60 s: one switch at 61, JCT 210; 300 s and more: a node at 100, 199
    assert tune(repeated(JOBS, 12), Cluster(1, 2, 4), Policy("delay")) == Policy("delay", delay_s=0.0)
    slow_y = [*JOBS[:2], job("Y", 2, 1.0, 100.0, slowdown=3.0)]  # spread: 300 s, JCT 300; 60 s: 360
    assert tune(repeated(slow_y, 12), Cluster(1, 2, 4), Policy("delay")) == Policy("delay", delay_s=300.0)


def test_a_job_alone_across_switches_is_slowed_by_the_thinner_switch_uplink():
    # 2 switches x 1 node x 4 GPUs, node uplinks 100 Gbit/s, switch uplinks 50, slowdowns read at 100. P
    # and Q hold 3 GPUs per node; C (2 GPUs, 100 s, slowdown 1.5: 50 Gbit per second of work) spreads over
    # both switches and gets the 50 Gbit/s of the uplinks: slowdown 1 + 50/50 = 2, 200 s.
    fabric = Fabric(node_gbps=100.0, uplink_gbps=50.0, reference_gbps=100.0)
    jobs = [job("P", 3, 0.0, 1000.0), job("Q", 3, 0.0, 1000.0), job("C", 2, 1.0, 100.0)]
    alone = simulate(jobs, Cluster(2, 1, 4), Policy("spread"), fabric=fabric)[2]
    assert (alone.level, alone.start_s, alone.finish_s) == ("any", 1.0, pytest.approx(201.0))


def test_two_jobs_sharing_a_link_slow_each_other_while_both_run():
    # One switch, 3 nodes of 4 GPUs, node uplinks 100 Gbit/s, slowdowns read at 100. C (6 GPUs, 100 s)
    # takes nodes 0 and 1 (4 + 2), D (6 GPUs, 200 s) nodes 2 and 1 (4 + 2): both at their tightest, sharing
    # node 1's uplink, 50 Gbit/s each. Slowdown 1.5 = 50 Gbit per second of work; their run times hold
    # 50/100 alone: 1 + 50/50 - 0.5 = 1.5. C ends at 150; D has done 100 s of work by then and runs the
    # rest alone at full speed: ends at 250.
    fabric = Fabric(node_gbps=100.0, uplink_gbps=100.0, reference_gbps=100.0)
    jobs = [job("C", 6, 0.0, 100.0), job("D", 6, 0.0, 200.0)]
    c, d = simulate(jobs, Cluster(1, 3, 4), Policy("spread"), fabric=fabric)
    assert (c.level, d.level, c.nodes, d.nodes) == ("node", "node", 2, 2)
    assert (c.finish_s, d.finish_s) == pytest.approx((150.0, 250.0))
    # With 1 s iterations the bytes count: C's 0.75 GB ring 2 x 5/6 x 6 = 10 Gbit per iteration (0.1 s at
    # 100, its slowdown 1.1), D's 3 GB 40 Gbit (slowdown 1.4). Sharing 50/50: C 1 + 10/50 - 0.1 = 1.1,
    # ends at 110; D 1 + 40/50 - 0.4 = 1.4 until 110 (78.57 s of work), then alone: 110 + 400 - 110/1.4
    jobs = [TraceJob("C", 6, 0.0, 100.0, None, 1.1, "trace", 0.75e9, None, 1.0),
            TraceJob("D", 6, 0.0, 400.0, None, 1.4, "trace", 3e9, None, 1.0)]  # fmt: skip
    c, d = simulate(jobs, Cluster(1, 3, 4), Policy("spread"), fabric=fabric)
    assert c.finish_s == pytest.approx(110.0, abs=1e-6)
    assert d.finish_s == pytest.approx(110.0 + 400.0 - 110.0 / 1.4, abs=1e-6)
