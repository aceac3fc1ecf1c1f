"""Re-plan after a revocation: spotDNN's algorithm with instances already running.

The instances still running stay in every candidate; 0, 1, 2, ... of the instances on offer (each type's
quota less its running instances) are added, up to the parameter server's bound (eq. 15): every mix of them
where they are few enough, else the windows of them sorted by iteration time (spotDNN's heuristic).
Training resumes from the loss reached so far: on a cluster whose loss curve is A / (j + g1) + g5 (eq. 3,
A = (g2 b_w + g3) sqrt((R + g4) n)) the loss `current_loss` stands at j_now = A / (current_loss - g5) - g1,
so the iterations left are A (1 / (L_obj - g5) - 1 / (current - g5)).
The time budget is what is left of it; the revocation overhead is added to every candidate.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

from stash_core.errors import UsageError
from stash_core.spot.clusters import ClusterCache, Plan, evaluate, window_counts
from stash_core.spot.model import (
    Worker,
    Workload,
    check_loss_model,
    iterations_to_loss,
    most_workers,
    predicted_loss,
    worker_iteration_s,
)
from stash_core.spot.planner import (
    OUTSIDE_LOSS_MODEL,
    InstanceOffer,
    PlanResult,
    cheaper,
    check_candidates,
    check_iteration_s,
    exact_search_fits,
    mix_counts,
)


def remaining_plan(cluster: list[Worker], workload: Workload, target_loss: float, current_loss: float,
                   budget_s: float, ps_Bps: float, pcie_Bps: float, revocation_s: float = 0.0, *,
                   times: list[float] | None = None) -> Plan:  # fmt: skip
    """The plan of `cluster` from `current_loss` on: iterations, time and cost of what is left (`times`: each
    worker's iteration time at this cluster size, where the caller has it)."""
    plan = evaluate(cluster, workload, target_loss, budget_s, ps_Bps, pcie_Bps, 0.0, times=times)
    return remaining_of(plan, workload, target_loss, current_loss, budget_s, revocation_s)


def remaining_of(plan: Plan, workload: Workload, target_loss: float, current_loss: float, budget_s: float,
                 revocation_s: float = 0.0) -> Plan:  # fmt: skip
    """A whole training's `plan` (planned with no revocation overhead) from `current_loss` on."""
    if plan.outside_loss_model or current_loss <= target_loss:
        left = 0.0 if current_loss <= target_loss and not plan.outside_loss_model else plan.iterations
    else:
        done = iterations_to_loss(plan.weighted_batch, plan.convergence, plan.workers, current_loss,
                                  workload.loss_g)  # fmt: skip
        left = plan.iterations - max(done, 0.0)
        # inf - inf (a loss model whose eq. 3 overflows): not "nothing left", which max() would make of NaN
        left = math.inf if math.isnan(left) else max(0.0, left)
    training_s = left * plan.iteration_s + revocation_s
    return dataclasses.replace(
        plan, iterations=left, training_s=training_s, cost_usd=training_s / 3600 * plan.usd_per_h,
        meets_budget=not plan.outside_loss_model and training_s <= budget_s,
    )  # fmt: skip


def loss_after(
    plan: Plan, workload: Workload, target_loss: float, current_loss: float, elapsed_s: float
) -> float:
    """The loss after `elapsed_s` of training `plan` from `current_loss` (eq. 3 along the plan's curve)."""
    if plan.outside_loss_model or current_loss <= target_loss:
        return current_loss
    done = iterations_to_loss(
        plan.weighted_batch, plan.convergence, plan.workers, current_loss, workload.loss_g
    )
    j = max(done, 0.0) + max(elapsed_s, 0.0) / plan.iteration_s
    return max(
        target_loss, predicted_loss(plan.weighted_batch, plan.convergence, plan.workers, j, workload.loss_g)
    )


def replan(running: list[Worker], offers: list[InstanceOffer], workload: Workload, target_loss: float,
           current_loss: float, budget_s: float, ps_Bps: float, pcie_Bps: float,
           revocation_s: float = 0.0) -> PlanResult:  # fmt: skip
    """The cheapest cluster of the running instances plus offered ones that reaches `target_loss` from
    `current_loss` within `budget_s` (what is left of the budget): of every mix of the offered kinds where
    they are few enough (`search` "exact"), else of the windows of them sorted by speed ("window")."""
    if not math.isfinite(budget_s):
        raise UsageError(f"remaining budget must be a number, got {budget_s!r}")
    batches = [w.batch for w in running] + [o.worker.batch for o in offers if o.quota > 0]
    if not batches:
        raise UsageError("no instances running and none on offer")
    check_loss_model(workload.loss_g, target_loss, min(batches), max(batches))
    if current_loss <= workload.loss_g[4]:
        raise UsageError(f"current loss {current_loss:g} is at or below the loss model's floor "
                         f"g5 = {workload.loss_g[4]:g}")  # fmt: skip
    upper = most_workers(workload)
    room = max(0, upper - len(running))  # no cluster holds more than n_upper workers: the rest cannot matter
    in_use = Counter(w.instance for w in running)
    pool = [
        offer.worker
        for offer in offers
        for _ in range(min(max(offer.quota - in_use[offer.worker.instance], 0), room))
    ]
    for worker in {id(w): w for w in [*running, *pool]}.values():
        check_iteration_s(worker, worker_iteration_s(worker, 1, workload, ps_Bps, pcie_Bps))
    pool.sort(key=lambda w: (worker_iteration_s(w, 1, workload, ps_Bps, pcie_Bps), w.usd_per_h, w.instance))
    most_new = max(0, min(upper, len(running) + len(pool)) - len(running))
    check_candidates(1, most_new, len(pool))
    result = PlanResult(best=None, bounds=(len(running), len(running) + most_new))
    # A cluster is the running instances' counts (`base`) plus a window or a mix of the pool's; the pool's
    # types first, in its order (by speed: a type's instances adjacent), then the running ones' other types.
    kinds = list({id(w): w for w in [*pool, *running]}.values())
    index = {id(kind): m for m, kind in enumerate(kinds)}
    base, caps = [0] * len(kinds), [0] * len(kinds)
    for w in running:
        base[index[id(w)]] += 1
    for w in pool:
        caps[index[id(w)]] += 1
    clusters = ClusterCache(kinds, workload, target_loss, budget_s, ps_Bps, pcie_Bps)  # each once
    plans: dict[tuple[int, ...], Plan] = {}

    def consider(counts: tuple[int, ...], counted: bool) -> None:
        """Plan a cluster from the current loss (once per distinct cluster), keep it if cheapest;
        `counted`: a window, listed as a candidate each time (the page counts them)."""
        fresh = counts not in plans
        if fresh:
            plans[counts] = remaining_of(clusters.evaluate(counts), workload, target_loss, current_loss,
                                         budget_s, revocation_s)  # fmt: skip
        plan = plans[counts]
        if counted or fresh:
            result.candidates.append(plan)
        if cheaper(plan, result.best):
            result.best = plan

    fewest = 0 if running else 1
    for counts in window_counts(caps, fewest, most_new, base):
        consider(counts, counted=True)
    # Every mix of the offered kinds where they are few enough, as spot.planner does: a window is one mix.
    result.search = "exact" if exact_search_fits([cap for cap in caps if cap], fewest, most_new) else "window"
    if result.search == "exact":
        for added in mix_counts(caps, fewest, most_new):
            consider(tuple(a + b for a, b in zip(added, base, strict=True)), counted=False)
    if result.best is None and not result.candidates and upper < max(1, len(running)):
        result.infeasible_reason = (
            f"the parameter server saturates before {max(1, len(running))} worker(s) (a1, b1 give P >= 1): "
            "no cluster was evaluated"
        )
    elif result.best is None and result.candidates and all(p.untrained for p in result.candidates):
        result.infeasible_reason = (  # as spot.planner says it: the model is past the target already
            f"the loss model is below the target {target_loss:g} before any more training on every cluster "
            f"(its curve starts there, whatever the current loss {current_loss:g}): nothing to plan (a lower "
            "target, or g1..g5 refitted to this training)"
        )
    elif result.best is None and result.candidates and all(p.outside_loss_model for p in result.candidates):
        result.infeasible_reason = OUTSIDE_LOSS_MODEL
    elif result.best is None:
        trained = [plan for plan in result.candidates if not (plan.untrained or plan.outside_loss_model)]
        fastest = min(trained, key=lambda plan: plan.training_s) if trained else None
        needs = f": the fastest, {fastest.label()}, needs {fastest.training_s:,.0f} s" if fastest else ""
        result.infeasible_reason = (
            f"no cluster with the {len(running)} running instance(s) reaches loss {target_loss:g} from "
            f"{current_loss:g} within the {budget_s:,.0f} s left{needs}"
        )
    return result


def workers_of(plan: Plan, offers: list[InstanceOffer]) -> list[Worker]:
    """The Worker of every instance in a plan (for simulating it)."""
    by_name = {offer.worker.instance: offer.worker for offer in offers}
    return [by_name[name] for name, count in sorted(plan.counts.items()) for _ in range(count)]
