"""Is a spot plan fragile? Re-plan with each fitted coefficient nudged and see whether the answer moves.

The coefficients (a1, b1 of the contention model, g1..g5 of the loss model) are fits with errors of a few
per cent. A plan that changes when one of them moves by that much rests on the fit's error, and the user
should know before renting on it.
"""

from __future__ import annotations

import dataclasses

from stash_core.errors import UsageError
from stash_core.spot.model import Workload
from stash_core.spot.planner import InstanceOffer, PlanResult, plan_spot_cluster

DEFAULT_NUDGE = 0.05  # relative change of one coefficient: the order of a fit's error


def fragile_coefficients(
    result: PlanResult,
    offers: list[InstanceOffer],
    workload: Workload,
    target_loss: float,
    budget_s: float,
    ps_Bps: float,
    pcie_Bps: float,
    revocation_s: float = 0.0,
    nudge: float = DEFAULT_NUDGE,
) -> list[str]:
    """The nudges ("g3 +5%") under which the plan differs from `result.best` (another cluster, or none)."""
    answer = result.best.label() if result.best else None
    moved = []
    for name, changed in _nudged_workloads(workload, nudge):
        try:
            other = plan_spot_cluster(offers, changed, target_loss, budget_s, ps_Bps, pcie_Bps, revocation_s)
        except UsageError:
            other = None  # the nudged model has no answer at all: as fragile as a different one
        other_answer = other.best.label() if other is not None and other.best else None
        if other_answer != answer:
            moved.append(name)
    return moved


def _nudged_workloads(workload: Workload, nudge: float):
    for name in ("contention_a1", "contention_b1"):
        value = getattr(workload, name)
        for sign in (+1, -1):
            if value == 0:
                continue
            label = f"{name.removeprefix('contention_')} {sign * nudge:+.0%}"
            try:
                yield label, dataclasses.replace(workload, **{name: value * (1 + sign * nudge)})
            except UsageError:
                continue  # a nudge outside the coefficient's range (a1 must stay positive)
    for index, value in enumerate(workload.loss_g):
        for sign in (+1, -1):
            if value == 0:
                continue
            loss_g = list(workload.loss_g)
            loss_g[index] = value * (1 + sign * nudge)
            yield f"g{index + 1} {sign * nudge:+.0%}", dataclasses.replace(workload, loss_g=tuple(loss_g))


COEFFICIENT_WORDS = {
    "a1": "the contention model's slope a1",
    "b1": "the contention model's offset b1",
    "g1": "the loss model's iteration offset g1",
    "g2": "the loss model's batch-size slope g2",
    "g3": "the loss model's loss-scale constant g3",
    "g4": "the loss model's worker offset g4",
    "g5": "the loss model's loss floor g5",
}


def fragile_text(nudges: list[str]) -> str:
    """The nudges of spot.fragility ("g3 +5%", "g3 -5%") in words: "the loss model's loss-scale constant g3
    is 5% higher or lower, or the contention model's slope a1 is 5% lower"."""
    changes: dict[tuple[str, str], list[str]] = {}
    for nudge in nudges:
        name, _, change = nudge.partition(" ")
        directions = changes.setdefault((name, change.lstrip("+-")), [])
        directions.append("lower" if change.startswith("-") else "higher")
    phrases = []
    for (name, size), directions in changes.items():
        what = COEFFICIENT_WORDS.get(name, f"the fitted coefficient {name}")
        phrases.append(f"{what} is {size} {' or '.join(dict.fromkeys(directions))}" if size else what)
    return ", or ".join(phrases)
