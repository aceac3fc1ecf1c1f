"""Spot-instance cluster planning with the spotDNN model: the cheapest instances that reach a target loss
in time."""

from stash_core.spot.clusters import Plan, evaluate
from stash_core.spot.model import Worker, Workload
from stash_core.spot.planner import InstanceOffer, PlanResult, plan_spot_cluster, plan_table

__all__ = [
    "InstanceOffer",
    "Plan",
    "PlanResult",
    "Worker",
    "Workload",
    "evaluate",
    "plan_spot_cluster",
    "plan_table",
]
