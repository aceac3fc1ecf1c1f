"""`stash campaign --cloud`: the plan of every instance type priced and printed first (with --dry-run, also
the SkyPilot task each gets, checked by SkyPilot where it is installed), then run through SkyPilot."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stash_core.cli.args import comma_list, count, positive_real
from stash_core.errors import UsageError
from stash_core.spec import default_of
from stash_core.spec_parse import identifier, region
from stash_core.terminal import printable

# The campaign is imported inside the functions: building `stash --help` must not load pandas.


def add_cloud_arguments(camp: argparse.ArgumentParser) -> None:
    """The options of a campaign on rented instance types."""
    cloud = camp.add_argument_group("instance types rented through SkyPilot (docs/cloud.md)")
    cloud.add_argument(
        "--cloud", action="store_true", help="run on each of --instances, rented through SkyPilot"
    )
    cloud.add_argument(
        "--instances",
        type=comma_list(identifier, 50),
        default=None,
        help="comma list of catalog instance types",
    )
    cloud.add_argument(
        "--spot", action="store_true", help="spot instances, priced at the catalog's spot price"
    )
    cloud.add_argument("--region", type=region, default=None, help="region (default: the price's region)")
    cloud.add_argument("--budget-usd", type=positive_real(1e7), default=None,
                       help="refuse a plan that costs more, at catalog prices")  # fmt: skip
    cloud.add_argument("--parallel", type=count(50), default=PARALLEL, help="instance types at once")
    cloud.add_argument("--idle-minutes", type=count(10_000), default=IDLE_MINUTES,
                       help="a cluster left idle this long tears itself down")  # fmt: skip


PARALLEL, IDLE_MINUTES = 1, 15  # the defaults: instance types at once, minutes a cluster may idle


def check_cloud_options(args: argparse.Namespace) -> None:
    """Options that belong to --cloud only, or do not go with it."""
    cloud_only = [flag for flag, value in (("--instances", args.instances), ("--spot", args.spot),
                  ("--region", args.region), ("--budget-usd", args.budget_usd),
                  ("--parallel", args.parallel != PARALLEL),
                  ("--idle-minutes", args.idle_minutes != IDLE_MINUTES)) if value]  # fmt: skip
    if not args.cloud:
        if cloud_only:
            raise UsageError(f"{cloud_only[0]} goes with --cloud")
        return
    if not args.instances:
        raise UsageError("--cloud needs --instances: a comma list of catalog instance types")
    if args.instance:
        raise UsageError("--instance does not go with --cloud: each run is labelled with its instance type")
    if max(args.nodes) > 1 or args.bandwidths:
        raise UsageError("--cloud profiles one machine per instance type: leave out --nodes and --bandwidths")


def refuse_cpu_on_gpus(names: list[str], db_path: Any) -> None:
    """--device cpu on GPU instance types: the GPU rented would sit idle (and the plan was timed as GPU
    runs)."""
    from stash_core.catalog import get_instance

    gpus = [name for name in names if ((get_instance(db_path, name) or {}).get("accelerator_count") or 0) > 0]
    if gpus:
        raise UsageError(f"--device cpu with --cloud on GPU instance types ({', '.join(gpus)}): the GPU "
                         "rented would sit idle; leave --device out, or rent CPU instance types")  # fmt: skip


def cmd_cloud(args: argparse.Namespace, models: list[str], settings: Any) -> int:
    """Plan, print, and (without --dry-run) run the cloud campaign."""
    from stash_core.campaign.skypilot_task import INSTALL_HINT, SkyCheck, skypilot_installed

    check_models_build(models, settings, cloud=True)
    if settings.device == "cpu":
        refuse_cpu_on_gpus(args.instances, settings.db_path)

    if args.dry_run:
        # SkyPilot's check starts first: its import runs beside the planning
        checker = SkyCheck() if skypilot_installed() else None
        try:
            plan = _plan(args, models, settings)
            print_tasks(plan, settings, args.idle_minutes, checker)
        finally:
            if checker is not None:
                checker.close()
        return 0
    plan = _plan(args, models, settings)
    if not skypilot_installed():
        raise UsageError(INSTALL_HINT)
    if not any(item.todo for item in plan.instances):
        print("nothing to run: every configuration is stored")
        return 0
    return run(plan, settings, args.idle_minutes)


def check_models_build(models: list[str], settings: Any, cloud: bool = False) -> None:
    """UsageError (one line) for a model its profiles would refuse (no such factory, one that needs arguments
    or fails): said before anything is planned or rented, as `stash profile` says it before it starts. A zoo
    name is checked by its name alone (building it would import torch, which a dry run does not)."""
    files = [model for model in models if ":" in model]  # a model file's or module's factory
    if not files:
        return
    from stash_core.campaign.cloud_workdir import model_ref, workdir_models
    from stash_core.campaign.shapes import shape_for
    from stash_core.zoo.build import describe_model

    # with --cloud, a model file as typed (from this folder) is the checkout's file the machines get, or
    # refused as outside it
    for model in [model_ref(model) for model in workdir_models(files)] if cloud else files:
        describe_model(model, settings.num_classes, shape_for(model, settings.input_shape))


def _plan(args: argparse.Namespace, models: list[str], settings: Any) -> Any:
    """The plan, printed, and refused above --budget-usd."""
    from stash_core.campaign.cloud_plan import check_budget, plan_cloud

    script = str(args.script) if args.script is not None else None
    plan = plan_cloud(args.instances, models, args.batch_sizes, args.workers, settings, spot=args.spot,
                      region=args.region, parallel=args.parallel, script=script,
                      script_args=args.script_args)  # fmt: skip
    print_plan(plan, args.budget_usd, settings.iterations)
    check_budget(plan, args.budget_usd)
    return plan


def print_plan(plan: Any, budget_usd: float | None, iterations: str | int | None = "auto") -> None:
    """One line per instance type (price and its date, region, what runs, time and cost), the total."""
    from stash_core.campaign import cloud_plan as cp

    pricing = "spot" if plan.spot else "on-demand"
    print(f"cloud campaign: {len(plan.instances)} instance type(s), {pricing} prices from the catalog")
    rows = []
    for item in plan.instances:
        offer = item.offer
        basis = ", ".join(sorted({estimate.basis for estimate in item.todo})) or "-"
        price = f"${offer.usd_per_h:g}/h ({offer.price_date or 'undated'})"
        if offer.price_region and offer.price_region != offer.region:  # the catalog prices another region
            price = f"${offer.usd_per_h:g}/h (price of {offer.price_region}, {offer.price_date or 'undated'})"
        elif not offer.price_region:  # the catalog states no region of its price: taken for the launch's
            price = f"${offer.usd_per_h:g}/h (price's region not stated, {offer.price_date or 'undated'})"
        rows.append((offer.name, offer.provider, offer.region, price, (
            f"{len(item.todo)} to run, {len(item.stored)} stored  {_minutes(item.profiles_s)} profiling "
            f"({basis}) + {_minutes(item.overhead_s)} start-up = {_minutes(item.seconds)}  "
            f"${cp.cents_up(item.cost_usd):.2f}"  # in cents up, as the total and the budget check
        )))  # fmt: skip
    # each column as wide as its widest cell: an Azure name (25 characters) pushed its line's columns on
    widths = [max(len(str(row[column])) for row in rows) for column in range(4)] if rows else []
    for row in rows:
        cells = [f"{str(cell):<{width}}" for cell, width in zip(row[:4], widths, strict=True)]
        print(f"  {' '.join(cells[:3])} {cells[3]}  {row[4]}")
    budget = f"; budget ${budget_usd:.15g}" if budget_usd is not None else ""  # as typed, never 1.2e+06
    dates = ", ".join(plan.price_dates)
    print(
        f"total: {_minutes(plan.machine_s)} of machine time, ${plan.cost_said_usd:.2f} at catalog "
        "prices (prices "
        f"of {dates}); about {_minutes(plan.wall_s)} with --parallel {plan.parallel}{budget}"
    )
    cap = (
        f"; a run of --iterations auto is counted at its cap ({default_of('max_iterations')} iterations or "
        f"{default_of('max_phase_s'):g} s, stash profile's defaults, which a campaign's profiles keep)"
        if iterations in (None, "auto")
        else ""
    )
    print(
        f"  start-up per instance type (assumed): launch {cp.PROVISION_S / 60:g} min, set-up "
        f"{cp.SETUP_S / 60:g} min, copy back and teardown {cp.FINISH_S / 60:g} min{cap}"
    )
    for note in plan.notes:
        print(f"  note: {note}")
    if plan.price_warning:
        print(f"  warning: {plan.price_warning}")


def print_tasks(plan: Any, settings: Any, idle_minutes: int, checker: Any = None) -> None:
    """The SkyPilot task of every instance type with profiles to run, as YAML; checked by SkyPilot's Task and
    Resources where SkyPilot is installed (`checker`, skypilot_task.SkyCheck)."""
    from stash_core.campaign.skypilot_task import check_cache_dir as checker_dir
    from stash_core.campaign.skypilot_task import task_config, to_yaml

    configs = {
        item.cluster: task_config(item, settings, idle_minutes) for item in plan.instances if item.todo
    }
    for cluster, config in configs.items():
        print(f"\n# SkyPilot task of {config['resources']['instance_type']} (cluster {cluster})")
        print(to_yaml(config), end="")
    if not configs:
        print("no task: every configuration is stored")
    elif checker is not None:
        lines = checker.check(plan, configs, settings.db_path)
        version = f" {checker.version}" if checker.version else ""
        kept = ""
        if checker.kept_on:
            kept = printable(f", these same tasks on {checker.kept_on} (answer kept in {checker_dir()})")
        print(f"\nchecked by SkyPilot{version} (Task, Resources; its catalog written from Stash's){kept}:")
        for line in lines:
            print(f"  {line}")
    else:
        print("\nnot checked by SkyPilot: it is not installed here (pip install -r requirements-cloud.txt)")


def run(plan: Any, settings: Any, idle_minutes: int) -> int:
    from stash_core.campaign.cloud import load_sky, run_cloud_campaign, summary

    sky = load_sky()

    def report(line: str) -> None:
        print(printable(line), file=sys.stderr, flush=True)

    outcomes = run_cloud_campaign(plan, settings, sky, report=report, idle_minutes=idle_minutes)
    code, lines = summary(outcomes)
    print("\n".join(lines))
    return code


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
