"""When running jobs finish: their speed now, their progress, and the events that say so (simulator.py).

A running job holds work (consolidated seconds) and a slowdown (seconds per second of work) fixed by its
placement, or with a fabric by the most loaded of its links (fabric.py). Its finish (and LAS demotion)
event carries a version; re-timing the job pushes new events and makes the old ones stale, skipped when
popped and swept out when they outnumber the live ones.

With a fabric, the starts and ends of one instant are all applied first, and only then are jobs re-timed:
a job is looked at only if a link it uses changed load, and re-timed only if its most loaded link's load
per bandwidth (its peak) did change. Each running job keeps its peak and the link it is on, so the check
per job and changed link is one comparison: the job's peak can only change if that link now exceeds it or
that link was the one at the peak.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

# GUARD: a job may be preempted from now on; PROMOTE: a preempted LAS job starves (las.py)
FINISH, TIMER, DEMOTE, GUARD, PROMOTE = 0, 1, 2, 3, 4


@dataclass
class Running:
    placement: dict[int, int]
    level: str
    links: list[int]
    grad_bytes: float
    work_s: float  # consolidated seconds of work left at `since`
    restore_s: float  # checkpoint seconds left to pay at `since`, before any work
    since: float
    started: float
    start_id: int
    alone: float = 0.0  # stretch of its communication alone on its links (fabric.py)
    peak: float = 0.0  # load / bandwidth of its most loaded link, when last timed
    bottleneck: int | None = None  # that link
    slowdown: float = 1.0  # seconds per consolidated second of work, now
    version: int = -1


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


def slowdown_now(engine: Any, run: Running, job_slowdown: float) -> float:
    """Seconds per second of work on its placement now; with a fabric, sets the job's peak link."""
    links = engine.links
    if links is None:
        return slowdown_at(run.level, job_slowdown, engine.uplink_factor)
    if not run.links:
        return 1.0
    ratio = links.ratio
    run.bottleneck = max(run.links, key=ratio.__getitem__)
    run.peak = ratio[run.bottleneck]
    stretch = links.fabric.node_gbps * run.peak / run.grad_bytes
    if run.level == "node":  # its tightest placement: its run time already holds what it has alone
        stretch -= run.alone
    return 1.0 + (job_slowdown - 1.0) * stretch


def retime(engine: Any, index: int, now: float, slowdown: float | None = None) -> None:
    """Give a running job its speed now (`slowdown` when known already) and new finish/demotion events."""
    run = engine.running[index]
    job = engine.jobs[index]
    if slowdown is None:
        slowdown = slowdown_now(engine, run, job.slowdown)
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
    finish_at = now + run.restore_s + max(0.0, run.work_s) * slowdown
    heapq.heappush(engine.events, (finish_at, order, FINISH, index, order))
    engine.order = order + 1
    limits = engine.las_limits
    if limits is not None and engine.las[index] < len(limits):
        demote_at = now + max(0.0, limits[engine.las[index]] - engine.attained[index]) / job.gpus
        if demote_at < finish_at:
            heapq.heappush(engine.events, (demote_at, order + 1, DEMOTE, index, order))
            engine.order = order + 2


def retime_changed_links(engine: Any, changed: set[int], skip: set[int], now: float) -> None:
    """Re-time the running jobs (not in `skip`) whose peak link load changed with the `changed` links."""
    ratio, users, running, jobs = engine.links.ratio, engine.links.users, engine.running, engine.jobs
    node_gbps = engine.links.fabric.node_gbps
    look: set[int] = set()
    for link in changed:
        load = ratio.get(link)
        if load is not None:  # else nobody is on it any more
            look.update([i for i in users[link] if load > running[i].peak or link == running[i].bottleneck])
    look -= skip
    for index in look:
        run = running[index]
        bottleneck = max(run.links, key=ratio.__getitem__)
        peak = ratio[bottleneck]
        run.bottleneck = bottleneck
        if peak != run.peak:
            run.peak = peak
            stretch = node_gbps * peak / run.grad_bytes
            if run.level == "node":
                stretch -= run.alone
            retime(engine, index, now, 1.0 + (jobs[index].slowdown - 1.0) * stretch)


def sweep_events(engine: Any) -> None:
    """Drop the stale finish, demotion and guard events (their job stopped or was re-timed since)."""
    running = engine.running
    live = []
    for event in engine.events:
        kind, index, version = event[2], event[3], event[4]
        run = running.get(index)
        if kind in (TIMER, PROMOTE):  # about waiting jobs: checked when they fire
            live.append(event)
        elif run is not None and version == (run.start_id if kind == GUARD else run.version):
            live.append(event)
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
