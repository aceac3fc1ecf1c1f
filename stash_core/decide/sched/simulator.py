"""An event-driven simulation of a shared GPU cluster placing jobs under one policy.

Jobs queue in arrival order. Whenever a job arrives, finishes or a delay timer runs out, the scheduler
walks the queue and starts every job the policy lets it place (later jobs may pass one that waits: delay
scheduling, Zaharia et al. 2010). A job's timer runs from the first time it was skipped, that is, from
when enough GPUs were free for it but not in the placement it waits for. A placement fixes the job's
speed for its whole run (no migration):
  consolidated ("node")   duration
  one switch ("switch")   duration x slowdown
  several switches        duration x (1 + (slowdown - 1) x uplink_factor)
Policies:
  consolidate    wait until the job can have its fewest nodes under one switch
  spread         start as soon as enough GPUs are free anywhere (tightest placement available)
  delay          wait up to delay_s for a consolidated placement, then up to 2 x delay_s for one switch,
                 then take anything
  network-delay  the same, but each job's timer is scale x what spreading would cost it,
                 (slowdown - 1) x duration: insensitive jobs start at once, sensitive ones wait as long
                 as waiting is cheaper than running slow
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from stash_core.decide.sched.topology import Cluster
from stash_core.decide.sched.trace import Job
from stash_core.errors import UsageError

POLICIES = ("consolidate", "spread", "delay", "network-delay")


@dataclass(frozen=True)
class Policy:
    name: str
    delay_s: float = 0.0  # delay: the timer; network-delay: unused
    scale: float = 1.0  # network-delay: timer = scale x (slowdown - 1) x duration

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise UsageError(f"unknown policy {self.name!r}: choose {', '.join(POLICIES)}")
        if not (math.isfinite(self.delay_s) and self.delay_s >= 0 and math.isfinite(self.scale)
                and self.scale >= 0):  # fmt: skip
            raise UsageError("delay and scale must be non-negative numbers")

    def timer_s(self, job: Job) -> float:
        """How long `job` waits for a consolidated placement before it relaxes to one switch."""
        if self.name == "consolidate":
            return math.inf
        if self.name == "spread":
            return 0.0
        if self.name == "delay":
            return self.delay_s
        return self.scale * (job.slowdown - 1.0) * job.duration_s

    def label(self) -> str:
        if self.name == "delay":
            return f"delay {self.delay_s:g} s"
        if self.name == "network-delay":
            return f"network-delay x{self.scale:g}"
        return self.name


@dataclass
class JobOutcome:
    job: Job
    start_s: float
    finish_s: float
    level: str
    nodes: int

    @property
    def run_s(self) -> float:
        return self.finish_s - self.start_s


def simulate(
    jobs: list[Job], cluster: Cluster, policy: Policy, uplink_factor: float = 2.0
) -> list[JobOutcome]:
    """Run every job to completion; returns one outcome per job. UsageError if a job can never fit."""
    if uplink_factor < 1:
        raise UsageError(f"uplink factor must be >= 1, got {uplink_factor}")
    too_big = [job.job_id for job in jobs if job.gpus > cluster.total_gpus]
    if too_big:
        raise UsageError(
            f"job(s) {', '.join(too_big[:5])} need more GPUs than the cluster has ({cluster.total_gpus})"
        )
    free = Cluster(cluster.switches, cluster.nodes_per_switch, cluster.gpus_per_node)
    events: list[tuple[float, int, str, int]] = []  # (time, order, kind, job index)
    order = 0
    for index, job in enumerate(jobs):
        heapq.heappush(events, (job.submit_s, order, "arrive", index))
        order += 1
    queue: list[int] = []
    running: dict[int, dict[int, int]] = {}
    outcomes: dict[int, JobOutcome] = {}
    timers: set[tuple[int, float]] = set()
    skipped_since: dict[int, float] = {}
    switch_gpus = cluster.nodes_per_switch * cluster.gpus_per_node
    while events:
        now = events[0][0]
        while events and events[0][0] == now:  # everything that happens at this instant, then schedule
            _, _, kind, index = heapq.heappop(events)
            if kind == "arrive":
                queue.append(index)
            elif kind == "finish":
                free.give_back(running.pop(index))
        for index in list(queue):
            job = jobs[index]
            waited = now - skipped_since.get(index, now)
            # a job bigger than a switch can only ever span switches: that is its tightest placement
            level = "any" if job.gpus > switch_gpus else _allowed_level(policy.timer_s(job), waited)
            placement = free.place(job.gpus, level)
            if placement is None:
                if index not in skipped_since and free.place(job.gpus, "any") is not None:
                    skipped_since[index] = now  # it could run now, spread: its timer starts
                continue
            free.take(placement)
            queue.remove(index)
            running[index] = placement
            placed_level = free.level_of(placement, job.gpus)
            run_s = job.duration_s * _slowdown_at(placed_level, job.slowdown, uplink_factor)
            outcomes[index] = JobOutcome(job, now, now + run_s, placed_level, len(placement))
            heapq.heappush(events, (now + run_s, order, "finish", index))
            order += 1
        for index in queue:  # wake up when a waiting job's timer relaxes its level
            if index not in skipped_since:
                continue
            for deadline in _timer_deadlines(policy.timer_s(jobs[index]), skipped_since[index]):
                if deadline > now:
                    if (index, deadline) not in timers:
                        timers.add((index, deadline))
                        heapq.heappush(events, (deadline, order, "timer", index))
                        order += 1
                    break
    if queue:  # cannot happen with an empty cluster taking any job that fits; guard the invariant
        raise RuntimeError(f"simulation ended with {len(queue)} job(s) never placed")
    return [outcomes[i] for i in range(len(jobs))]


def _allowed_level(timer_s: float, waited_s: float) -> str:
    if waited_s >= 2 * timer_s:
        return "any"
    if waited_s >= timer_s:
        return "switch"
    return "node"


def _timer_deadlines(timer_s: float, since_s: float) -> list[float]:
    return [since_s + timer_s, since_s + 2 * timer_s] if math.isfinite(timer_s) else []


def _slowdown_at(level: str, slowdown: float, uplink_factor: float) -> float:
    if level == "node":
        return 1.0
    if level == "switch":
        return slowdown
    return 1.0 + (slowdown - 1.0) * uplink_factor
