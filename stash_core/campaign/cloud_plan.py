"""The plan of a cloud campaign, priced before anything starts: per instance type, its catalog row (price,
price date, region), the configurations to run there and those stored already, and the predicted time of
each profile (the step model's iteration time and the campaign's settings), start-up included.

Time on a rented machine runs from its launch to its teardown:
    launch (PROVISION_S) + set-up of Stash and its pinned packages (SETUP_S) + every profile not stored yet
    + copying back and teardown (FINISH_S);
a profile is its start (PROFILE_START_S: the process, the model, the data) and, per run of its chain
(engine/plan.py), each launch's start (LAUNCH_START_S) and its iterations at the predicted step time, never
more than the run's time cap (`stash profile`'s default --max-phase-seconds, which a campaign's profiles
keep). With --iterations auto a run is counted at its cap: it stops at the default --max-iterations
iterations or at the cap, whichever comes first (often earlier, at its target interval). A model the step
model cannot predict is counted at the cap of each run. Cost = time x the
catalog's hourly price (on-demand, or spot with --spot), as the clouds bill it by the second. An instance
type whose configurations are all stored costs nothing: it is not launched.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from stash_core.campaign.cloud_workdir import model_ref, refuse_without_checkout, workdir_file, workdir_models
from stash_core.campaign.plan import (
    CampaignItem,
    CampaignSettings,
    check_measurable_plan,
    completed_keys,
    plan_campaign,
    plan_script_campaign,
    profile_spec,
    split_done,
)
from stash_core.campaign.shapes import shape_for
from stash_core.catalog import get_instance
from stash_core.catalog.prices import hourly_price
from stash_core.catalog.unknown_names import not_in_catalog_text
from stash_core.engine.plan import launches_of, plan_phases
from stash_core.errors import UsageError
from stash_core.store.catalog_seed import source_region
from stash_core.units import finite_float

PROVISION_S = 300.0  # a VM started and SkyPilot's runtime on it (typically 2 to 5 minutes)
SETUP_S = 300.0  # a Python 3.11 environment and the pinned packages, CUDA torch included (some 3 GB)
FINISH_S = 60.0  # the last results copied back, and the teardown until billing stops
PROFILE_START_S = 30.0  # a profile's process, model and data before its first launch
LAUNCH_START_S = 8.0  # each launch's workers started (torchrun, CUDA context)
PROBE_S = 10.0  # the bandwidth probe after a run of several workers
DEFAULT_REGIONS = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
# How each cloud names its regions (us-east-1, europe-west4, westeurope): a region of another cloud, or of
# none, is refused before a task names it (SkyPilot would fail at launch, after the plan's figures).
REGION_SHAPES = {
    "aws": re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+"),
    "gcp": re.compile(r"[a-z]+-[a-z]+\d+"),
    "azure": re.compile(r"[a-z]+[a-z0-9]*"),
}
CLOUDS = tuple(DEFAULT_REGIONS)
MAX_INSTANCE_TYPES = 50


@dataclass(frozen=True)
class Offer:
    """One instance type as the catalog prices it."""

    name: str
    provider: str
    region: str  # where it is launched: --region, else the region of its price, else the cloud's default
    price_region: str | None  # the region the catalog's price is for, when the catalog says
    gpus: int
    accelerator: str | None
    usd_per_h: float
    spot: bool
    price_date: str | None

    @property
    def pricing(self) -> str:
        return "spot" if self.spot else "on-demand"


@dataclass(frozen=True)
class ProfileEstimate:
    item: CampaignItem
    seconds: float
    basis: str  # "step model", or "time cap": every run at its cap (or no prediction of this model here)


@dataclass
class InstancePlan:
    """One instance type: its offer, cluster name, the profiles to run there and those already stored."""

    offer: Offer
    cluster: str
    todo: list[ProfileEstimate]
    stored: list[CampaignItem]

    @property
    def overhead_s(self) -> float:
        return PROVISION_S + SETUP_S + FINISH_S if self.todo else 0.0

    @property
    def profiles_s(self) -> float:
        return sum(estimate.seconds for estimate in self.todo)

    @property
    def seconds(self) -> float:
        return self.overhead_s + self.profiles_s

    @property
    def cost_usd(self) -> float:
        return self.seconds / 3600.0 * self.offer.usd_per_h

    @property
    def items(self) -> list[CampaignItem]:
        return [estimate.item for estimate in self.todo]


@dataclass
class CloudPlan:
    instances: list[InstancePlan]
    spot: bool
    parallel: int = 1
    notes: list[str] = field(default_factory=list)
    price_warning: str = ""  # prices older than recommend's limit, or undated: the plan spends money at them

    @property
    def cost_usd(self) -> float:
        return sum(plan.cost_usd for plan in self.instances)

    @property
    def cost_said_usd(self) -> float:
        """The total as said: the sum of each instance type's cost in cents rounded up, so that the rows add
        up to it (each rounded apart, $1.28 and $0.19 read beside a total of $1.46)."""
        return round(sum(cents_up(plan.cost_usd) for plan in self.instances), 2)

    @property
    def machine_s(self) -> float:
        return sum(plan.seconds for plan in self.instances)

    @property
    def wall_s(self) -> float:
        """The campaign's duration with --parallel N: the longest instance types first, each to the first
        free slot."""
        slots = [0.0] * max(1, self.parallel)
        for seconds in sorted((plan.seconds for plan in self.instances if plan.todo), reverse=True):
            slots[slots.index(min(slots))] += seconds
        return max(slots)

    @property
    def price_dates(self) -> list[str]:
        return sorted({plan.offer.price_date or "undated" for plan in self.instances})


# (model, batch size, workers, instance names) -> {instance: (iteration_s, compute_s)}, plus notes
Predict = Callable[[str, int, int, list[str]], tuple[dict[str, tuple[float, float]], list[str]]]


def offer_of(db_path: Path | str, name: str, spot: bool = False, region: str | None = None) -> Offer:
    """The catalog's row of `name` as an Offer; UsageError (one line) when it is not in the catalog, is not
    on a cloud SkyPilot launches here, or has no price of the kind asked."""
    row = get_instance(db_path, name)
    if row is None:
        advice = (
            " (see `stash instances list`; add it with `stash instances add` or import SkyPilot's prices "
            "with `stash instances import --skypilot`)"
        )
        raise UsageError(not_in_catalog_text(db_path, name, f"instance type {name}", advice))
    provider = str(row.get("provider") or "").lower()
    if provider not in CLOUDS:
        raise UsageError(f"instance type {name} is on {provider or 'no cloud'}: --cloud launches on "
                         f"{', '.join(CLOUDS)}")  # fmt: skip
    if region is not None and not REGION_SHAPES[provider].fullmatch(region):
        raise UsageError(f"--region {region}: not a region of {provider}, where {name} is (its regions are "
                         f"named like {DEFAULT_REGIONS[provider]})")  # fmt: skip
    price, why = hourly_price(row, name, "spot" if spot else "on_demand")
    if price is None:
        raise UsageError(f"--spot: {why}" if spot else why)
    price_region = row.get("region") or source_region(row.get("source"))
    if region is None and price_region and not REGION_SHAPES[provider].fullmatch(str(price_region)):
        # the task would launch there: SkyPilot would fail at launch (or a catalog edit would be its infra)
        raise UsageError(f"{name}'s catalog region {str(price_region)!r} is not a region of {provider}: give "
                         f"--region (named like {DEFAULT_REGIONS[provider]}), or correct it with `stash "
                         f"instances set {name} --region ...`")  # fmt: skip
    gpus = finite_float(row.get("accelerator_count"))
    return Offer(
        name=name, provider=provider, region=region or price_region or DEFAULT_REGIONS[provider],
        price_region=price_region, gpus=int(gpus or 0), accelerator=row.get("accelerator") or None,
        usd_per_h=float(price), spot=spot,
        price_date=str(row["price_date"]) if row.get("price_date") else None,
    )  # fmt: skip



def cluster_name(instance: str, db_path: Path | str, spot: bool = False, region: str = "") -> str:
    """The SkyPilot cluster of one instance type for one database, region and pricing: the same name on every
    run of the same campaign, so a re-run after a crash finds (and reuses, or removes) the cluster it left;
    another region or spot is another cluster (SkyPilot refuses to relaunch one with other resources, and
    the failed launch's teardown would remove what the other campaign runs on)."""
    slug = re.sub(r"[^a-z0-9]+", "-", instance.lower()).strip("-")[:24].strip("-")
    key = f"{Path(db_path).resolve()}\0{instance}\0{region}\0{'spot' if spot else 'on-demand'}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:6]
    return f"stash-{slug}-{digest}"


def plan_cloud(
    instances: list[str],
    models: list[str],
    batch_sizes: list[int],
    workers: list[int] | None,
    settings: CampaignSettings,
    spot: bool = False,
    region: str | None = None,
    parallel: int = 1,
    predict: Predict | None = None,
    script: str | None = None,
    script_args: list[str] | None = None,
) -> CloudPlan:
    """Every instance type's offer, configurations (workers: the given counts, else all its GPUs) and the
    predicted time of each profile not stored yet; with `script`, the user's training script (its
    arguments `script_args`) instead of models, each profile counted at its time cap."""
    names = list(dict.fromkeys(name.strip() for name in instances if name.strip()))
    if not names:
        raise UsageError("--cloud needs --instances: a comma list of catalog instance types")
    if len(names) > MAX_INSTANCE_TYPES:
        raise UsageError(f"--instances: at most {MAX_INSTANCE_TYPES} instance types, got {len(names)}")
    refuse_without_checkout()
    models = workdir_models(models) if script is None else []
    named_script = workdir_file(script, "--script") if script is not None else None
    offers = [offer_of(settings.db_path, name, spot, region) for name in names]
    done = completed_keys(settings.db_path)  # read once for every instance type
    sweeps = []
    for offer in offers:
        counts = list(workers) if workers else [max(offer.gpus, 1)]
        too_many = [count for count in counts if offer.gpus and count > offer.gpus]
        if too_many:
            raise UsageError(f"--workers {max(too_many)}: {offer.name} has {offer.gpus} GPU(s)")
        if script is not None:  # read here, named on the rented machine by its place in the workdir
            read = plan_script_campaign(script, script_args or [], counts, [1], offer.name)
            sweep = [replace(item, script=named_script) for item in read]
        else:
            sweep = plan_campaign(models, batch_sizes, counts, [1], instance=offer.name, check_models=False)
        check_measurable_plan(sweep, settings)
        sweeps.append((offer, *_split_done_in_checkout(sweep, settings, done)))
    steps, notes = _predicted(sweeps, predict or predict_steps(settings))
    plans = []
    for offer, todo, stored in sweeps:
        estimates = []
        for item in todo:
            seconds, basis = profile_seconds(
                profile_spec(item, settings), steps.get((_config(item), offer.name))
            )
            estimates.append(ProfileEstimate(item, seconds, basis))
        plans.append(InstancePlan(offer, cluster_name(offer.name, settings.db_path, offer.spot, offer.region),
                                  estimates, stored))  # fmt: skip
    from stash_core.decide.recommend.explain import old_prices_line  # pandas: not for --help

    dated = [plan.offer.price_date for plan in plans if plan.offer.price_date]
    return CloudPlan(plans, spot, parallel, notes, old_prices_line(dated, len(plans) - len(dated)))


def _split_done_in_checkout(sweep: list[CampaignItem], settings: CampaignSettings,
                            done: dict) -> tuple[list[CampaignItem], list[CampaignItem]]:  # fmt: skip
    """split_done of a sweep whose model files are named by their path in the checkout, as the machines name
    them: their contents are compared as this checkout holds them, from whatever folder the campaign starts
    (from another, the relative name found no file and a changed model counted as stored)."""
    here = [replace(item, model=model_ref(item.model)) for item in sweep]
    todo, stored = split_done(here, settings, done)
    as_named = {id(local): item for local, item in zip(here, sweep, strict=True)}
    return [as_named[id(item)] for item in todo], [as_named[id(item)] for item in stored]


def _config(item: CampaignItem) -> tuple[str, int, int]:
    return (item.model, item.batch_size, item.workers_per_node)


def _predicted(sweeps: list, predict: Predict) -> tuple[dict, list[str]]:
    """{(configuration, instance): (iteration_s, compute_s)} from one prediction per configuration over every
    instance type that runs it, and the notes of what could not be predicted."""
    wanted: dict[tuple[str, int, int], list[str]] = {}
    for offer, todo, _ in sweeps:
        for item in todo:
            if item.script is None:  # a script's operators are its own: no step model
                wanted.setdefault(_config(item), []).append(offer.name)
    steps, notes = {}, []
    for config, names in wanted.items():
        found, why = predict(*config, names)
        steps.update({(config, name): value for name, value in found.items()})
        notes += [line for line in why if line not in notes]
    return steps, notes


def profile_seconds(spec, steps: tuple[float, float] | None) -> tuple[float, str]:
    """(seconds, basis) of one profile: its start, and each run of its chain at the predicted step time
    (iteration_s, compute_s for R0), never above the run's cap; every run at its cap when not predicted.
    The basis is "time cap" when every run is at its cap, else "step model"."""
    _, runs = plan_phases(spec)
    launches = launches_of(spec)
    iterations = spec.fixed_iterations if spec.fixed_iterations is not None else spec.max_iterations
    total, capped = PROFILE_START_S, True
    for run in runs:
        run_s = spec.max_phase_s
        if steps is not None:
            step_s = steps[1] if run.name == "R0" else steps[0]
            run_s = min(run_s, launches * LAUNCH_START_S + iterations * step_s)
        capped = capped and run_s >= spec.max_phase_s
        total += run_s + (PROBE_S if run.workers > 1 and spec.probes else 0.0)
    return total, "time cap" if capped else "step model"


def predict_steps(settings: CampaignSettings) -> Predict:
    """The step model's (iteration_s, compute_s) per instance for one configuration (decide/predict/); a
    model or instance it cannot predict has none, with the reason as a note."""
    from stash_core.decide.predict import predict_instances
    from stash_core.decide.predict.configuration import DOES_NOT_FIT

    def predict(model: str, batch_size: int, workers: int, names: list[str]):
        try:
            shape = shape_for(model, settings.input_shape)
            # the profiles run PyTorch's defaults (TF32 convolutions on GPUs with it): predicted so
            answer = predict_instances(settings.db_path, model_ref(model), batch_size, instances=names,
                                       workers_per_instance=workers, input_shape=shape,
                                       precision="pytorch")  # fmt: skip
        except UsageError as error:
            return {}, [f"{model}: no prediction ({error}); its runs are counted at their time cap"]
        steps = {
            str(row["instance"]): (float(row["iteration_s"]), float(row["compute_s"]))
            for row in answer.frame.to_dict(orient="records")
            if finite_float(row.get("iteration_s")) is not None
            and finite_float(row.get("compute_s")) is not None
        }
        # a job the GPU cannot hold would fail out of memory after its machine's start-up had been paid for
        if too_big := [line for line in answer.not_predictable if f": {DOES_NOT_FIT} - " in line]:
            raise UsageError(f"{model} batch {batch_size} on {too_big[0]}; leave that instance type, model "
                             "or batch size out of the campaign")  # fmt: skip
        notes = [
            f"{model} batch {batch_size}: {line}; counted at its time cap" for line in answer.not_predictable
        ]
        return steps, notes + list(answer.warnings)  # catalog rows an older Stash seeded: prices, links

    return predict


def cents_up(cost_usd: float) -> float:
    """A cost in whole cents, rounded up: a budget of the figure said passes ($1.03 never reads as above
    1.03), and the plan and its least profile read alike."""
    return math.ceil(round(cost_usd * 100, 6)) / 100


def check_budget(plan: CloudPlan, budget_usd: float | None) -> None:
    """UsageError (one line) when the plan costs more than --budget-usd."""
    if budget_usd is None or plan.cost_said_usd <= budget_usd:  # the total as said: a budget below it refused
        return
    cost = plan.cost_said_usd
    said = f"the plan costs up to ${cost:.2f} at catalog prices, above --budget-usd {budget_usd:.15g}"
    # the least any plan of these instance types costs: one profile on one of them, its start-up included
    least = min(
        ((item.overhead_s + min(estimate.seconds for estimate in item.todo)) / 3600.0 * item.offer.usd_per_h,
         item.offer.name) for item in plan.instances if item.todo
    )  # fmt: skip
    # what this plan needs, then what costs less: raising the budget to the least profile alone, as this
    # said once, still left a plan of several profiles refused
    less = "or plan less: fewer instance types, models or batch sizes, a fixed --iterations or a shorter " \
        "--max-phase-seconds"
    if budget_usd < least[0]:
        needed = cents_up(least[0])  # that budget passes
        less += f" (one profile alone on the cheapest, {least[1]}, costs up to ${needed:.2f} with its "
        less += "start-up)"
    raise UsageError(f"{said}: raise --budget-usd to {cost:.2f}, {less}")
