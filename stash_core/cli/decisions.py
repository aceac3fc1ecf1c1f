"""The decision commands of `stash`: fit, instances, recommend, whatif, campaign.

cli/main.py wires them in with `add_commands(subparsers, parser_class)` and dispatches through COMMANDS.
Every handler takes the parsed arguments and returns the exit status; user mistakes raise UsageError.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.analysis.comm import beta_from_gbps
from stash_core.cli.args import add_db_argument, db_path, positive_int
from stash_core.decide.campaign import (
    CampaignSettings,
    family_models,
    plan_campaign,
    run_campaign,
    split_done,
)
from stash_core.decide.catalog import (
    COLUMNS,
    add_instance,
    get_instance,
    list_instances,
    seed_catalog,
    set_instance,
)
from stash_core.decide.fit import MODELLED_STALLS, fit_stall_models, parse_rate_gbps, predict_stall
from stash_core.decide.recommend import recommend
from stash_core.decide.whatif import format_whatif, whatif
from stash_core.errors import UsageError

PUBLISHED_ERRORS = "Habitat 11.8%, Srifty 8%, dPRO and Ceer under 5%, Lumos 3.3%"
_INSTANCE_OPTIONS = {
    "provider": (str, "cloud provider, e.g. aws"),
    "accelerator": (str, "accelerator model, e.g. 'NVIDIA V100 16 GB'"),
    "accelerator_count": (str, "accelerators per instance (0 for a CPU machine)"),
    "vcpus": (str, "virtual CPUs"),
    "memory_gib": (str, "memory in GiB"),
    "network_gbps": (str, "network bandwidth in Gbit/s"),
    "interconnect": (str, "GPU interconnect, e.g. NVLink, PCIe, none"),
    "on_demand_usd_per_h": (str, "on-demand price, USD per hour ('none' clears it)"),
    "spot_usd_per_h": (str, "spot price, USD per hour ('none' clears it)"),
    "price_date": (str, "date of the prices, YYYY-MM-DD (default: today when a price changes)"),
    "source": (str, "where the prices come from (default: 'user edit')"),
}


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add the fit, instances, recommend, whatif and campaign subcommands to `stash`'s subparsers."""
    parser_class = parser_class or argparse.ArgumentParser

    fit = subparsers.add_parser("fit", help="fit and validate models of interconnect and network stall")
    fit.add_argument("--stall", choices=["interconnect", "network", "all"], default="all")
    fit.add_argument("--by-batch-size", action="store_true", help="fit each batch size separately")
    fit.add_argument(
        "--alpha-s", type=float, default=None, help="per-bucket latency for the alpha-beta model"
    )
    beta = fit.add_mutually_exclusive_group()
    beta.add_argument("--beta-s-per-byte", type=float, default=None, help="seconds per byte of the link")
    beta.add_argument("--link-gbps", type=float, default=None, help="link bandwidth instead of beta")
    fit.add_argument("--all-models", action="store_true", help="show every model, not only the best two")
    fit.add_argument("--residuals", action="store_true", help="print every point's residual")
    fit.add_argument("--predict", metavar="MODEL", default=None, help="predict the stall of this model")
    fit.add_argument("--workers", type=positive_int, default=None, help="with --predict: workers per node")
    fit.add_argument("--nodes", type=positive_int, default=1, help="with --predict: nodes")
    fit.add_argument("--instance", default=None, help="with --predict: instance label")
    fit.add_argument("--bandwidth", default=None, help="with --predict: link bandwidth (e.g. 1gbit, 25)")
    fit.add_argument("--device", default=None, help="with --predict: cpu or cuda")
    fit.add_argument("--num-classes", type=positive_int, default=None)
    fit.add_argument("--input-shape", default=None, help="with --predict: C,H,W of the model's input")
    add_db_argument(fit)

    instances = subparsers.add_parser("instances", help="the instance catalog: list, show, add, set")
    actions = instances.add_subparsers(dest="instances_action", required=True, parser_class=parser_class)
    listing = actions.add_parser("list", help="list the catalog (stored and built-in rows)")
    add_db_argument(listing)
    show = actions.add_parser("show", help="show one instance")
    show.add_argument("name")
    add_db_argument(show)
    seed = actions.add_parser("seed", help="store the built-in rows not stored yet (never overwrites)")
    add_db_argument(seed)
    for action in ("add", "set"):
        sub = actions.add_parser(action, help="add an instance" if action == "add" else "change an instance")
        sub.add_argument("name")
        for field_name, (kind, help_text) in _INSTANCE_OPTIONS.items():
            sub.add_argument(f"--{field_name.replace('_', '-')}", dest=field_name, type=kind, help=help_text)
        add_db_argument(sub)

    rec = subparsers.add_parser("recommend", help="cheapest instances that train within a time budget")
    rec.add_argument("--model", required=True)
    rec.add_argument("--batch-size", required=True, type=positive_int, help="samples per worker")
    rec.add_argument("--epochs", required=True, type=float)
    rec.add_argument("--dataset-images", required=True, type=positive_int)
    rec.add_argument("--budget-hours", type=float, default=None)
    rec.add_argument("--max-usd", type=float, default=None)
    rec.add_argument("--spot", action="store_true", help="use spot prices")
    rec.add_argument("--instances", default=None, help="comma list of catalog instances to consider")
    rec.add_argument("--max-instances", type=positive_int, default=4, help="most instances of one type")
    rec.add_argument("--all", action="store_true", help="list every evaluated configuration")
    rec.add_argument("--csv", type=Path, default=None, help="write every evaluated configuration to a CSV")
    add_db_argument(rec)

    what = subparsers.add_parser("whatif", help="what would hide a stored run's CPU, disk and network stalls")
    what.add_argument("run_id")
    what.add_argument("--target-share", type=float, default=0.05, help="network stall to aim for (share)")
    what.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_db_argument(what)

    camp = subparsers.add_parser("campaign", help="profile a sweep of models and configurations (resumable)")
    models = camp.add_mutually_exclusive_group(required=True)
    models.add_argument("--family", choices=["resnet", "vgg"])
    models.add_argument("--models", default=None, help="comma list of model names")
    camp.add_argument("--depths", default=None, help="comma list, e.g. 10,12,16,18,34,50")
    camp.add_argument("--batch-sizes", default="32", help="comma list")
    camp.add_argument("--workers", default="2", help="comma list of workers per node")
    camp.add_argument("--nodes", default="1", help="comma list of node counts")
    camp.add_argument(
        "--bandwidths", default=None, help="comma list of emulated link rates, e.g. 1gbit,200mbit"
    )
    camp.add_argument("--stalls", default=None, help="default compute,interconnect (+network on nodes > 1)")
    camp.add_argument("--iterations", default="auto")
    camp.add_argument("--input-shape", default=None)
    camp.add_argument("--num-classes", type=positive_int, default=None)
    camp.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    camp.add_argument("--instance", default=None, help="instance label (default: this host's name)")
    camp.add_argument("--results-dir", type=Path, default=None, help="where result files go")
    camp.add_argument("--dry-run", action="store_true", help="print the plan and what is stored, run nothing")
    add_db_argument(camp)


