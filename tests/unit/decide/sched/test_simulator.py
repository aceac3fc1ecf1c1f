"""The scheduling policies on a hand-made case whose outcome is worked out by hand.

One switch, two nodes of 4 GPUs. At t = 0 jobs X and Z take 3 GPUs on each node for 100 s; at t = 1 job Y
asks for 2 GPUs for 100 s (consolidated) and runs 1.5 times slower spread over the two nodes.
  spread         Y starts at 1 on 1 + 1 GPUs, runs 150 s: finishes at 151
  consolidate    Y waits for a node: starts at 100, finishes at 200
  delay 30 s     Y is skipped at 1, spreads at 31: finishes at 181
  network-delay  timer = scale x (1.5 - 1) x 100 s: with scale 1, starts at 51, finishes at 201
"""

from __future__ import annotations

import pytest

from stash_core.decide.sched import Cluster, Job, Policy, schedule_metrics, simulate
from stash_core.errors import UsageError


def job(job_id, gpus, submit_s, duration_s, slowdown=1.5):
    return Job(job_id, gpus, submit_s, duration_s, None, slowdown, "trace")


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
