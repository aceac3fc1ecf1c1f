"""An event-driven simulation of a shared GPU cluster placing jobs under one policy (policy.py).

At each arrival, finish, delay timer or LAS demotion the scheduler starts every job the policy lets start,
in its order (delay scheduling, Zaharia et al. 2010: a job waiting for a tight placement lets later jobs
pass; its timer runs from the first time it was skipped, i.e. could have run spread). Only the jobs an
event can affect are looked at (waiting.py): without GPUs given back, only new arrivals and jobs whose timer
ran out. Levels (topology.py) are relative to a job's tightest placement. Without a fabric:
  tightest ("node")       duration
  looser, same switches   duration x slowdown
  more switches           duration x (1 + (slowdown - 1) x uplink_factor)
with a fabric (fabric.py) the speed follows the max-min fair rate the job gets on the links it shares: all
starts and ends of an instant are applied first, then only the jobs whose rate moved are re-timed
(timing.py). Timers are in timers.py, preemption (las, network-preempt) in preempt.py.
"""

from __future__ import annotations

import heapq
import math

from stash_core.errors import UsageError
from stash_core.sched import timers
from stash_core.sched.anywhere import place_anywhere
from stash_core.sched.estimate import Estimator
from stash_core.sched.fabric import Fabric, links_of
from stash_core.sched.inorder import place_waiting
from stash_core.sched.las import LasQueues
from stash_core.sched.links import Links
from stash_core.sched.outcome import JobOutcome
from stash_core.sched.policy import WAIT_WEIGHT, Policy
from stash_core.sched.preempt import migrate_spread_jobs
from stash_core.sched.timing import (
    DEMOTE,
    FINISH,
    GUARD,
    PROMOTE,
    TIMER,
    Running,
    progress,
    retime_many,
    stale_came_out,
    sweep_events,
)
from stash_core.sched.topology import LEVELS, Cluster
from stash_core.sched.trace import TraceJob
from stash_core.sched.waiting import Waiting, timer_deadlines
from stash_core.sched.waiting import allowed_level as _allowed_level

ANYWHERE = ("fifo", "sjf", "las", "spread")  # policies that place a job wherever enough GPUs are free
LOOSENESS = {level: rank for rank, level in enumerate(LEVELS)}


def simulate(
    jobs: list[TraceJob],
    cluster: Cluster,
    policy: Policy,
    uplink_factor: float = 2.0,
    fabric: Fabric | None = None,
    timeline: list[tuple[float, int, int]] | None = None,
) -> list[JobOutcome]:
    """Run every job to completion; one outcome per job. UsageError if a job can never fit.

    Without a fabric a placement fixes the job's speed (uplink_factor across switches); with one, speeds
    follow the congestion of the links the job shares (fabric.py). `timeline`, when given, receives
    (time, queued jobs, busy GPUs) after each instant at which something happened."""
    if uplink_factor < 1:
        raise UsageError(f"uplink factor must be >= 1, got {uplink_factor}")
    refuse_too_big(jobs, cluster)
    return _Engine(jobs, cluster, policy, uplink_factor, fabric, timeline).run()


def refuse_too_big(jobs: list[TraceJob], cluster: Cluster) -> None:
    """UsageError naming the jobs that need more GPUs than the cluster has: they could never start."""
    too_big = [job.job_id for job in jobs if job.gpus > cluster.total_gpus]
    if too_big:
        raise UsageError(
            f"job(s) {', '.join(too_big[:5])} need more GPUs than the cluster has ({cluster.total_gpus})"
        )


