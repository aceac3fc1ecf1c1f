"""spotDNN's provisioning: the cheapest cluster of instances that reaches a target loss within a time budget.

Eqs. 11-14 minimise the cost over integer counts n_m <= quota_m within the budget. Where the count vectors
with a total between the bounds of eqs. 15-16 are few enough (MAX_EXACT_MIXES, MAX_EXACT_WORKERS) every one
is evaluated: the answer is the cheapest. Otherwise the paper's heuristic: expand the instance types by their
quota, sort the instances by their iteration time, and for every worker count n between the bounds slide a
window of n adjacent instances over that order (O((n_upper - n_lower + 1) x instances)); a mix that skips a
type in the middle of that order is never tried, so the answer says it may not be the cheapest. Ties go to
the fewest workers, then to the most of the faster types (the window nearest the fastest instances).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from stash_core.errors import UsageError
from stash_core.spot.clusters import ClusterCache, Plan, window_counts
from stash_core.spot.model import (
    MAX_WORKER_BOUND,
    Worker,
    Workload,
    check_loss_model,
    worker_bounds,
    worker_iteration_s,
)

PLAN_BASIS = "predicted by the spotDNN model (asynchronous PS training); not a measurement"
# The exact search's limits: some 17 us per mix (1.7 us per worker in it) on the 2-core development
# machine, so at most some 0.2 s per plan (5 types of quota 13 at n_upper 13: 8,562 mixes, 0.16 s).
# `stash spot` plans up to 15 times (fragility re-plans once per nudged coefficient).
MAX_EXACT_MIXES = 10_000  # count vectors evaluated
MAX_EXACT_WORKERS = 100_000  # workers over them
# What an answer of the window heuristic says (searched_workers, hence `stash spot`'s first line)
WINDOW_NOTE = (
    "window heuristic (spotDNN's): too many mixes of counts to try all, so only instances adjacent in speed "
    "order were combined and a cheaper mix may exist"
)
MAX_CANDIDATES = 200_000  # windows kept per plan (each a Plan in memory)
MAX_WORKER_EVALUATIONS = 10_000_000  # workers over all windows (a cluster costs its types: some 25 us)
# Why no plan, where every candidate is outside the loss model (the budget is not to blame)
OUTSIDE_LOSS_MODEL = (
    "the loss model does not hold at the batch sizes on offer (g2 x batch + g3 <= 0, or the target reached "
    "with no training): refit g1..g5 over these batch sizes"
)


@dataclass(frozen=True)
class InstanceOffer:
    """An instance type on offer: `quota` instances of it may be rented."""

    worker: Worker
    quota: int


@dataclass
class PlanResult:
    best: Plan | None
    candidates: list[Plan] = field(default_factory=list)
    bounds: tuple[int, int] = (0, 0)
    infeasible_reason: str | None = None
    search: str | None = None  # "exact": every mix of counts; "window": the paper's heuristic; None: unsaid


def plan_spot_cluster(
    offers: list[InstanceOffer],
    workload: Workload,
    target_loss: float,
    budget_s: float,
    ps_Bps: float,
    pcie_Bps: float,
    revocation_s: float = 0.0,
) -> PlanResult:
    """The cheapest cluster whose predicted training time is within `budget_s`: of every mix of counts
    where they are few enough (`search` "exact"), else of the windows of sorted instances ("window")."""
    if not offers:
        raise UsageError("no instances on offer")
    for value, what in ((budget_s, "time budget"), (ps_Bps, "parameter-server bandwidth"),
                        (pcie_Bps, "PCIe bandwidth")):  # fmt: skip
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{what} must be a positive number, got {value!r}")
    if revocation_s < 0:
        raise UsageError(f"revocation overhead must not be negative, got {revocation_s!r}")
    offered = [offer for offer in offers if offer.quota > 0]
    if not offered:
        raise UsageError("every instance type has a quota of 0")
    solo_s = {id(o.worker): worker_iteration_s(o.worker, 1, workload, ps_Bps, pcie_Bps) for o in offered}
    for o in offered:
        check_iteration_s(o.worker, solo_s[id(o.worker)])
    fastest_speed = max(o.worker.batch / solo_s[id(o.worker)] for o in offered)
    smallest_batch, largest_batch = min(o.worker.batch for o in offered), max(o.worker.batch for o in offered)
    check_loss_model(workload.loss_g, target_loss, smallest_batch, largest_batch)
    # No refusal here of a target one worker reaches untrained: eq. 3 asks for more iterations as R and the
    # workers grow, so a larger cluster may still train; each cluster outside the model is marked so.
    lower, upper = worker_bounds(workload, target_loss, budget_s, smallest_batch, fastest_speed,
                                 largest_batch)  # fmt: skip
    # Sort by each instance's iteration time alone with the PS (eq. 6 at n = 1), fastest first. No cluster
    # holds more than n_upper workers, so instances beyond it on a quota cannot matter.
    kinds = sorted(offered, key=lambda o: (solo_s[id(o.worker)], o.worker.usd_per_h, o.worker.instance))
    caps = [min(o.quota, upper) for o in kinds]
    top = min(upper, sum(caps))
    check_candidates(lower, top, sum(caps))
    exact = exact_search_fits(caps, lower, top)
    result = PlanResult(best=None, bounds=(lower, upper), search="exact" if exact else "window")
    clusters = ClusterCache([o.worker for o in kinds], workload, target_loss, budget_s, ps_Bps, pcie_Bps,
                            revocation_s)  # fmt: skip
    for counts in window_counts(caps, lower, top):  # the paper's windows first: candidates either way
        plan = clusters.evaluate(counts)  # (the page counts them)
        result.candidates.append(plan)
        if not exact and cheaper(plan, result.best):
            result.best = plan
    if exact:  # every mix, a window's from the cache; fewest workers first: on a tie the first found stays
        for counts in mix_counts(caps, lower, top):
            plan = clusters.lookup(counts)
            if plan is None:  # a mix no window holds
                plan = clusters.evaluate(counts)
                result.candidates.append(plan)
            if cheaper(plan, result.best):
                result.best = plan
    if result.best is None:
        result.infeasible_reason = _why_none(result, sum(o.quota for o in offered), lower, upper, budget_s,
                                             target_loss)
    return result


# A tie within this share of the cost: clusters of equal types summed by type (count x term) can differ in
# the last bit where per-worker sums did not, and a tie keeps the plan found first.
TIE_SHARE = 1e-12


def cheaper(plan: Plan, best: Plan | None) -> bool:
    """Whether `plan` meets the budget for less than `best`: on a tie the plan found first stays."""
    return plan.meets_budget and (best is None or plan.cost_usd < best.cost_usd * (1 - TIE_SHARE))


def check_iteration_s(worker: Worker, iteration_s: float) -> None:
    """Refuse a worker whose iteration time (eqs. 6-7, alone) the model cannot compute with: so short that
    its speed 1 / T overflows (compute_s and the model size near 1e-320), it gives T_exp = 0 and
    b_w = 0 x inf, NaN; infinite, it makes every time and cost infinite."""
    if not (math.isfinite(iteration_s) and iteration_s > 0 and math.isfinite(worker.batch / iteration_s)):
        raise UsageError(
            f"instance {worker.instance}: an iteration of {iteration_s:g} s (compute {worker.compute_s:g} s "
            "plus push, pull and PCIe) is beyond what the model can compute with: check compute_s and the "
            "model size"
        )


def exact_search_fits(caps: list[int], lower: int, top: int) -> bool:
    """Whether the count vectors (n_m <= caps[m], total between lower and top) are few enough to evaluate
    every one: at most MAX_EXACT_MIXES of them and MAX_EXACT_WORKERS workers over them."""
    if top < lower:  # no count to search: nothing is missed
        return True
    # every total from 0 to sum(caps) has a mix, so these many workers at least; and counting stays quick
    if (lower + top) * (top - lower + 1) // 2 > MAX_EXACT_WORKERS or len(caps) * (top + 1) > 100_000:
        return False
    ways = [1] + [0] * top  # ways[s]: vectors of the types so far with s instances in all
    for cap in caps:
        running, summed = 0, []
        for s in range(top + 1):  # ways'[s] = ways[s - cap] + ... + ways[s], a running sum
            running += ways[s] - (ways[s - cap - 1] if s > cap else 0)
            summed.append(running)
        ways = summed
    counted = ways[lower : top + 1]
    workers = sum(n * w for n, w in zip(range(lower, top + 1), counted, strict=True))
    return sum(counted) <= MAX_EXACT_MIXES and workers <= MAX_EXACT_WORKERS


def mix_counts(caps: list[int], lower: int, top: int) -> Iterator[tuple[int, ...]]:
    """Every count vector n_m <= caps[m] with lower..top instances, in the windows' order: fewest instances
    first, then the most of the first (fastest) kinds. Only the kinds a mix holds are stepped through (a
    catalog of a thousand types with one in the mix costs one step, not a thousand)."""
    room = [0] * (len(caps) + 1)  # room[m]: instances the kinds from m on can hold
    for m in range(len(caps) - 1, -1, -1):
        room[m] = room[m + 1] + caps[m]

    def chosen(start: int, left: int) -> Iterator[tuple[tuple[int, int], ...]]:
        """(kind, count) of `left` more instances from kind `start` on, the most of the first kinds first."""
        if left == 0:
            yield ()
            return
        for m in range(start, len(caps)):
            if room[m] < left:
                return  # the kinds from m on cannot hold what is left
            for here in range(min(caps[m], left), 0, -1):
                if room[m + 1] < left - here:
                    break  # fewer here leaves more than the later kinds hold
                for tail in chosen(m + 1, left - here):
                    yield ((m, here), *tail)

    for n in range(lower, top + 1):
        for mix in chosen(0, n):
            counts = [0] * len(caps)
            for m, count in mix:
                counts[m] = count
            yield tuple(counts)


def check_candidates(lower: int, top: int, pool_size: int) -> None:
    """Refuse a search beyond MAX_CANDIDATES windows or MAX_WORKER_EVALUATIONS (minutes, gigabytes)."""
    sizes = range(max(lower, 1), top + 1)
    windows = sum(pool_size - n + 1 for n in sizes)
    if windows > MAX_CANDIDATES or sum((pool_size - n + 1) * n for n in sizes) > MAX_WORKER_EVALUATIONS:
        raise UsageError(
            f"{windows:,} candidate clusters (up to {top} workers from {pool_size} instances) are too many "
            f"to evaluate in reasonable time (at most {MAX_CANDIDATES:,} clusters and "
            f"{MAX_WORKER_EVALUATIONS:,} workers over them): offer fewer instances"
        )


def _why_none(result: PlanResult, offered: int, lower: int, upper: int, budget_s: float,
              target_loss: float) -> str:  # fmt: skip
    if upper < 1:
        return "the parameter server saturates even with one worker (a1, b1 give P >= 1 at n = 1)"
    if lower > min(upper, offered):
        limit = "the parameter server's limit allows" if upper < offered else "the quotas allow"
        most = min(upper, offered)  # the budget said as a time: the page calls it a deadline
        return f"training within {budget_s:,.0f} s needs {_needed(lower)} but {limit} at most {most:,}"
    if result.candidates and all(plan.untrained for plan in result.candidates):
        return (f"the loss model has the loss below the target {target_loss:g} before any training on every "
                "cluster offered: nothing to train (a lower target, or g1..g5 refitted)")  # fmt: skip
    if all(plan.outside_loss_model for plan in result.candidates):
        return OUTSIDE_LOSS_MODEL
    fastest = min(result.candidates, key=lambda plan: plan.training_s)
    searched = min(upper, offered)  # the fastest of the clusters searched: fewer workers cannot (eq. 16)
    sizes = f"{lower} worker{'s' * (lower != 1)}" if lower == searched else f"{lower} to {searched} workers"
    return (
        f"no cluster of {sizes} trains within {budget_s:,.0f} s: the fastest of them, {fastest.label()}, "
        f"needs {fastest.training_s:,.0f} s"
    )


def plan_table(result: PlanResult, limit: int = 10) -> list[dict[str, Any]]:
    """The cheapest candidates within the budget, then the fastest outside it, as rows for printing."""
    # on a tie in cost the planner's own choice first: the plan said to be best and the table's first row
    inside = sorted(
        (p for p in result.candidates if p.meets_budget), key=lambda p: (p.cost_usd, p is not result.best)
    )
    outside = sorted((p for p in result.candidates if not p.meets_budget), key=lambda p: p.training_s)
    rows, seen = [], set()
    for plan in [*inside, *outside]:
        if plan.label() in seen:  # windows over identical instances repeat a cluster
            continue
        seen.add(plan.label())
        if len(rows) == limit:
            break
        rows.append(
            {
                "cluster": plan.label(),
                "workers": plan.workers,
                "iteration_s": plan.iteration_s,
                "R": plan.convergence,
                "iterations": plan.iterations,
                "training_s": plan.training_s,
                "usd_per_h": plan.usd_per_h,
                "cost_usd": plan.cost_usd,
                "within_budget": plan.meets_budget,
                "outside_loss_model": plan.outside_loss_model,  # no time or cost: training_s, cost_usd inf
            }
        )
    return rows


def searched_workers(result: PlanResult) -> str:
    """The worker counts searched: eqs. 15-16's bounds, and where the offered quotas hold fewer, those."""
    lower, upper = result.bounds
    if lower > upper:  # the budget is too short for any count: the bounds cross
        return f"none (eqs. 15-16 need {_needed(lower)} within the budget but allow at most {upper})"
    if not result.candidates:  # the offered instances hold fewer workers than the budget needs
        return f"none (eqs. 15-16 need {_needed(lower)} within the budget; the offered instances hold fewer)"
    most = max(plan.workers for plan in result.candidates)
    allow = (
        "set no upper bound that a quota reaches" if upper >= MAX_WORKER_BOUND else f"allow up to {upper:,}"
    )
    note = f"; {WINDOW_NOTE}" if result.search == "window" else ""
    if most < upper:
        return f"{lower} to {most} (eqs. 15-16 {allow}; the offered instances hold {most}){note}"
    return f"{lower} to {upper} (eqs. 15-16){note}"


def _needed(lower: int) -> str:
    """Eq. 16's workers in words: at MAX_WORKER_BOUND the bound is a cap, not a figure (beyond any quota)."""
    if lower >= MAX_WORKER_BOUND:
        return f"over {MAX_WORKER_BOUND:,} workers"
    return f"at least {lower:,} worker{'s' * (lower != 1)}"
