"""A candidate cluster as counts of instance types, evaluated in time proportional to its types.

A search weighs tens of thousands of clusters of up to hundreds of workers (a window of n sorted instances
for every n and start; every mix of counts), and a simulation re-plans after every revocation. Every worker
of one type in a cluster of n has the same iteration time (eqs. 6-7 depend on its instance and n alone), so
the sums of eqs. 2, 4 and 5 are sums over the types of count x term: a cluster costs its types, not its
workers (a re-plan weighing 38,000 windows of up to 280 workers took 7 s when each worker was summed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stash_core.spot.model import (
    Worker,
    Workload,
    iterations_to_loss,
    loss_scale,
    worker_iteration_s,
)


@dataclass
class Plan:
    """One candidate cluster and what the model predicts for it."""

    counts: dict[str, int]  # instances of each type
    workers: int
    iteration_s: float  # T_exp, eq. 2
    weighted_batch: float  # b_w, eq. 4
    convergence: float  # R, eq. 5
    iterations: float  # j, eq. 3
    training_s: float  # T, eq. 1, with the revocation overhead
    usd_per_h: float
    cost_usd: float
    meets_budget: bool
    outside_loss_model: bool = False  # g2 b_w + g3 <= 0, or no iteration needed: the model does not hold
    untrained: bool = False  # outside because the model has the loss below the target before any training

    def label(self) -> str:
        return " + ".join(f"{count} x {name}" for name, count in sorted(self.counts.items()))


def evaluate(
    cluster: list[Worker],
    workload: Workload,
    target_loss: float,
    budget_s: float,
    ps_Bps: float,
    pcie_Bps: float,
    revocation_s: float = 0.0,
    *,
    times: list[float] | None = None,
) -> Plan:
    """Predict training time and cost of one cluster (eqs. 1-7); `times`: each worker's eq. 6-7 iteration
    time at this cluster size, where the caller has it already."""
    n = len(cluster)
    if times is None:
        times = [worker_iteration_s(w, n, workload, ps_Bps, pcie_Bps) for w in cluster]
    kinds: dict[int, Worker] = {}  # each type once, in the order the cluster holds them
    counts: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for worker, time_s in zip(cluster, times, strict=True):
        kinds.setdefault(id(worker), worker)
        counts[id(worker)] = counts.get(id(worker), 0) + 1
        seconds.setdefault(id(worker), time_s)
    return evaluate_counts(list(kinds.values()), list(counts.values()), list(seconds.values()), workload,
                           target_loss, budget_s, revocation_s)  # fmt: skip


def evaluate_counts(kinds: Sequence[Worker], counts: Sequence[int], times: Sequence[float],
                    workload: Workload, target_loss: float, budget_s: float,
                    revocation_s: float = 0.0) -> Plan:  # fmt: skip
    """The plan of counts[m] instances of kinds[m] (a count may be 0), each with iteration time times[m] at
    this cluster's size (eqs. 6-7): eqs. 1-5 summed over the types."""
    n, rate, speed, usd_per_h = 0, 0.0, 0.0, 0.0  # rate: sum of 1 / T_i; speed: v, samples per second
    held, named = [], {}
    for kind, count, time_s in zip(kinds, counts, times, strict=True):
        if count:
            held.append((count, kind.batch / time_s))
            n += count
            rate += count / time_s
            speed += count * kind.batch / time_s
            usd_per_h += count * kind.usd_per_h
            named[kind.instance] = named.get(kind.instance, 0) + count
    t_exp = 1.0 / rate  # eq. 2
    b_w = speed * t_exp  # eq. 4
    # eq. 5: one worker of the type with the largest share is w_1; every other worker adds its share squared
    first = max(range(len(held)), key=lambda m: held[m][1])
    others = 0.0
    for m, (count, share) in enumerate(held):
        others += (count - (m == first)) * (share / speed) ** 2
    r = math.sqrt((held[first][1] / speed - 1) ** 2 + others)
    # Outside the loss model's range no plan is free: it is refused, not trained in zero seconds. That is
    # also a batch at which the model says the target is reached untrained (j <= 0: a $0, 0 s "plan").
    outside = loss_scale(b_w, workload.loss_g) <= 0
    j = math.inf if outside else iterations_to_loss(b_w, r, n, target_loss, workload.loss_g)
    untrained = not outside and j <= 0
    outside = outside or untrained
    j = math.inf if outside else j
    training_s = j * t_exp + revocation_s
    return Plan(
        counts=named,
        workers=n,
        iteration_s=t_exp,
        weighted_batch=b_w,
        convergence=r,
        iterations=j,
        training_s=training_s,
        usd_per_h=usd_per_h,
        cost_usd=training_s / 3600 * usd_per_h,
        meets_budget=not outside and training_s <= budget_s,
        outside_loss_model=outside,
        untrained=untrained,
    )


class ClusterCache:
    """The plans of one search's clusters by their counts of `kinds`: each distinct cluster evaluated once
    (windows over identical instances are one cluster: a quota of 64 of one type gives about 2,000 windows
    but 64 clusters), and each type's iteration time once per cluster size."""

    def __init__(self, kinds: Sequence[Worker], workload: Workload, target_loss: float, budget_s: float,
                 ps_Bps: float, pcie_Bps: float, revocation_s: float = 0.0) -> None:  # fmt: skip
        self.kinds = list(kinds)
        self._args = (workload, target_loss, budget_s, revocation_s)
        self._links = (ps_Bps, pcie_Bps)
        self._plans: dict[tuple[int, ...], Plan] = {}
        self._times: dict[int, list[float]] = {}

    def lookup(self, counts: tuple[int, ...]) -> Plan | None:
        """The plan of a cluster evaluated already, else None."""
        return self._plans.get(counts)

    def evaluate(self, counts: tuple[int, ...]) -> Plan:
        plan = self._plans.get(counts)
        if plan is None:
            times = self.iteration_s(sum(counts))
            plan = self._plans[counts] = evaluate_counts(self.kinds, counts, times, *self._args)
        return plan

    def iteration_s(self, workers: int) -> list[float]:
        """Each type's iteration time (eqs. 6-7) in a cluster of `workers`."""
        if workers not in self._times:
            workload = self._args[0]
            self._times[workers] = [
                worker_iteration_s(kind, workers, workload, *self._links) for kind in self.kinds
            ]
        return self._times[workers]


def window_counts(
    caps: Sequence[int], lower: int, top: int, base: Sequence[int] = ()
) -> Iterator[tuple[int, ...]]:
    """The counts of every window of `lower`..`top` adjacent instances over the pool of caps[m] instances of
    each type in order, fewest first, then from the pool's start (spotDNN's heuristic), each with `base`
    (instances every cluster holds) added. A window of 0 instances is `base` alone, once."""
    base = list(base) or [0] * len(caps)
    pool = [m for m, cap in enumerate(caps) for _ in range(cap)]
    for n in range(lower, min(top, len(pool)) + 1):
        if n == 0:
            yield tuple(base)
            continue
        counts = list(base)
        for m in pool[:n]:
            counts[m] += 1
        yield tuple(counts)
        for start in range(1, len(pool) - n + 1):  # slide by one: one instance leaves, one enters
            counts[pool[start - 1]] -= 1
            counts[pool[start + n - 1]] += 1
            yield tuple(counts)
