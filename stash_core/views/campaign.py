"""Campaign: the plan of `stash campaign --cloud` as frames for the page (what its --dry-run prints: per
instance type the predicted time and cost with the price's date, source and region, the total, a refusal above
the budget, and each instance type's SkyPilot task as YAML), whether SkyPilot is installed here, and the
command that launches the same campaign from a terminal.

The plan is the command's own (campaign/cloud_plan.py plan_cloud and check_budget, campaign/skypilot_task.py
task_config and to_yaml): the page and the command cannot disagree."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from stash_core.campaign import cloud_plan, skypilot_task
from stash_core.campaign.plan import CampaignSettings
from stash_core.catalog import is_stale_catalog_warning, list_instances
from stash_core.engine import jobs
from stash_core.errors import UsageError
from stash_core.spec_parse import BATCH_SIZE, MAX_NAME_CHARS, empty_item, parse_iterations, region
from stash_core.terminal import unsafe_character
from stash_core.zoo_names import zoo_models  # noqa: F401  (the page's model list)

DEFAULT_INSTANCES = ("g5.xlarge", "g4dn.xlarge", "p3.2xlarge")  # the example plan
DEFAULT_MODELS = ("resnet50",)
DEFAULT_IDLE_MINUTES = 15  # `stash campaign --idle-minutes`'s default
MAX_BATCH_SIZES = 64
# Shown: the instance type, where it runs, its price and date, what runs there, the minutes as the command
# counts them ("profiling + start-up = total"), what the profiling time comes from, the cost; then the same
# figures as numbers (the page hides them: the table fits a 1280 px window).
SHOWN_COLUMNS = ["instance", "where", "usd_per_h", "price_date", "runs", "time_min", "basis", "cost_usd"]
NUMBER_COLUMNS = ["cloud", "region", "pricing", "to_run", "stored", "profiling_min", "startup_min",
                  "machine_min"]  # fmt: skip
INSTANCE_COLUMNS = SHOWN_COLUMNS + NUMBER_COLUMNS
PRICE_COLUMNS = ["instance", "price_date", "price_region", "source"]


@dataclass(frozen=True)
class CampaignRequest:
    """What the Campaign form asks for: `stash campaign --cloud`'s options."""

    instances: tuple[str, ...]
    models: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    spot: bool = False
    region: str | None = None
    budget_usd: float | None = None
    iterations: str = "auto"
    parallel: int = 1
    idle_minutes: int = DEFAULT_IDLE_MINUTES


@dataclass
class TaskText:
    instance: str
    cluster: str
    yaml: str


@dataclass
class CampaignPlan:
    """The plan as the page shows it."""

    instances: pd.DataFrame  # INSTANCE_COLUMNS, one row per instance type
    prices: pd.DataFrame  # PRICE_COLUMNS: where each price comes from
    machine_s: float
    wall_s: float
    cost_usd: float
    price_dates: list[str]
    parallel: int
    spot: bool
    total_text: str  # the total as `--dry-run` words it
    assumptions: str  # the start-up assumed per instance type
    notes: list[str] = field(default_factory=list)
    price_warning: str = ""  # prices older than 90 days, or undated (cloud_plan.CloudPlan)
    catalog_warnings: list[str] = field(default_factory=list)  # rows an older Stash seeded (with a button)
    refusal: str | None = None  # the plan costs more than the budget: nothing may launch
    tasks: list[TaskText] = field(default_factory=list)  # none when refused

    @property
    def launchable(self) -> bool:
        return self.refusal is None and bool(self.tasks)


def usd_words(usd: float) -> str:
    """A budget as the form holds it: 1,234,567 or 12.5, never 1.23457e+06."""
    return f"{usd:,.2f}".removesuffix(".00")


def gpu_instances(db_path: Path | str) -> pd.DataFrame:
    """Catalog instance types SkyPilot can rent here (on aws, gcp or azure) with at least one GPU: name,
    cloud, GPUs and their kind, on-demand and spot USD/h, the price's date."""
    frame = list_instances(db_path)
    frame = frame[
        (frame["accelerator_count"].fillna(0) >= 1)
        & frame["provider"].fillna("").str.lower().isin(cloud_plan.CLOUDS)
    ]
    columns = ["name", "provider", "accelerator", "accelerator_count", "on_demand_usd_per_h",
               "spot_usd_per_h", "price_date"]  # fmt: skip
    return frame[columns].reset_index(drop=True)


