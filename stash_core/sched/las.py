"""Tiresias-style least-attained-service (policy.py): the running jobs of each queue, whom to preempt, and
the promotion of starving jobs.

Queue k holds the jobs whose attained service (GPUs x seconds held) lies between the policy's limits k-1
and k. The running jobs of each queue are kept in preemption order (latest arrival first), so a waiting
job looks only at the jobs it may preempt, lowest priority first, and stops once they free enough GPUs.

Starvation (as in Tiresias): a preempted job that has waited, since it was preempted, longer than
`starve_factor` times the seconds it has run goes back to the top queue (0) until it starts again; once
running it is back in the queue its service puts it in. A factor of 0 turns promotion off.
"""

from __future__ import annotations

import bisect
from typing import Any


class LasQueues:
    """The running jobs that may be preempted now (past their guard, under the preemption cap), per queue,
    in preemption order, with their GPUs per queue: a waiting job that cannot gain enough GPUs is told so
    without a walk."""

    def __init__(self, limits_gpu_s: tuple[float, ...]) -> None:
        self.limits_gpu_s = limits_gpu_s
        self.ready: list[list[tuple[int, int]]] = [[] for _ in range(len(limits_gpu_s) + 1)]
        self.ready_gpus = [0] * (len(limits_gpu_s) + 1)
        self.members: set[int] = set()
        self.version = 0  # one more at every job joining or leaving

    def queue_of(self, attained_gpu_s: float) -> int:
        return sum(attained_gpu_s >= limit for limit in self.limits_gpu_s)

    def join(self, queue: int, rank: int, index: int, gpus: int) -> None:
        bisect.insort(self.ready[queue], (-rank, index))
        self.version += 1
        self.ready_gpus[queue] += gpus
        self.members.add(index)

    def leave(self, queue: int, rank: int, index: int, gpus: int) -> None:
        if index in self.members:
            self.version += 1
            jobs = self.ready[queue]
            del jobs[bisect.bisect_left(jobs, (-rank, index))]
            self.ready_gpus[queue] -= gpus
            self.members.discard(index)

    def move(self, old: int, new: int, rank: int, index: int, gpus: int) -> None:
        if index in self.members:
            self.leave(old, rank, index, gpus)
            self.join(new, rank, index, gpus)


def preempt_for(engine: Any, index: int, now: float) -> bool:
    """Preempt the fewest running jobs of queues below the waiting job's, lowest priority first (highest
    queue, then latest arrival), that may be preempted and free enough GPUs for it; whether it can start."""
    need, queue, queues = engine.gpus[index], engine.las[index], engine.las_queues
    have = engine.free.total_free
    if have + sum(queues.ready_gpus[queue + 1 :]) < need:
        return False
    chosen = []
    for below in range(len(queues.ready) - 1, queue, -1):
        for _, victim in queues.ready[below]:
            chosen.append(victim)
            have += engine.gpus[victim]
            if have >= need:
                for stopped in chosen:
                    engine.preempt(stopped, now)
                return True
    return False  # pragma: no cover - the GPU sums above said there were enough
