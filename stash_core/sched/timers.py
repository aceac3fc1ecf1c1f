"""How long a skipped job waits (simulator.py): its timer from the policy, what spreading would cost it on
these links, and the observed GPU busy share the by_busy timers scale with.

With a fabric, a network timer's slowdown is the job's slowdown spread alone on the slower of the node and
switch uplinks (fabric.py), not the trace's figure at its reference bandwidth: the break-even point of
waiting is what spreading costs on this cluster. The busy share is an exponentially weighted average over
BUSY_TAU_S divided by the weight observed so far, so it has no cold start (75% busy from the first second
reads 0.75, not 0.75 x the share of an hour that has passed).
"""

from __future__ import annotations

import math
from typing import Any

from stash_core.sched.fabric import Comm, comm_of, grad_bytes_of
from stash_core.sched.policy import BUSY_TAU_S


def comm_for(engine: Any, index: int) -> Comm:
    """The job's communication terms on this fabric, computed once."""
    if engine.comm[index] is None:
        job = engine.jobs[index]
        grad_bytes = job.grad_bytes or grad_bytes_of(job.model)
        engine.comm[index] = comm_of(job.gpus, grad_bytes, job.slowdown, engine.links.fabric.reference_gbps,
                                     job.iteration_s)  # fmt: skip
    return engine.comm[index]


def timer_of(engine: Any, index: int) -> float:
    if engine.busy_mass > 0:
        busy = engine.busy / engine.busy_mass
    else:
        busy = 1.0 - engine.free.total_free / engine.cluster.total_gpus
    slowdown = engine.jobs[index].slowdown
    if engine.links is not None:
        fabric = engine.links.fabric
        slowdown = comm_for(engine, index).slowdown(min(fabric.node_gbps, fabric.uplink_gbps))
    return engine.policy.timer_s(slowdown, engine.estimate[index], engine.wait_s, busy)


def observe_busy(engine: Any, now: float) -> None:
    """Fold the busy share since the last instant into the average, before anything changes it."""
    weight = 1.0 - math.exp(-(now - engine.busy_at) / BUSY_TAU_S) if now > engine.busy_at else 0.0
    share = 1.0 - engine.free.total_free / engine.cluster.total_gpus
    engine.busy, engine.busy_at = engine.busy + weight * (share - engine.busy), now
    engine.busy_mass += weight * (1.0 - engine.busy_mass)