class _Engine:
    def __init__(self, jobs, cluster, policy, uplink_factor, fabric, timeline) -> None:
        self.jobs, self.cluster, self.policy, self.uplink_factor = jobs, cluster, policy, uplink_factor
        self.timeline = timeline
        self.free = cluster.empty_copy()
        self.links = Links(fabric) if fabric is not None else None
        n = len(jobs)
        self.arrivals = sorted(range(n), key=lambda i: (jobs[i].submit_s, i))
        self.rank = [0] * n
        for position, index in enumerate(self.arrivals):
            self.rank[index] = position
        self.gpus = [job.gpus for job in jobs]
        self.work_left = [job.duration_s for job in jobs]
        self.comm: list = [None] * n  # each job's communication terms, once it first crosses links
        self.estimates = Estimator()
        self.estimate = [0.0] * n
        self.timers: dict[int, float] = {}
        self.skipped_since: dict[int, float] = {}
        self.anywhere = policy.name in ANYWHERE
        self.head_of_line = policy.name == "fifo-consolidate"
        self.waiting = Waiting(n, ordered=not self.anywhere)
        self.running: dict[int, Running] = {}
        self.first_start: dict[int, float] = {}
        self.loosest = ["node"] * n
        self.held = [0.0] * n
        self.restored = [0.0] * n
        self.attained = [0.0] * n  # GPU-seconds held (LAS)
        self.las = [0] * n  # LAS queue
        self.preemptions = [0] * n
        self.pending_restore = [0.0] * n
        self.spread_running: set[int] = set()
        self.outcomes: dict[int, JobOutcome] = {}
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, order, kind, job, version)
        self.order = 0
        self.wait_s = 0.0  # observed queueing delay, exponentially weighted (online delay timer)
        self.busy = 0.0  # observed GPU busy share, time-weighted exponentially (by_busy timers)...
        self.busy_mass = 0.0  # ...and the weight observed so far: busy / busy_mass has no cold start
        self.busy_at = 0.0  # when `busy` was last brought up to date
        self.las_limits = policy.las_limits_gpu_s if policy.name == "las" else None
        self.las_queues = LasQueues(policy.las_limits_gpu_s)  # running jobs per LAS queue (las only)
        self.promoted: set[int] = set()  # LAS: waiting jobs promoted for starving
        self.touched: set[int] = set()  # running jobs to re-time at this instant: started, or changed queue
        self.changed_links: set[int] = set()  # links whose users changed at this instant
        self.requeue: list[int] = []
        self.idle_state: tuple | None = None  # (queue, free GPUs, preemptable jobs) a pass left alone
        self.swept_at = 0  # events in the heap after the last sweep of stale ones

    # ---- the event loop
    def run(self) -> list[JobOutcome]:
        jobs, arrivals, running, heappop = self.jobs, self.arrivals, self.running, heapq.heappop
        arrive_at = [jobs[index].submit_s for index in arrivals] + [math.inf]  # in order, then never
        pending, last = 0, len(arrivals)
        while pending < last or self.events:
            events = self.events  # the same list until the sweep at the end of the instant
            now = arrive_at[pending]
            if events and events[0][0] < now:
                now = events[0][0]
            candidates: list[int] = []
            freed = relook = happened = guarded = False
            while arrive_at[pending] == now:
                index = arrivals[pending]
                self.estimate[index] = self.estimates.estimate_s(jobs[index])
                self.enqueue(index)
                candidates.append(index)
                pending += 1
                happened = True
            while events and events[0][0] == now:
                _, order, kind, index, version = heappop(events)
                run = running.get(index)
                if kind == FINISH or kind == DEMOTE:  # the most frequent, many of them stale
                    if run is None:
                        continue
                    if run.version != version:  # stale; it may be the anchor of a later one (timing.py)
                        if kind == DEMOTE or run.pending:  # else not an anchor: nothing to do
                            stale_came_out(self, run, index, kind, order)
                        continue
                    happened = True
                    if kind == FINISH:
                        self.finish(index, now)
                        freed = True
                    else:  # DEMOTE: one LAS queue down; waiting jobs of the queue it left may preempt it
                        run.demote_anchor_at = math.inf  # it was its own anchor
                        self.las[index] += 1
                        self.las_queues.move(self.las[index] - 1, self.las[index], self.rank[index], index,
                                             self.gpus[index])  # fmt: skip
                        self.touched.add(index)
                        relook |= self.may_wait_for(index)
                elif kind == TIMER:
                    if index in self.waiting:
                        candidates.append(index)
                        happened = True
                elif kind == PROMOTE:  # LAS: starving since its preemption number `version`
                    if index in self.waiting and self.preemptions[index] == version and self.las[index]:
                        self.promote(index)
                        happened = True
                elif run is not None and run.start_id == version:  # GUARD: it may be preempted (las) or
                    if self.las_limits is not None:  # moved (network-preempt) from now on
                        self.may_be_preempted(index)
                        relook |= self.may_wait_for(index)
                        happened |= relook
                    else:
                        guarded = happened = True
            if not happened:  # only stale events: nothing changed, nothing to place or re-time
                continue
            if self.policy.by_busy:  # the busy share since the last instant, before anything changes it
                timers.observe_busy(self, now)
            demand = self.waiting.demand
            if self.anywhere:
                place_anywhere(self, now)
            elif self.head_of_line:  # nobody passes the head: a pass stops there, so it is cheap
                if candidates or freed:
                    self.place_in_order(self.waiting.in_order(), now)
            elif relook or (freed and demand and self.free.total_free >= min(demand)):
                place_waiting(self, now)
            elif not freed:
                keys = {self.waiting.key[i] for i in candidates} - {None}
                self.place_in_order(sorted(keys), now)  # type: ignore[arg-type]
            if (freed or guarded) and self.policy.name == "network-preempt" and self.spread_running:
                if migrate_spread_jobs(self, now) and demand:
                    place_waiting(self, now)
            while self.requeue:  # jobs preempted (las) queue again, and may take GPUs still free now
                requeued, self.requeue = self.requeue, []
                for index in requeued:
                    self.waiting.add(index, self.key(index), self.gpus[index])
                if self.free.total_free:
                    place_anywhere(self, now)
            self.retime_all(now)
            if self.timeline is not None:
                busy = self.cluster.total_gpus - self.free.total_free
                self.timeline.append((now, len(self.waiting), busy))
        if len(self.waiting):  # cannot happen with an empty cluster taking any job that fits; the invariant
            raise RuntimeError(f"simulation ended with {len(self.waiting)} job(s) never placed")
        return [self.outcomes[i] for i in range(len(self.jobs))]

    def key(self, index: int) -> tuple:
        """The queue order: arrival; estimated duration (sjf); LAS queue, then arrival (las)."""
        name = self.policy.name
        if name == "sjf":
            return (self.estimate[index], self.rank[index], index)
        if name == "las":
            return (self.las[index], self.rank[index], index)
        return (self.rank[index], index)

    def may_wait_for(self, index: int) -> bool:
        """LAS: whether a waiting job is in a higher-priority queue than the running job `index`."""
        first = self.waiting.first()
        return first is not None and first[0] < self.las[index]

    def enqueue(self, index: int) -> None:
        self.waiting.add(index, self.key(index), self.gpus[index])

    # ---- one pass over the waiting jobs
    def place_in_order(self, todo, now: float) -> None:
        """Walk the waiting jobs in order; start each the policy lets start where the free GPUs are."""
        free = self.free
        failed: set[tuple[int, str]] = set()  # (GPUs, level) that found no placement in this pass
        for key in todo:
            index = key[-1]
            if self.waiting.key[index] is not key:
                continue
            need = self.gpus[index]
            if need > free.total_free:
                if free.total_free == 0 or self.head_of_line:
                    break
                continue
            level = self.allowed_level(index, now)
            placement = None if (need, level) in failed else free.place(need, level)
            if placement is None:
                if self.head_of_line:
                    break
                failed.add((need, level))
                if index not in self.skipped_since:  # it could run now, spread: its timer starts
                    self.start_timer(index, now)
                continue
            self.start(index, placement, now)

    def allowed_level(self, index: int, now: float) -> str:
        if index not in self.skipped_since:  # its timer has not started: a zero timer relaxes at once
            return "any" if self.timer_of(index) <= 0 else "node"
        return _allowed_level(self.timers[index], self.skipped_since[index], now)

    def comm_for(self, index: int):
        return timers.comm_for(self, index)

    def timer_of(self, index: int) -> float:
        return timers.timer_of(self, index)

    def start_timer(self, index: int, now: float) -> None:
        timer = self.timer_of(index)
        self.timers[index] = timer
        self.skipped_since[index] = now
        self.waiting.skip(index, now + timer)  # the sum allowed_level() compares with
        for deadline in timer_deadlines(timer, now):
            heapq.heappush(self.events, (deadline, self.order, TIMER, index, 0))
            self.order += 1

    # ---- starting, stopping and re-timing running jobs
    def start(self, index: int, placement: dict[int, int], now: float) -> None:
        job, need = self.jobs[index], self.gpus[index]
        self.free.take(placement)
        self.waiting.remove(index, need)
        if index not in self.first_start:
            self.first_start[index] = now
            self.wait_s += WAIT_WEIGHT * (now - job.submit_s - self.wait_s)
        self.skipped_since.pop(index, None)
        self.run_at(index, placement, now)

    def run_at(self, index: int, placement: dict[int, int], now: float) -> None:
        """Put a job on `placement` (taken already) with what it has left to do."""
        job = self.jobs[index]
        level = self.free.level_of(placement, job.gpus)
        if LOOSENESS[level] > LOOSENESS[self.loosest[index]]:
            self.loosest[index] = level
        crossed = links_of(placement, self.cluster.nodes_per_switch) if self.links is not None else []
        comm = (self.comm[index] or self.comm_for(index)) if crossed else None  # cached terms without a call
        restore, self.pending_restore[index] = self.pending_restore[index], 0.0
        run = Running(placement, level, crossed, comm, self.work_left[index], restore, now, now,
                       self.order)  # fmt: skip
        self.running[index] = run
        self.order += 1
        if self.las_limits is not None:
            if index in self.promoted:  # running again: back in the queue its service puts it in
                self.promoted.discard(index)
                self.las[index] = self.las_queues.queue_of(self.attained[index])
            if self.policy.min_run_s > 0:
                guard_at = now + self.policy.min_run_s
                heapq.heappush(self.events, (guard_at, self.order, GUARD, index, run.start_id))
                self.order += 1
            else:
                self.may_be_preempted(index)
        if level != "node":
            self.spread_running.add(index)
            if self.policy.name == "network-preempt" and self.policy.min_run_s > 0:  # look again then
                guard_at = now + self.policy.min_run_s
                heapq.heappush(self.events, (guard_at, self.order, GUARD, index, run.start_id))
                self.order += 1
        if self.links is not None and crossed:
            self.links.add(index, crossed)
            self.changed_links.update(crossed)
            if level == "node":  # its duration holds its communication alone on these links
                run.alone = comm.slowdown(self.links.alone_rate(crossed)) - 1.0
        self.touched.add(index)

    def stop(self, index: int, now: float) -> Running:
        """Take a job off its GPUs and links, its progress up to `now` counted."""
        run = self.running.pop(index)
        progress(self, index, run, now)
        self.free.give_back(run.placement)
        self.spread_running.discard(index)
        if self.las_limits is not None:
            self.las_queues.leave(self.las[index], self.rank[index], index, self.gpus[index])
        if self.links is not None and run.links:
            self.links.remove(index, run.links)
            self.changed_links.update(run.links)
        self.work_left[index] = max(0.0, run.work_s)
        return run

    def finish(self, index: int, now: float) -> None:
        run = self.stop(index, now)
        job = self.jobs[index]
        self.estimates.finished(job)
        self.outcomes[index] = JobOutcome(job, self.first_start[index], now, self.loosest[index],
                                          len(run.placement), self.preemptions[index], self.held[index],
                                          self.restored[index])  # fmt: skip

    def preempt(self, index: int, now: float) -> None:
        """Stop a running job and queue it again; it pays the checkpoint cost when it restarts."""
        self.stop(index, now)
        self.preemptions[index] += 1
        self.pending_restore[index] = self.policy.checkpoint_s
        self.requeue.append(index)
        factor = self.policy.starve_factor
        if factor > 0 and self.las[index] > 0:  # LAS: promoted if it waits longer than factor x its run
            promote_at = now + factor * self.held[index]
            heapq.heappush(self.events, (promote_at, self.order, PROMOTE, index, self.preemptions[index]))
            self.order += 1

    def may_be_preempted(self, index: int) -> None:
        """LAS: a running job past its guard joins the preemptable jobs, unless preempted enough already."""
        if self.preemptions[index] < self.policy.max_preemptions:
            self.las_queues.join(self.las[index], self.rank[index], index, self.gpus[index])

    def promote(self, index: int) -> None:
        """LAS: a starving waiting job goes back to the top queue."""
        self.waiting.remove(index, self.gpus[index])
        self.las[index] = 0
        self.promoted.add(index)
        self.enqueue(index)

    def migrate(self, index: int, placement: dict[int, int], now: float) -> None:
        """Restart a running job at once on `placement` (its own GPUs given back, the new ones taken)."""
        self.stop(index, now)
        self.free.take(placement)
        self.preemptions[index] += 1
        self.pending_restore[index] = self.policy.checkpoint_s
        self.run_at(index, placement, now)

    def retime_all(self, now: float) -> None:
        """Re-time the jobs started or moved to another LAS queue at this instant, then those whose speed
        the links changed at this instant did change (timing.py)."""
        moved = self.links.reallocate(self.changed_links) if self.changed_links else []
        touched, running = self.touched, self.running
        if touched:  # in job order: event order numbers must not follow set order
            retime_many(self, [index for index in sorted(touched) if index in running], now)
            if moved:
                retime_many(self, [index for index in moved if index not in touched], now)
            touched.clear()
        elif moved:
            retime_many(self, moved, now)
        self.changed_links.clear()
        if len(self.events) > 2 * self.swept_at + 1024:
            sweep_events(self)
