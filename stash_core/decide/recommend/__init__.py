"""Which instances to rent, how many, for a training job under a time budget (and optionally a cost cap).

Every configuration (catalog instance x instance count x workers per instance) gets an iteration time:
  - measured: a completed profile of the same model and batch size on that instance, worker and node count;
  - predicted: compute, CPU and disk stall from a profile of the model on the same instance (or another one
    with the same accelerator), plus interconnect and network stall predicted by the fitted stall models
    (stash_core.decide.fit) from the model's counts; marked "predicted" with the expected error.
Epoch = (images // workers) // batch iterations (stash_core.analysis.epochs, as the profiled loop counts it);
training = epochs x epoch; cost = training hours x hourly price x instances. Configurations that meet
the budget are ranked by cost; the time-cost Pareto front is marked; cheaper-looking alternatives get a
sentence on why they lose; an empty answer names the constraint that cannot be met.

Modules: candidates (the configurations and their iteration times), costs (time and money of one
configuration), pareto (budget, rank and Pareto front), explain (the sentences), answer (recommend()).
"""

from stash_core.decide.recommend.answer import DEFAULT_MAX_INSTANCES, Recommendation, recommend
from stash_core.decide.recommend.costs import OPTION_COLUMNS, STALL_NAMES
from stash_core.decide.recommend.explain import slowdown_cause

__all__ = [
    "DEFAULT_MAX_INSTANCES",
    "OPTION_COLUMNS",
    "STALL_NAMES",
    "Recommendation",
    "recommend",
    "slowdown_cause",
]