def instance_names(choice: list[str] | tuple[str, ...], other_text: str = "") -> tuple[str, ...]:
    """The chosen instance types and those typed as a comma list (any name: the plan says which the catalog
    lacks), each once, in order."""
    typed = _comma_items(other_text, "other instance types")
    names = tuple(dict.fromkeys([*choice, *typed]))
    for name in names:
        _check_name(name, "instance type")
    return names


def _comma_items(text: str | None, field: str) -> list[str]:
    """A comma list's items (none for no text); an empty item ("32,,64") refused as the command refuses it."""
    if said := empty_item(str(text or "")):
        raise UsageError(f"{field}: {said}")
    return [part.strip() for part in str(text or "").split(",") if part.strip()]


def batch_sizes(text: str) -> tuple[int, ...]:
    """A comma list of batch sizes per worker ("32,64"); UsageError (one line) for anything else."""
    parts = _comma_items(text, "batch sizes")
    if not parts:
        raise UsageError("batch sizes: give at least one, e.g. 64 or 32,64")
    if len(parts) > MAX_BATCH_SIZES:
        raise UsageError(f"batch sizes: at most {MAX_BATCH_SIZES}, got {len(parts)}")
    sizes = []
    for part in parts:
        value = int(part) if part.isascii() and part.isdigit() and len(part) <= 9 else None
        # text quoted (an invisible character or a space inside it shown), a number as written
        cut = f"{part[:20]!r}" + ("..." if len(part) > 20 else "")
        problem = BATCH_SIZE.problem(value) if value is not None else f"must be a positive integer, got {cut}"
        if value is None and part.isascii() and part.isdigit():  # a positive integer, beyond the bound
            problem = f"must be at most {int(BATCH_SIZE.high):,}, got {part[:20]}{'...' * (len(part) > 20)}"
        if problem:
            raise UsageError(f"batch sizes: each {problem}")  # as the list's other messages name it
        sizes.append(value)
    return tuple(dict.fromkeys(sizes))


def check_request(request: CampaignRequest) -> None:
    """UsageError (one line, in the page's words) for a request the plan cannot start from."""
    if not request.instances:
        raise UsageError("choose at least one instance type")
    if not request.models:
        raise UsageError("choose at least one model")
    if not request.batch_sizes:
        raise UsageError("batch sizes: give at least one, e.g. 64 or 32,64")
    if request.region is not None:
        try:
            region(request.region)
        except argparse.ArgumentTypeError as error:
            raise UsageError(f"region: {error}") from None
    if request.budget_usd is not None and not request.budget_usd > 0:
        raise UsageError(f"the budget must be above $0, got ${usd_words(request.budget_usd)}")
    parse_iterations(request.iterations)


def settings_of(db_path: Path | str, request: CampaignRequest) -> CampaignSettings:
    """The campaign's settings as `stash campaign --cloud` makes them from the same options."""
    return CampaignSettings(db_path=Path(db_path), iterations=request.iterations)


def plan(db_path: Path | str, request: CampaignRequest) -> CampaignPlan:
    """The plan `stash campaign --cloud --dry-run` prints for the same options and database. UsageError (one
    line) for an instance type not in the catalog, --spot without a spot price, a bad name; a plan above the
    budget is returned with its `refusal` and no tasks."""
    check_request(request)
    settings = settings_of(db_path, request)
    try:
        found = cloud_plan.plan_cloud(
            list(request.instances), list(request.models), list(request.batch_sizes), None, settings,
            spot=request.spot, region=request.region, parallel=request.parallel,
        )  # fmt: skip
    except UsageError as error:  # the command's message, its option names as the page's fields
        text = str(error)
        raise UsageError(
            "Spot: " + text.removeprefix("--spot: ") if text.startswith("--spot: ") else text
        ) from None
    refusal = None
    try:
        cloud_plan.check_budget(found, request.budget_usd)
    except UsageError:  # the command's rule; the page's words
        refusal = (
            f"Refused: the plan costs up to ${found.cost_said_usd:.2f} at catalog prices, "
            "above the budget of "
            f"${usd_words(request.budget_usd)}. Fewer instance types, models or batch sizes, or a fixed "
            "number of iterations, cost less."
        )
    tasks = [] if refusal else task_texts(found, settings, request.idle_minutes)
    return CampaignPlan(
        instances=instance_frame(found), prices=price_frame(found, db_path), machine_s=found.machine_s,
        wall_s=found.wall_s, cost_usd=found.cost_said_usd, price_dates=list(found.price_dates),
        parallel=found.parallel, spot=found.spot, total_text=total_text(found, request.budget_usd),
        assumptions=assumptions_text(), refusal=refusal, tasks=tasks, price_warning=found.price_warning,
        notes=[note for note in found.notes if not is_stale_catalog_warning(note)],
        catalog_warnings=[note for note in found.notes if is_stale_catalog_warning(note)],
    )  # fmt: skip


