"""`stash campaign`: profile a sweep of models and configurations (resumable; --dry-run shows the plan)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from stash_core.cli.args import add_db_argument, db_path, positive_int
from stash_core.decide.campaign import (
    CampaignSettings,
    family_models,
    plan_campaign,
    run_campaign,
    split_done,
)
from stash_core.decide.fit import parse_rate_gbps
from stash_core.errors import UsageError


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `campaign` to `stash`'s subparsers."""
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


def cmd_campaign(args: argparse.Namespace) -> int:
    models = _models(args)
    bandwidths = _split(args.bandwidths)
    if bandwidths:
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
    settings = CampaignSettings(
        db_path=db_path(args),
        stalls=_split(args.stalls),
        iterations=args.iterations,
        input_shape=args.input_shape,
        num_classes=args.num_classes,
        device=args.device,
        results_dir=args.results_dir,
    )
    if args.dry_run:
        _print_plan(plan, settings)
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


def _models(args: argparse.Namespace) -> list[str]:
    if args.family:
        return family_models(args.family, _int_list(args.depths, "--depths") if args.depths else None)
    if args.depths:
        raise UsageError("--depths goes with --family")
    return [name.strip() for name in args.models.split(",") if name.strip()]


def _print_plan(plan: list, settings: CampaignSettings) -> None:
    todo, stored = split_done(plan, settings.db_path)
    stored_keys = {item.key for item in stored}
    for item in plan:
        mark = "stored" if item.key in stored_keys else "to run"
        print(f"  {mark:<7} {item.describe()}  [{item.instance}]")
    print(f"{len(plan)} configuration(s): {len(todo)} to run, {len(stored)} stored in {settings.db_path}")


def _split(text: str | None) -> list[str] | None:
    """A comma list's non-empty items; None for no text."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} must be a comma list of whole numbers, got {text!r}") from None
    if not values or any(value <= 0 for value in values):
        raise UsageError(f"{flag} must be a comma list of positive whole numbers, got {text!r}")
    return values


COMMANDS = {"campaign": cmd_campaign}
