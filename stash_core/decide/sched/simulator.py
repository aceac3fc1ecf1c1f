"""An event-driven simulation of a shared GPU cluster placing jobs under one policy.

Jobs queue in arrival order. Whenever a job arrives, finishes or a delay timer runs out, the scheduler
starts every job the policy lets it place (later jobs may pass one that waits: delay scheduling, Zaharia
et al. 2010). A job's timer runs from the first time it was skipped, that is, from when enough GPUs were
free for it but not in the placement it waits for. Only the jobs an event can affect are looked at: when
no GPUs were given back, only the new arrivals and the jobs whose timer ran out (a job that could not be
placed still cannot at the same level); when some were, the queue is walked, skipping jobs asking more
GPUs than are free and (GPUs, level) pairs already refused in the same pass. Levels (topology.py) are
relative to a job's tightest placement. Without a fabric a placement fixes the job's speed:
  tightest ("node")       duration
  looser, same switches   duration x slowdown
  more switches           duration x (1 + (slowdown - 1) x uplink_factor)
with a fabric (fabric.py) the speed follows the congestion of the links the job shares, re-timed
whenever a job starts or ends on one of them. No migration, no preemption.
Policies:
  consolidate    wait until the job can have its tightest placement
  spread         start as soon as enough GPUs are free anywhere (tightest placement available)
  delay          wait up to delay_s for the tightest placement, then up to 2 x delay_s for its fewest
                 switches, then take anything
  network-delay  the same, but each job's timer is scale x what spreading would cost it,
                 (slowdown - 1) x duration: insensitive jobs start at once, sensitive ones wait as long
                 as waiting is cheaper than running slow (uses the true duration: an oracle)
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass

from stash_core.decide.sched.fabric import Fabric, Links, grad_bytes_of, links_of
from stash_core.decide.sched.topology import Cluster
from stash_core.decide.sched.trace import Job
from stash_core.errors import UsageError

POLICIES = ("consolidate", "spread", "delay", "network-delay")
FINISH, TIMER = 0, 1


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


@dataclass
class _Running:
    placement: dict[int, int]
    level: str
    links: list[tuple[str, int]]
    grad_bytes: float
    work_s: float  # consolidated seconds of work left at `since`
    since: float
    slowdown: float  # seconds per consolidated second of work, now
    version: int = 0


def simulate(
    jobs: list[Job],
    cluster: Cluster,
    policy: Policy,
    uplink_factor: float = 2.0,
    fabric: Fabric | None = None,
) -> list[JobOutcome]:
    """Run every job to completion; returns one outcome per job. UsageError if a job can never fit.

    Without a fabric a placement fixes the job's speed (uplink_factor across switches); with one, speeds
    follow the congestion of the links the job shares (fabric.py) and change as jobs start and end."""
    if uplink_factor < 1:
        raise UsageError(f"uplink factor must be >= 1, got {uplink_factor}")
    too_big = [job.job_id for job in jobs if job.gpus > cluster.total_gpus]
    if too_big:
        raise UsageError(
            f"job(s) {', '.join(too_big[:5])} need more GPUs than the cluster has ({cluster.total_gpus})"
        )
    free = cluster.empty_copy()
    links = Links(fabric) if fabric is not None else None
    arrivals = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
    rank = {index: position for position, index in enumerate(arrivals)}  # queue order: arrival
    gpus = [job.gpus for job in jobs]
    timers = [policy.timer_s(job) for job in jobs]
    events: list[tuple[float, int, int, int, int]] = []  # (time, order, FINISH or TIMER, job, version)
    order = 0
    queue: list[int] = []  # waiting jobs, in arrival order
    queued = [False] * len(jobs)
    demand: Counter[int] = Counter()  # GPUs asked by waiting jobs -> how many ask it
    running: dict[int, _Running] = {}
    starts: dict[int, float] = {}
    outcomes: dict[int, JobOutcome] = {}
    skipped_since: dict[int, float] = {}

    def retime(index: int, now: float) -> None:
        """Set a running job's speed from its placement (and the links it shares now); new finish event."""
        nonlocal order
        run = running[index]
        run.work_s -= (now - run.since) / run.slowdown
        run.since = now
        job = jobs[index]
        if links is None:
            slowdown = _slowdown_at(run.level, job.slowdown, uplink_factor)
        else:
            stretch = links.stretch(run.links, run.grad_bytes)
            if run.level == "node":
                stretch -= links.stretch(run.links, run.grad_bytes, alone=True)
            slowdown = 1.0 + (job.slowdown - 1.0) * stretch
        run.slowdown = slowdown
        run.version += 1
        heapq.heappush(events, (now + max(0.0, run.work_s) * slowdown, order, FINISH, index, run.version))
        order += 1

    pending = 0  # next arrival
    while pending < len(arrivals) or events:
        now = events[0][0] if events else math.inf
        if pending < len(arrivals):
            now = min(now, jobs[arrivals[pending]].submit_s)
        candidates: list[int] = []
        freed = False
        while pending < len(arrivals) and jobs[arrivals[pending]].submit_s == now:
            index = arrivals[pending]
            queue.append(index)
            queued[index] = True
            demand[gpus[index]] += 1
            candidates.append(index)
            pending += 1
        touched: set[int] = set()  # running jobs whose links changed users
        while events and events[0][0] == now:  # everything that happens at this instant, then schedule
            _, _, kind, index, version = heapq.heappop(events)
            if kind == FINISH:
                run = running.get(index)
                if run is None or run.version != version:
                    continue  # re-timed since
                del running[index]
                free.give_back(run.placement)
                freed = True
                outcomes[index] = JobOutcome(jobs[index], starts[index], now, run.level, len(run.placement))
                if links is not None and run.links:
                    links.remove(index, run.links, run.grad_bytes)
                    touched |= links.neighbours(run.links)
            elif queued[index]:
                candidates.append(index)
        # Without GPUs given back, a job that could not be placed before still cannot at the same level:
        # only new arrivals and jobs whose timer relaxed their level need a look.
        if freed and demand and free.total_free >= min(demand):
            todo = queue
        elif freed:
            todo = []
        else:
            todo = sorted(set(candidates), key=rank.__getitem__)
        failed: set[tuple[int, str]] = set()  # (GPUs, level) that found no placement in this pass
        started: list[int] = []
        for index in todo:
            if free.total_free == 0:
                break
            need = gpus[index]
            if need > free.total_free:
                continue
            level = _allowed_level(timers[index], skipped_since.get(index, now), now)
            placement = None if (need, level) in failed else free.place(need, level)
            if placement is None:
                failed.add((need, level))
                if index not in skipped_since:  # it could run now, spread: its timer starts
                    skipped_since[index] = now
                    for deadline in _timer_deadlines(timers[index], now):
                        heapq.heappush(events, (deadline, order, TIMER, index, 0))
                        order += 1
                continue
            free.take(placement)
            started.append(index)
            queued[index] = False
            demand[need] -= 1
            if not demand[need]:
                del demand[need]
            job = jobs[index]
            crossed = links_of(placement, cluster.nodes_per_switch) if links is not None else []
            grad_bytes = job.grad_bytes or grad_bytes_of(job.model)
            level = free.level_of(placement, need)
            running[index] = _Running(placement, level, crossed, grad_bytes, job.duration_s, now, 1.0)
            starts[index] = now
            if links is not None and crossed:
                touched |= links.neighbours(crossed)
                links.add(index, crossed, grad_bytes)
            touched.add(index)
        for index in touched:
            if index in running:
                retime(index, now)
        if started:
            queue = [index for index in queue if queued[index]]
    if queue:  # cannot happen with an empty cluster taking any job that fits; guard the invariant
        raise RuntimeError(f"simulation ended with {len(queue)} job(s) never placed")
    return [outcomes[i] for i in range(len(jobs))]


def _allowed_level(timer_s: float, since_s: float, now_s: float) -> str:
    """Delay scheduling's relaxation: one switch after the timer, anything after twice the timer.

    Compared as instants (the very sums the timer events fire at), so rounding cannot keep a job a step
    behind at its own timer event."""
    if now_s >= since_s + 2 * timer_s:
        return "any"
    if now_s >= since_s + timer_s:
        return "switch"
    return "node"


def _timer_deadlines(timer_s: float, since_s: float) -> list[float]:
    if not math.isfinite(timer_s) or timer_s <= 0:
        return []
    return [since_s + timer_s, since_s + 2 * timer_s]


def _slowdown_at(level: str, slowdown: float, uplink_factor: float) -> float:
    if level == "node":
        return 1.0
    if level == "switch":
        return slowdown
    return 1.0 + (slowdown - 1.0) * uplink_factor