def instance_frame(found: cloud_plan.CloudPlan) -> pd.DataFrame:
    """One row per instance type: where it runs, its price and date, what runs there, the predicted minutes
    (profiling, start-up, all) and the cost."""
    rows = []
    for item in found.instances:
        offer = item.offer
        minutes = (item.profiles_s / 60, item.overhead_s / 60, item.seconds / 60)
        rows.append({
            "instance": offer.name, "where": f"{offer.provider}/{offer.region}", "usd_per_h": offer.usd_per_h,
            "price_date": offer.price_date or "undated",
            "runs": f"{len(item.todo)} to run, {len(item.stored)} stored",
            "time_min": "{:.1f} + {:.1f} = {:.1f}".format(*minutes),
            "basis": ", ".join(sorted({estimate.basis for estimate in item.todo})) or "nothing to run",
            "cost_usd": cost_said_usd(item.cost_usd), "cloud": offer.provider, "region": offer.region,
            "pricing": offer.pricing, "to_run": len(item.todo), "stored": len(item.stored),
            "profiling_min": minutes[0], "startup_min": minutes[1], "machine_min": minutes[2],
        })  # fmt: skip
    return pd.DataFrame(rows, columns=INSTANCE_COLUMNS)


def price_frame(found: cloud_plan.CloudPlan, db_path: Path | str) -> pd.DataFrame:
    """Where each instance type's price comes from: its date, the region the catalog prices it in, and the
    catalog's source text."""
    catalog = list_instances(db_path).set_index("name")
    rows = []
    for item in found.instances:
        offer = item.offer
        source = catalog["source"].get(offer.name) if offer.name in catalog.index else None
        rows.append({"instance": offer.name, "price_date": offer.price_date or "undated",
                     "price_region": offer.price_region or f"not stated ({offer.region} assumed)",
                     "source": source if isinstance(source, str) and source else "not stated"})  # fmt: skip
    return pd.DataFrame(rows, columns=PRICE_COLUMNS)


def task_texts(found: cloud_plan.CloudPlan, settings: CampaignSettings, idle_minutes: int) -> list[TaskText]:
    """The SkyPilot task (YAML) of every instance type with profiles to run, as --dry-run prints them."""
    return [
        TaskText(item.offer.name, item.cluster,
                 skypilot_task.to_yaml(skypilot_task.task_config(item, settings, idle_minutes)))
        for item in found.instances
        if item.todo
    ]  # fmt: skip


def total_text(found: cloud_plan.CloudPlan, budget_usd: float | None) -> str:
    dates = ", ".join(found.price_dates)
    budget = f"; budget ${usd_words(budget_usd)}" if budget_usd is not None else ""
    at_once = (
        f"{found.parallel} instance types at once" if found.parallel > 1 else "one instance type at a time"
    )
    cost = found.cost_said_usd
    return (
        f"Total: {_minutes(found.machine_s)} of machine time, ${cost:.2f} at catalog prices "
        f"(prices of {dates}); about {_minutes(found.wall_s)} from start to end with {at_once}{budget}"
    )


def cost_said_usd(cost_usd: float) -> float:
    """A plan's cost as it is shown: in cents rounded up, as the budget check writes it, so that a budget of
    the figure shown passes."""
    return cloud_plan.cents_up(cost_usd)