def cmd_fit(args: argparse.Namespace) -> int:
    path = db_path(args)
    stalls = MODELLED_STALLS if args.stall == "all" else (args.stall,)
    beta = args.beta_s_per_byte
    if args.link_gbps is not None:
        if args.link_gbps <= 0:
            raise UsageError("--link-gbps must be positive")
        beta = beta_from_gbps(args.link_gbps)
    if args.alpha_s is not None and beta is None:
        raise UsageError("--alpha-s needs --beta-s-per-byte or --link-gbps")
    report = fit_stall_models(
        path, stalls=stalls, alpha_s=args.alpha_s, beta_s_per_byte=beta, by_batch_size=args.by_batch_size
    )
    if args.predict:
        if args.workers is None:
            raise UsageError("--predict needs --workers (workers per node)")
        bandwidth = None
        if args.bandwidth is not None:
            bandwidth = parse_rate_gbps(args.bandwidth)
            if bandwidth is None:
                raise UsageError(f"--bandwidth {args.bandwidth!r}: give e.g. 1gbit, 200mbit or 25 (Gbit/s)")
        shape = _shape(args.input_shape)
        for stall in stalls:
            if stall == "network" and args.nodes <= 1:
                continue
            answer = predict_stall(
                model=args.predict,
                stall=stall,
                workers_per_node=args.workers,
                nodes=args.nodes,
                device=args.device,
                instance=args.instance,
                bandwidth_gbps=bandwidth,
                report=report,
                num_classes=args.num_classes,
                input_shape=shape,
            )
            print(format_prediction(answer))
        return 0
    print(format_fit_report(report, all_models=args.all_models))
    if args.residuals:
        residuals = report.residuals()
        if not residuals.empty:
            columns = ["stall", "group", "fit", "model", "measured_s", "fitted_s", "residual_s", "heldout_s"]
            print()
            print(residuals[columns].to_string(index=False, float_format=lambda v: f"{v:.5f}"))
    return 0


