"""When running jobs finish: their speed now, their progress, and the events that say so (simulator.py).

A running job holds work (consolidated seconds) and a slowdown (seconds per second of work) fixed by its
placement, or with a fabric by the rate its flow gets on the links it shares (fabric.py). Its finish (and
LAS demotion) event carries a version; re-timing the job pushes new events and makes the old ones stale,
skipped when popped and swept out when they outnumber the live ones.

A finish that moves later is not pushed at once: while an older finish event of the same run, at or before
it, is still queued (its anchor), that one comes out first, and only then is the finish now pushed, still
before every event that comes after it, in the same (time, order) as if pushed at the re-timing. The
events come out in the same order either way; jobs re-timed many times while running on congested links
(tens of times each) push about half as many events.

With a fabric, the starts and ends of one instant are all applied first, and only then are jobs re-timed:
the max-min fair rates are recomputed once per instant, and only the jobs whose rate moved are re-timed
(`retime_many`, the arithmetic of `retime` for many jobs at once).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

from stash_core.sched.fabric import Comm

# GUARD: a job may be preempted from now on; PROMOTE: a preempted LAS job starves (las.py)
FINISH, TIMER, DEMOTE, GUARD, PROMOTE = 0, 1, 2, 3, 4


@dataclass(slots=True)  # a fixed set of fields: smaller, and made and read a little faster
class Running:
    placement: dict[int, int]
    level: str
    links: list[int]
    comm: Comm | None  # its communication terms with a fabric (fabric.py)
    work_s: float  # consolidated seconds of work left at `since`
    restore_s: float  # checkpoint seconds left to pay at `since`, before any work
    since: float
    started: float
    start_id: int
    alone: float = 0.0  # tightest placement on links: the slowdown its duration already holds, minus 1
    slowdown: float = 1.0  # seconds per consolidated second of work, now
    version: int = -1
    finish_at: float = math.inf  # its finish now, event (finish_at, version) ...
    pending: bool = False  # ... not pushed yet, while its anchor is queued
    anchor_at: float = math.inf  # a queued finish event of this run at or before its finish now
    anchor_order: int = -1
    demote_at: float = math.inf  # its LAS demotion now (inf: none), event (demote_at, version + 1) ...
    demote_pending: bool = False  # ... not pushed yet, while its anchor is queued
    demote_anchor_at: float = math.inf  # a queued demotion event of this run (inf: none)
    demote_anchor_order: int = -1


def progress(engine: Any, index: int, run: Running, now: float) -> None:
    """Count a running job's restore, work and service up to `now` at its current speed."""
    elapsed = now - run.since
    restoring = min(elapsed, run.restore_s)
    run.restore_s -= restoring
    run.work_s -= (elapsed - restoring) / run.slowdown
    run.since = now
    engine.held[index] += elapsed
    engine.restored[index] += restoring
    engine.attained[index] += elapsed * engine.gpus[index]


def slowdown_now(engine: Any, index: int, run: Running, job_slowdown: float) -> float:
    """Seconds per second of work on its placement now; with a fabric, at the rate its flow gets."""
    links = engine.links
    if links is None:
        return slowdown_at(run.level, job_slowdown, engine.uplink_factor)
    if not run.links or run.comm is None:
        return 1.0
    return run.comm.slowdown(links.rate[index]) - run.alone


def retime(engine: Any, index: int, now: float, slowdown: float | None = None) -> None:
    """Give a running job its speed now (`slowdown` when known already) and new finish/demotion events."""
    run = engine.running[index]
    job = engine.jobs[index]
    if slowdown is None:
        slowdown = slowdown_now(engine, index, run, job.slowdown)
    elapsed = now - run.since  # progress(), inlined: this runs for every change of speed
    restoring = min(elapsed, run.restore_s)
    run.restore_s -= restoring
    run.work_s -= (elapsed - restoring) / run.slowdown
    run.since = now
    engine.held[index] += elapsed
    engine.restored[index] += restoring
    engine.attained[index] += elapsed * job.gpus
    run.slowdown = slowdown
    order = run.version = engine.order
    finish_at = run.finish_at = now + run.restore_s + max(0.0, run.work_s) * slowdown
    if run.anchor_at <= finish_at:  # its anchor comes out first: pushed then (module docstring)
        run.pending = True
    else:
        heapq.heappush(engine.events, (finish_at, order, FINISH, index, order))
        run.anchor_at, run.anchor_order, run.pending = finish_at, order, False
    engine.order = order + 1
    limits = engine.las_limits
    if limits is not None and engine.las[index] < len(limits):
        demote_at = now + max(0.0, limits[engine.las[index]] - engine.attained[index]) / job.gpus
        if demote_at < finish_at:
            run.demote_at = demote_at
            if run.demote_anchor_at <= demote_at:
                run.demote_pending = True
            else:
                heapq.heappush(engine.events, (demote_at, order + 1, DEMOTE, index, order))
                run.demote_anchor_at, run.demote_anchor_order = demote_at, order + 1
                run.demote_pending = False
            engine.order = order + 2
            return
    run.demote_at, run.demote_pending = math.inf, False