def assumptions_text() -> str:
    return (
        f"Start-up per instance type (assumed): launch {cloud_plan.PROVISION_S / 60:g} min, set-up "
        f"{cloud_plan.SETUP_S / 60:g} min, copy back and teardown {cloud_plan.FINISH_S / 60:g} min. A run of "
        "iterations 'auto' is counted at its cap. 'time cap': every run at its time limit (no prediction of "
        "the step model, or one above the limit)."
    )


def skypilot_installed() -> bool:
    """Whether SkyPilot can be imported here (without importing it)."""
    return skypilot_task.skypilot_installed()


def install_hint() -> str:
    """The one line that says how to install SkyPilot (the command's own words)."""
    return skypilot_task.INSTALL_HINT


CHILD_MODULE = "stash_core.campaign.child"  # the campaign run in the background (campaign/child.py)
JOB_KIND = "campaign"


def launch(db_path: Path | str, request: CampaignRequest) -> str:
    """Start the campaign of `request` in the background (a job beside the database); its job id. UsageError
    (one line) when SkyPilot is not installed, the plan cannot be made or it is above the budget."""
    if not skypilot_installed():
        raise UsageError(install_hint())
    found = plan(db_path, request)  # the page's own checks, and the budget, before anything starts
    if found.refusal:
        raise UsageError(found.refusal)
    options = {
        "db": str(Path(db_path).resolve()), "instances": list(request.instances),
        "models": list(request.models),
        "batch_sizes": list(request.batch_sizes), "spot": request.spot, "region": request.region,
        "budget_usd": request.budget_usd, "iterations": request.iterations, "parallel": request.parallel,
        "idle_minutes": request.idle_minutes,
    }  # fmt: skip
    label = f"{', '.join(request.instances)} · {', '.join(request.models)}"
    argv = [sys.executable, "-P", "-m", CHILD_MODULE, "{JOB_DIR}/request.json"]  # -P: no cwd on sys.path
    return jobs.start_command_job(db_path, argv, label, JOB_KIND, {"request.json": json.dumps(options)})


def campaign_jobs(db_path: Path | str, limit: int = 5) -> pd.DataFrame:
    """The newest campaigns started from the page: job id, what they run, when, status, their last lines."""
    rows = []
    for state in jobs.list_jobs(db_path, limit=limit, kind=JOB_KIND):
        stopping = not state.finished and (state.job_dir / "cancelled").exists()
        rows.append({
            "job_id": state.job_id, "label": state.label, "started_at": state.started_at,
            "status": "stopping (tearing down)" if stopping else state.status,
            "running": not state.finished, "error": state.error,
            "log": "\n".join([*state.output_tail, *state.stderr_tail][-30:]),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["job_id", "label", "started_at", "status", "running", "error", "log"])


def stop(db_path: Path | str, job_id: str) -> bool:
    """Stop a running campaign as Ctrl-C would: it tears its clusters down, then ends."""
    return jobs.stop_job(db_path, job_id)


def command(db_path: Path | str, request: CampaignRequest) -> str:
    """`stash campaign --cloud ...` with the same options and database (the cluster names depend on the
    database file: the command finds the clusters of this plan)."""
    args = ["stash", "campaign", "--cloud", "--instances", ",".join(request.instances),
            "--models", ",".join(request.models),
            "--batch-sizes", ",".join(str(size) for size in request.batch_sizes)]  # fmt: skip
    if request.spot:
        args.append("--spot")
    if request.region:
        args += ["--region", request.region]
    if request.budget_usd is not None:
        args += ["--budget-usd", repr(float(request.budget_usd))]  # the value typed, not 1.23457e+06
    if request.iterations != "auto":
        args += ["--iterations", request.iterations]
    if request.parallel != 1:
        args += ["--parallel", str(request.parallel)]
    if request.idle_minutes != DEFAULT_IDLE_MINUTES:
        args += ["--idle-minutes", str(request.idle_minutes)]
    args += ["--db", str(Path(db_path).resolve())]
    return shlex.join(args)


def _check_name(text: str, what: str) -> None:
    if len(text) > MAX_NAME_CHARS:
        raise UsageError(f"{what}: a name of {len(text):,} characters, at most {MAX_NAME_CHARS}")
    character = unsafe_character(text)
    if character or "," in text or not text.strip():
        raise UsageError(f"{what} {text[:40]!r} is not a name")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