def format_fit_report(report: Any, all_models: bool = False) -> str:
    """Per stall and configuration: each model's R², held-out errors and coefficients; best marked *."""
    summary = report.summary()
    if summary.empty:
        return (
            "no measured interconnect or network stalls in the database yet: run `stash campaign` "
            "(or several `stash profile` runs of different models) first"
        )
    lines = []
    best_errors = []
    for (stall, group), frame in summary.groupby(["stall", "group"], sort=False):
        lines.append(
            f"{stall} stall  |  {group}  |  {int(frame['points'].max())} runs of "
            f"{int(frame['models'].max())} models"
        )
        frame = frame.sort_values("lomo_mape", na_position="last")
        shown = frame if all_models else frame[frame["best"] | (frame.index.isin(frame.index[:2]))]
        for row in shown.itertuples(index=False):
            mark = "*" if row.best else " "
            lines.append(
                f"  {mark} {row.model:<30} R² {_fmt(row.r2, '.3f'):>6}  leave-one-model-out "
                f"{_pct(row.lomo_mape):>6}  leave-one-bandwidth-out {_pct(row.lobo_mape):>6}  "
                f"{row.coefficients}"
            )
            if row.note:
                lines.append(f"      {row.note}")
        best = frame[frame["best"]]
        if len(best) and best.iloc[0]["lomo_mape"] is not None and not _nan(best.iloc[0]["lomo_mape"]):
            best_errors.append(float(best.iloc[0]["lomo_mape"]))
    if best_errors:
        lines.append("")
        lines.append(
            "held-out error (MAPE) of the best model per configuration: "
            f"median {_pct(float(_median(best_errors)))}"
            f" over {len(best_errors)} configuration(s); published predictors report {PUBLISHED_ERRORS}"
        )
    lines.append("* = best (lowest leave-one-model-out error)")
    return "\n".join(lines)


def format_prediction(answer: dict[str, Any]) -> str:
    if answer["stall_s"] is None:
        return f"{answer['stall']} stall of {answer['model']}: {answer['status']}"
    error = answer["expected_mape"]
    expected = f", expected error {_pct(error)} ({answer['validated_by']})" if error is not None else ""
    return (
        f"{answer['stall']} stall of {answer['model']}: {answer['stall_s'] * 1e3:.2f} ms per iteration "
        f"[{answer['status']}; {answer['method']}; {answer['group']}{expected}]"
    )