def retime_many(engine: Any, indices: list[int], now: float) -> None:
    """retime() for each running job of `indices`, in that order: the same arithmetic (max and min written
    as comparisons that return the same operand), with the look-ups done once; it runs for every job whose
    rate moved, tens of times per instant on a congested cluster."""
    running, jobs, events, push = engine.running, engine.jobs, engine.events, heapq.heappush
    held, restored, attained, las = engine.held, engine.restored, engine.attained, engine.las
    gpus_of, limits = engine.gpus, engine.las_limits
    queues = len(limits) if limits is not None else 0
    rate = engine.links.rate if engine.links is not None else None
    order, inf = engine.order, math.inf
    for index in indices:
        run = running[index]
        if rate is None:
            slowdown = slowdown_at(run.level, jobs[index].slowdown, engine.uplink_factor)
        elif run.links and (comm := run.comm) is not None:  # Comm.slowdown(rate) - alone
            exposed = comm.gbit / rate[index] - comm.overlap
            slowdown = 1.0 + (exposed if exposed > 0.0 else 0.0) - run.alone
        else:
            slowdown = 1.0
        elapsed = now - run.since
        restore_s = run.restore_s
        if restore_s:  # a restore to pay first
            restoring = restore_s if restore_s < elapsed else elapsed
            restore_s -= restoring
            run.restore_s = restore_s
            restored[index] += restoring
            work_s = run.work_s - (elapsed - restoring) / run.slowdown
            work_from = now + restore_s
        else:  # the same sums with nothing to restore (x - 0.0 and x + 0.0 are x)
            work_s = run.work_s - elapsed / run.slowdown
            work_from = now
        run.work_s = work_s
        run.since = now
        held[index] += elapsed
        gpus = gpus_of[index]
        attained[index] += elapsed * gpus
        run.slowdown = slowdown
        run.version = order
        finish_at = run.finish_at = work_from + (work_s if work_s > 0.0 else 0.0) * slowdown
        if run.anchor_at <= finish_at:  # its anchor comes out first: pushed then (module docstring)
            run.pending = True
        else:
            push(events, (finish_at, order, FINISH, index, order))
            run.anchor_at, run.anchor_order, run.pending = finish_at, order, False
        if limits is not None and las[index] < queues:
            short_gpu_s = limits[las[index]] - attained[index]
            demote_at = now + (short_gpu_s if short_gpu_s > 0.0 else 0.0) / gpus
            if demote_at < finish_at:
                run.demote_at = demote_at
                if run.demote_anchor_at <= demote_at:
                    run.demote_pending = True
                else:
                    push(events, (demote_at, order + 1, DEMOTE, index, order))
                    run.demote_anchor_at, run.demote_anchor_order = demote_at, order + 1
                    run.demote_pending = False
                order += 2
                continue
        run.demote_at, run.demote_pending = inf, False
        order += 1
    engine.order = order


def unanchor(run: Running, index: int) -> tuple[float, int, int, int, int]:
    """The finish event of a run whose anchor came out (or was swept): queued now, as its own anchor."""
    run.pending, run.anchor_at, run.anchor_order = False, run.finish_at, run.version
    return (run.finish_at, run.version, FINISH, index, run.version)


def unanchor_demotion(run: Running, index: int) -> tuple[float, int, int, int, int]:
    """The demotion event of a run whose anchor came out (or was swept): queued now, as its own anchor."""
    run.demote_pending, run.demote_anchor_at, run.demote_anchor_order = False, run.demote_at, run.version + 1
    return (run.demote_at, run.version + 1, DEMOTE, index, run.version)


def stale_came_out(engine: Any, run: Running, index: int, kind: int, order: int) -> None:
    """A stale finish or demotion event of a running job came out: when it was the anchor of the job's
    event now, that one is pushed now."""
    if kind == FINISH:
        if run.pending and order == run.anchor_order:
            heapq.heappush(engine.events, unanchor(run, index))
    elif order == run.demote_anchor_order:
        if run.demote_pending:
            heapq.heappush(engine.events, unanchor_demotion(run, index))
        else:  # no demotion now (a pushed one is its own anchor, and live): nothing anchors any more
            run.demote_anchor_at = math.inf


def sweep_events(engine: Any) -> None:
    """Drop the stale finish, demotion and guard events (their job stopped or was re-timed since)."""
    running = engine.running
    get = running.get
    live = [
        event
        for event in engine.events
        if event[2] == TIMER
        or event[2] == PROMOTE  # about waiting jobs: checked when they fire
        or (
            (run := get(event[3])) is not None
            and event[4] == (run.start_id if event[2] == GUARD else run.version)
        )
    ]
    for index, run in running.items():  # an event waiting for its anchor: the anchor may be gone
        if run.pending:
            live.append(unanchor(run, index))
        if run.demote_pending:
            live.append(unanchor_demotion(run, index))
        elif run.demote_at == math.inf:  # no demotion now: its anchor, if any, was stale and is gone
            run.demote_anchor_at = math.inf
    heapq.heapify(live)
    engine.events = live
    engine.swept_at = len(live)


def slowdown_at(level: str, slowdown: float, uplink_factor: float) -> float:
    """Without a fabric: tightest 1, looser on the same switches `slowdown`, more switches worse."""
    if level == "node":
        return 1.0
    if level == "switch":
        return slowdown
    return 1.0 + (slowdown - 1.0) * uplink_factor
