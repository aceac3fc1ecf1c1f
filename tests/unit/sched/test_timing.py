"""timing.retime_many against timing.retime job by job: the same speeds, progress, service and events, to
the bit, with and without a fabric and LAS queues."""

from __future__ import annotations

import copy
import heapq
import math
import random
from types import SimpleNamespace

import pytest

from stash_core.sched.fabric import Comm
from stash_core.sched.timing import (
    DEMOTE,
    FINISH,
    Running,
    retime,
    retime_many,
    stale_came_out,
    sweep_events,
)
from stash_core.sched.trace import TraceJob


def _engine(rng: random.Random, fabric: bool, las: bool) -> SimpleNamespace:
    """Running jobs at random points of their run: some restoring, some past their work, some on links."""
    jobs, running, rate = [], {}, {}
    for index in range(30):
        gpus = rng.choice([1, 2, 4, 8, 16])
        jobs.append(TraceJob(f"j{index}", gpus, 0.0, 3600.0, None, rng.uniform(1.0, 3.0), "trace"))
        links = [index, -1] if fabric and rng.random() < 0.7 else []
        comm = Comm(rng.uniform(0.5, 40.0), rng.choice([0.0, rng.uniform(0.0, 2.0)])) if links else None
        if links:
            rate[index] = rng.uniform(1.0, 100.0)
        running[index] = Running({0: gpus}, rng.choice(["node", "switch", "any"]), links, comm,
                                 rng.uniform(-5.0, 3000.0), rng.choice([0.0, rng.uniform(0.0, 200.0)]),
                                 rng.uniform(0.0, 500.0), 0.0, index, alone=rng.choice([0.0, 0.25]),
                                 slowdown=rng.uniform(1.0, 4.0))  # fmt: skip
    limits = (600.0, 6000.0, 60000.0) if las else None
    return SimpleNamespace(
        jobs=jobs, gpus=[job.gpus for job in jobs], running=running, events=[], order=7, uplink_factor=2.0,
        las_limits=limits,
        las=[rng.randint(0, 3) for _ in jobs], held=[rng.uniform(0, 900) for _ in jobs],
        restored=[0.0] * len(jobs), attained=[rng.uniform(0, 9000) for _ in jobs],
        links=SimpleNamespace(rate=rate) if fabric else None,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_retiming_many_jobs_at_once_is_retiming_each(seed):
    rng = random.Random(seed)
    one = _engine(rng, fabric=seed % 2 == 0, las=seed % 3 != 0)
    many = copy.deepcopy(one)
    order = rng.sample(sorted(one.running), 20)
    now = 600.0
    for index in order:
        retime(one, index, now)
    retime_many(many, order, now)
    assert many.events == one.events and many.order == one.order
    assert many.running == one.running  # dataclass equality: every float to the bit
    assert (many.held, many.restored, many.attained) == (one.held, one.restored, one.attained)
    assert any(event[2] != 0 for event in one.events) or one.las_limits is None  # demotions were pushed too


def _run_events(engine: SimpleNamespace, heap: list, until: float, lazy: bool, seen: list) -> None:
    """Pop the events up to `until` as the simulator does: live ones happen (a finish ends the job, a
    demotion moves it down a queue and re-times it), stale ones are skipped, or (lazy) push what they
    anchored."""
    while heap and heap[0][0] <= until:
        at, order, kind, index, version = heapq.heappop(heap)
        run = engine.running.get(index)
        if run is not None and run.version == version:
            seen.append((at, order, kind, index))
            if kind == FINISH:
                del engine.running[index]
            else:
                run.demote_anchor_at = math.inf
                engine.las[index] += 1
                _retime(engine, heap, [index], at, lazy)
        elif run is not None and lazy:
            stale_came_out(engine, run, index, kind, order)


def _retime(engine: SimpleNamespace, heap: list, indices: list[int], now: float, lazy: bool) -> None:
    """retime_many; without `lazy`, every re-timed job's events pushed at once, as before anchors."""
    if lazy:
        retime_many(engine, indices, now)
        return
    engine.events = []
    retime_many(engine, indices, now)
    for index in indices:
        run = engine.running[index]
        heapq.heappush(heap, (run.finish_at, run.version, FINISH, index, run.version))
        if run.demote_at < math.inf:
            heapq.heappush(heap, (run.demote_at, run.version + 1, DEMOTE, index, run.version))


@pytest.mark.parametrize("seed", range(20))
def test_finishes_pushed_late_come_out_as_if_pushed_at_once(seed):
    # A finish or demotion that moved later is pushed only when an older event of the job (its anchor) comes
    # out: the events that happen, their order and every float are those of pushing every event at once.
    rng = random.Random(seed)
    lazy = _engine(rng, fabric=True, las=seed % 2 == 0)
    for run in lazy.running.values():
        run.since = 0.0
        if not run.links:
            run.links, run.comm, run.alone = [0, -1], Comm(rng.uniform(0.5, 40.0), 0.0), 0.0
    for index in lazy.running:
        lazy.links.rate[index] = rng.uniform(1.0, 100.0)
    eager = copy.deepcopy(lazy)
    seen_lazy, seen_eager, eager_heap = [], [], []
    _retime(lazy, lazy.events, sorted(lazy.running), 0.0, True)
    _retime(eager, eager_heap, sorted(eager.running), 0.0, False)
    now = 0.0
    for step in range(300):
        now += rng.expovariate(1 / 60.0)
        _run_events(lazy, lazy.events, now, True, seen_lazy)
        _run_events(eager, eager_heap, now, False, seen_eager)
        moved = sorted(rng.sample(sorted(lazy.running), min(len(lazy.running), rng.randint(1, 8))))
        for index in moved:  # rates up and down: finishes move later and earlier
            lazy.links.rate[index] = eager.links.rate[index] = rng.uniform(1.0, 100.0)
        _retime(lazy, lazy.events, moved, now, True)
        _retime(eager, eager_heap, moved, now, False)
        if step % 50 == 49:
            sweep_events(lazy)
    _run_events(lazy, lazy.events, math.inf, True, seen_lazy)
    _run_events(eager, eager_heap, math.inf, False, seen_eager)
    assert seen_lazy == seen_eager and not lazy.running
    assert (lazy.held, lazy.attained, lazy.las) == (eager.held, eager.attained, eager.las)
    assert len(seen_lazy) >= 30  # every job finished (and with LAS queues, some were demoted)