def cmd_instances(args: argparse.Namespace) -> int:
    path = db_path(args)
    action = args.instances_action
    if action == "list":
        frame = list_instances(path)
        columns = [
            "name",
            "accelerator_count",
            "accelerator",
            "vcpus",
            "memory_gib",
            "network_gbps",
            "interconnect",
            "on_demand_usd_per_h",
            "spot_usd_per_h",
            "price_date",
            "stored",
        ]
        shown = frame[columns].rename(
            columns={
                "accelerator_count": "gpus",
                "on_demand_usd_per_h": "on_demand",
                "spot_usd_per_h": "spot",
                "memory_gib": "mem_gib",
            }
        )
        print(shown.to_string(index=False, na_rep="-"))
        print("prices in USD per hour; `stash instances show NAME` gives the source of each price")
        return 0
    if action == "seed":
        print(f"stored {seed_catalog(path)} built-in instance(s) in {path}")
        return 0
    if action == "show":
        row = get_instance(path, args.name)
        if row is None:
            raise UsageError(f"unknown instance {args.name!r}: see `stash instances list`")
        for column in COLUMNS:
            print(f"{column:<22}{'-' if row.get(column) is None else row[column]}")
        return 0
    fields = {name: getattr(args, name) for name in _INSTANCE_OPTIONS if getattr(args, name) is not None}
    if action == "add":
        row = add_instance(path, name=args.name, **fields)
        print(f"added {row['name']} to the catalog in {path}")
    else:
        row = set_instance(path, args.name, **fields)
        print(f"updated {row['name']}: " + ", ".join(f"{key}={row[key]}" for key in fields))
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    instances = (
        [name.strip() for name in args.instances.split(",") if name.strip()] if args.instances else None
    )
    result = recommend(
        db_path(args),
        args.model,
        args.batch_size,
        args.epochs,
        args.dataset_images,
        budget_hours=args.budget_hours,
        max_usd=args.max_usd,
        spot=args.spot,
        instances=instances,
        max_instances=args.max_instances,
    )
    if args.csv is not None:
        try:
            result.options.to_csv(args.csv, index=False)
        except OSError as exc:
            raise UsageError(f"cannot write {args.csv}: {exc.strerror or exc}") from None
    print(format_recommendation(result, show_all=args.all))
    return 0 if result.best is not None else 1


def format_recommendation(result: Any, show_all: bool = False) -> str:
    request = result.request
    pricing = "spot" if request["pricing"] == "spot" else "on-demand"
    head = (
        f"{request['model']}, batch {request['batch_size']} per worker, {request['epochs']:g} epochs of "
        f"{request['dataset_images']:,} images, {pricing} prices"
    )
    if request["budget_hours"] is not None:
        head += f", within {request['budget_hours']:g} h"
    if request["max_usd"] is not None:
        head += f", at most ${request['max_usd']:,.2f}"
    lines = [head]
    options = result.options if show_all else result.ranked.head(10)
    if result.best is None:
        lines.append(f"no recommendation: {result.infeasible_reason}")
    if len(options):
        lines.append("")
        lines.append(
            f"  {'#':>2} {'configuration':<34}{'source':<11}{'hours':>8}{'USD':>11}{'USD/h':>8}"
            f"{'±err':>6}  stalls per iteration (compute/interconnect/network/cpu/disk, ms)"
        )
        for row in options.to_dict(orient="records"):
            rank = "" if _nan(row["rank"]) or row["rank"] is None else str(int(row["rank"]))
            stalls = "/".join(
                _fmt(None if _nan(row[f"{s}_s"]) else row[f"{s}_s"] * 1e3, ".0f")
                for s in ("compute", "interconnect", "network", "cpu", "disk")
            )
            pareto = " pareto" if row["pareto"] else ""
            lines.append(
                f"  {rank:>2} {row['config']:<34}{row['source']:<11}{row['training_h']:>8.1f}"
                f"{_fmt(row['training_usd'], ',.2f'):>11}{_fmt(row['usd_per_h'], '.2f'):>8}"
                f"{_pct(row['expected_error']):>6}  {stalls}{pareto}"
            )
    if result.explanations:
        lines.append("")
        lines += [f"- {line}" for line in result.explanations]
    if result.excluded:
        lines.append("")
        lines.append(f"not evaluated ({len(result.excluded)}):")
        lines += [f"  {line}" for line in result.excluded[:8]]
        if len(result.excluded) > 8:
            lines.append(f"  ... and {len(result.excluded) - 8} more")
    return "\n".join(lines)


