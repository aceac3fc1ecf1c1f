"""Whom network-sensitive preemption moves: spread jobs that would gain from consolidation (policy.py);
LAS victims are in las.py.

Both (las.py and this) respect the guard against thrashing: a job runs `min_run_s` since its last start
before it may be stopped, and is stopped at most `max_preemptions` times. The scheduler judges a spread
job's gain by what it can know: its slowdown now (placement and congestion) and its ESTIMATED remaining
work, estimate minus the work done (progress it observes); a job that has outrun its estimate is expected
to end soon (no gain).
"""

from __future__ import annotations

from typing import Any


def may_preempt(engine: Any, index: int, now: float) -> bool:
    policy = engine.policy
    run = engine.running[index]
    # the guard's own sum (the simulator pushes its event at started + min_run_s), so rounding cannot disagree
    return run.started + policy.min_run_s <= now and engine.preemptions[index] < policy.max_preemptions


def consolidation_gain_s(engine: Any, index: int, now: float) -> float:
    """Seconds of running a consolidated placement would save the job, by the scheduler's estimates."""
    run = engine.running[index]
    elapsed = now - run.since
    working = max(0.0, elapsed - run.restore_s)
    done_s = engine.jobs[index].duration_s - (run.work_s - working / run.slowdown)
    remaining_s = max(0.0, engine.estimate[index] - done_s)
    return (run.slowdown - 1.0) * remaining_s


def migrate_spread_jobs(engine: Any, now: float) -> bool:
    """Move the spread jobs that gain more than the checkpoint costs into a tightest placement free now,
    the biggest gain first. Whether any moved."""
    free, cost = engine.free, engine.policy.checkpoint_s
    ranked = []
    for index in engine.spread_running:
        if may_preempt(engine, index, now):
            gain = consolidation_gain_s(engine, index, now)
            if gain > cost:
                ranked.append((-gain, engine.rank[index], index))
    moved = False
    for _, _, index in sorted(ranked):
        run, need = engine.running[index], engine.gpus[index]
        if need <= free.gpus_per_node and not _could_fit_one_node(free, run.placement, need):
            continue
        free.give_back(run.placement)
        placement = free.place(need, "node")
        free.take(run.placement)
        if placement is None or free.level_of(placement, need) != "node":
            continue
        engine.migrate(index, placement, now)
        moved = True
    return moved


def _could_fit_one_node(free: Any, own: dict[int, int], need: int) -> bool:
    """Cheap check before trying: some node has `need` GPUs free once the job's own are given back."""
    if any(free.free[node] + count >= need for node, count in own.items()):
        return True
    return max(free.free) >= need
