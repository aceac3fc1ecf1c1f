"""The indexed in-order pass (inorder.py) against the walk of the whole queue it replaced, on backed-up
traces of every policy: every job's start, finish, level, nodes, preemptions and seconds held the same, and
the pass looks at each job a bounded number of times where the walk looked at the whole queue per finish."""

from __future__ import annotations

import hashlib
import heapq
from types import SimpleNamespace

import pytest

import stash_core.sched.inorder as inorder
import stash_core.sched.simulator as simulator
from stash_core.sched import Cluster, Policy, jobs_from_frame, simulate, synthetic_trace
from stash_core.sched.fabric import Fabric
from stash_core.sched.waiting import Waiting

MODELS = ["resnet50", "resnet18", "alexnet", "vgg16"]
POLICIES = [Policy("fifo"), Policy("sjf"), Policy("las"), Policy("fifo-consolidate"), Policy("consolidate"),
            Policy("spread"), Policy("delay", delay_s=600.0), Policy("delay", online=True),
            Policy("delay", delay_s=300.0, by_busy=True), Policy("network-delay"),
            Policy("network-preempt")]  # fmt: skip
# (seed, jobs, mean gap s, with a fabric): 500 jobs on 64 GPUs at some 2 and 3 times the cluster's capacity
TRACES = [(1, 500, 60.0, False), (2, 500, 90.0, True)]
# sha256 of every outcome, computed with the walk of the whole queue before inorder.py replaced it
EXPECTED = {
    1: ["7df8a026884272a9", "d0543c202e629320", "c39408a57372f146", "cfa3f4cbd2053e3a", "58027eae8e378ddb",
        "d3b0d0f60da0c9ce", "edb70b308b023b02", "17e3950c3d82e94d", "cf014d9e456aabba", "a0e32d4d0cbac92a",
        "897635507712e5d4"],
    2: ["c5d4b9d8a2149b3e", "158fb8ae0e28fa3f", "f5a1fdd0a206bac0", "4aa7008916a94d72", "23eb2be4e21edae2",
        "9cdde05b0b2d872d", "d290810601c12a22", "c51d724d4cb9bda6", "9e35e6d91b0b8c32", "cea930f559a03bbc",
        "0e82f5636efe088e"],
}  # fmt: skip


def outcomes(seed: int, jobs: int, gap_s: float, fabric: bool, policy: Policy) -> list[tuple]:
    trace = jobs_from_frame(synthetic_trace(jobs, seed, MODELS, mean_gap_s=gap_s))
    out = simulate(trace, Cluster(2, 4, 8), policy, 2.0, Fabric.oversubscribed(10, 4, 4) if fabric else None)
    return [(o.start_s, o.finish_s, o.level, o.nodes, o.preemptions, o.held_s, o.checkpoint_s) for o in out]


def digest(rows: list[tuple]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def walk_whole_queue(engine, now: float) -> None:
    """The pass as it was: every waiting job in order through place_in_order()."""
    engine.place_in_order(engine.waiting.in_order(), now)


@pytest.mark.parametrize("trace", TRACES, ids=lambda t: f"seed{t[0]}")
def test_every_policy_schedules_as_before_to_the_bit(trace, monkeypatch):
    got = [outcomes(*trace, policy) for policy in POLICIES]
    assert [digest(rows) for rows in got] == EXPECTED[trace[0]]
    monkeypatch.setattr(simulator, "place_waiting", walk_whole_queue)  # the old walk, run now
    for policy, rows in zip(POLICIES, got, strict=True):
        assert outcomes(*trace, policy) == rows, policy.label()


@pytest.mark.parametrize("policy", ["delay", "consolidate", "network-delay"])
def test_a_backed_up_queue_is_not_walked_at_every_finish(policy, monkeypatch):
    """3,000 jobs at some 170% load (the CLI's defaults): the queue grows to hundreds of jobs. Walking it
    at every finish looked at some 540,000 waiting jobs in all; the indexed pass at some 4,500."""
    looked = count_looked_at(monkeypatch)
    trace = jobs_from_frame(synthetic_trace(3000, 0, MODELS, mean_gap_s=120.0))
    simulate(trace, Cluster(2, 4, 8), Policy(policy, delay_s=600.0))
    assert looked[0] < 5 * len(trace)
    looked[0] = 0
    monkeypatch.setattr(simulator, "place_waiting", walk_whole_queue)
    simulate(trace, Cluster(2, 4, 8), Policy(policy, delay_s=600.0))
    assert looked[0] > 50 * len(trace)  # what the test measures: the walk it replaced


def count_looked_at(monkeypatch) -> list[int]:
    """Count the waiting jobs a full pass looks at: the keys the indexed pass takes from its streams, and
    those the walk of the whole queue takes from in_order()."""
    looked = [0]
    real_in_order = Waiting.in_order

    def in_order(self):
        for key in real_in_order(self):
            looked[0] += 1
            yield key

    def heappop(heap):
        looked[0] += 1
        return heapq.heappop(heap)

    monkeypatch.setattr(Waiting, "in_order", in_order)
    monkeypatch.setattr(inorder, "heapq", SimpleNamespace(heappush=heapq.heappush, heappop=heappop))
    return looked