def cmd_whatif(args: argparse.Namespace) -> int:
    answer = whatif(db_path(args), args.run_id, target_share=args.target_share)
    if args.json:
        print(json.dumps(answer, indent=2, default=str))
    else:
        print(format_whatif(answer))
    return 0


def cmd_campaign(args: argparse.Namespace) -> int:
    if args.family:
        models = family_models(args.family, _int_list(args.depths, "--depths") if args.depths else None)
    else:
        if args.depths:
            raise UsageError("--depths goes with --family")
        models = [name.strip() for name in args.models.split(",") if name.strip()]
    bandwidths = (
        [rate.strip() for rate in args.bandwidths.split(",") if rate.strip()] if args.bandwidths else None
    )
    if bandwidths:
        from stash_core.decide.fit import parse_rate_gbps

        bad = [rate for rate in bandwidths if parse_rate_gbps(rate) is None]
        if bad:
            raise UsageError(f"--bandwidths: cannot read {', '.join(bad)}; give rates like 1gbit or 200mbit")
    nodes = _int_list(args.nodes, "--nodes")
    if bandwidths and max(nodes) <= 1:
        raise UsageError("--bandwidths needs --nodes with at least one count above 1")
    plan = plan_campaign(
        models,
        _int_list(args.batch_sizes, "--batch-sizes"),
        _int_list(args.workers, "--workers"),
        nodes,
        bandwidths,
        args.instance,
    )
    stalls = [name.strip() for name in args.stalls.split(",") if name.strip()] if args.stalls else None
    settings = CampaignSettings(
        db_path=db_path(args),
        stalls=stalls,
        iterations=args.iterations,
        input_shape=args.input_shape,
        num_classes=args.num_classes,
        device=args.device,
        results_dir=args.results_dir,
    )
    if args.dry_run:
        todo, stored = split_done(plan, settings.db_path)
        stored_keys = {item.key for item in stored}
        for item in plan:
            mark = "stored" if item.key in stored_keys else "to run"
            print(f"  {mark:<7} {item.describe()}  [{item.instance}]")
        print(f"{len(plan)} configuration(s): {len(todo)} to run, {len(stored)} stored in {settings.db_path}")
        return 0

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    outcome = run_campaign(plan, settings, report=report)
    print(
        f"campaign: {len(outcome.completed)} profiled, {len(outcome.skipped)} already stored, "
        f"{len(outcome.failed)} failed, {outcome.elapsed_s / 60:.1f} min"
    )
    for item, reason in outcome.failed:
        print(f"  failed: {item.describe()}: {reason}")
    return 1 if outcome.failed else 0


COMMANDS = {
    "fit": cmd_fit,
    "instances": cmd_instances,
    "recommend": cmd_recommend,
    "whatif": cmd_whatif,
    "campaign": cmd_campaign,
}


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} must be a comma list of whole numbers, got {text!r}") from None
    if not values or any(value <= 0 for value in values):
        raise UsageError(f"{flag} must be a comma list of positive whole numbers, got {text!r}")
    return values


def _shape(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    from stash_core.zoo import parse_input_shape

    return parse_input_shape(text)


def _nan(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    try:
        return value is None or (isinstance(value, float) and math.isnan(value)) or bool(value != value)
    except (TypeError, ValueError):
        return False


def _fmt(value: Any, spec: str) -> str:
    if value is None or _nan(value):
        return "-"
    return format(float(value), spec)


def _pct(value: Any) -> str:
    if value is None or _nan(value):
        return "-"
    return f"{float(value):.1%}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
