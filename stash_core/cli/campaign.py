"""`stash campaign`: profile a sweep of models and configurations (resumable; --dry-run shows the plan)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from stash_core.cli.args import add_db_argument, comma_list, count, db_path, identifier
from stash_core.cli.campaign_cloud import add_cloud_arguments, check_cloud_options, cmd_cloud
from stash_core.errors import UsageError
from stash_core.launch.cluster.names import check_name
from stash_core.pathargs import input_path, output_path
from stash_core.spec import option_rule
from stash_core.spec_argparse import add_script_args
from stash_core.spec_parse import (
    BATCH_SIZE,
    CAMPAIGN_BATCH_SIZE,
    WORKERS,
    instance_label,
    parse_input_shape,
    parse_iterations,
    parse_rate,
    parse_stalls,
)
from stash_core.terminal import printable
from stash_core.userfiles import nearest_existing

# The campaign is imported inside the functions: building `stash --help` must not load pandas.


CAMPAIGN_STALLS = ("compute", "interconnect", "network")  # synthetic batches: no CPU or disk stall


def _campaign_stalls(text: str) -> str:
    """--stalls of a campaign: its profiles run synthetic batches made on the device, so CPU and disk stalls
    (real data) are refused here, not by the first profile that would be asked for them; a name of no stall
    is told the campaign's three, not all five."""
    try:
        parse_stalls(text)
    except UsageError:
        known = ", ".join(CAMPAIGN_STALLS)
        raise argparse.ArgumentTypeError(f"expected a comma list of {known}, got {text[:60]!r}") from None
    data = [stall for stall in parse_stalls(text) if stall in ("cpu", "disk")]
    if data:
        raise argparse.ArgumentTypeError(
            f"{','.join(data)}: a campaign measures compute, interconnect and network on synthetic batches; "
            "CPU and disk stalls need a profile with real data (`stash profile --dataset DIR`)"
        )
    return text


def _checked(parse):
    """argparse type from a spec parser that raises FieldError (a UsageError) for a bad text."""

    def read(text: str):
        try:
            parse(text)
        except UsageError as error:
            raise argparse.ArgumentTypeError(str(error).split(": ", 1)[-1]) from None
        return text

    return read


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `campaign` to `stash`'s subparsers."""
    camp = subparsers.add_parser(
        "campaign", help="profile a sweep of models and configurations (resumable)", allow_abbrev=False
    )
    models = camp.add_mutually_exclusive_group(required=True)
    models.add_argument("--family", choices=["resnet", "vgg"], help="a zoo family, its --depths each a model")
    models.add_argument(
        "--models", type=comma_list(identifier), default=None,
        help="comma list of zoo names or FILE.py:FACTORY / package.module:FACTORY",
    )  # fmt: skip
    models.add_argument(
        "--script", type=input_path, default=None,
        help="your own training script instead of models (its arguments after --); it sets its own batch",
    )  # fmt: skip
    camp.add_argument(
        "--depths", type=comma_list(count(1000)), default=None, help="comma list, e.g. 10,18,50"
    )
    camp.add_argument(
        "--batch-sizes", type=comma_list(BATCH_SIZE), default=None,
        help=f"comma list (default {CAMPAIGN_BATCH_SIZE})"
    )
    camp.add_argument(
        "--workers", type=comma_list(WORKERS), default=None,
        help="comma list of workers per node (default 2; with --cloud, every GPU of the instance type)",
    )  # fmt: skip
    camp.add_argument("--nodes", type=comma_list(WORKERS), default="1", help="comma list of node counts")
    camp.add_argument(
        "--bandwidths", type=comma_list(_checked(parse_rate)), default=None,
        help="comma list of emulated link rates, e.g. 1gbit,200mbit",
    )  # fmt: skip
    camp.add_argument(
        "--cluster-name", type=_checked(check_name), default=None,
        help="the emulated cluster the --bandwidths profiles run on (stash cluster up --name; default: the "
        "default one)",
    )  # fmt: skip
    camp.add_argument(
        "--stalls", type=_campaign_stalls, default=None,
        help="compute, interconnect, network (those given are measured); default compute, +interconnect on "
        "2 or more workers a node, +network on nodes > 1",
    )  # fmt: skip
    camp.add_argument("--iterations", type=_checked(parse_iterations), default="auto",
                      help="each profile's --iterations")
    # each profile's time and precision, as `stash profile` takes them (default: its own)
    for flag, attr in (("--max-phase-seconds", "max_phase_s"), ("--launches", "launches"),
                       ("--target-ci", "target_relative_ci")):  # fmt: skip
        camp.add_argument(flag, dest=attr, type=option_rule(attr), default=None,
                          metavar=flag[2:].upper().replace("-", "_"),
                          help=f"each profile's {flag} (default: stash profile's)")  # fmt: skip
    camp.add_argument("--input-shape", type=_checked(parse_input_shape), default=None, action="append",
                      help="one sample, e.g. 3,64,64; given twice, one C,H,W and one sequence length, each "
                      "model takes the one of its kind (default: each model's own)")  # fmt: skip
    camp.add_argument("--num-classes", type=count(10**7), default=None, help="(default: each model's own)")
    camp.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None,
                      help="(default: auto, the GPU where there is one)")  # fmt: skip
    camp.add_argument(
        "--instance", type=instance_label, default=None, help="instance label (default: this host's name)"
    )
    camp.add_argument("--results-dir", type=output_path, default=None,
                      help="where result files go (default: results/ beside the database)")  # fmt: skip
    camp.add_argument("--dry-run", action="store_true", help="print the plan and what is stored, run nothing")
    add_cloud_arguments(camp)
    add_db_argument(camp)
    add_script_args(camp, "after --: your script's own arguments (with --script)")


def cmd_campaign(args: argparse.Namespace) -> int:
    from stash_core.campaign.plan import (
        CampaignSettings,
        check_measurable_plan,
        plan_campaign,
        plan_script_campaign,
    )
    from stash_core.campaign.shapes import shapes_text

    models = _models(args)
    check_script_options(args)
    if str(args.iterations) != "auto" and args.target_relative_ci is not None:  # each profile would refuse it
        raise UsageError(f"--target-ci steers --iterations auto; with --iterations {args.iterations} every "
                         "run times that many iterations: leave one of them out")  # fmt: skip
    check_cloud_options(args)
    if args.script is not None and args.bandwidths:  # said first: with --nodes too it is refused
        raise UsageError("--bandwidths goes with models: a script's campaign runs on this machine's links")
    if args.cluster_name is not None and not args.bandwidths:
        raise UsageError("--cluster-name goes with --bandwidths: only their profiles use an emulated cluster")
    if args.bandwidths and max(args.nodes) <= 1:
        raise UsageError("--bandwidths needs --nodes with at least one count above 1")
    if args.results_dir is not None:  # what each profile's --out check would refuse, refused before any
        nearest = nearest_existing(args.results_dir)
        if not nearest.is_dir():
            raise UsageError(f"--results-dir {args.results_dir}: {nearest} is not a directory")
        if not os.access(nearest, os.W_OK | os.X_OK):
            raise UsageError(f"--results-dir {args.results_dir}: cannot write to {nearest} (permission "
                             "denied)")  # fmt: skip
        from stash_core.api.profile_flow import refuse_full_disk

        refuse_full_disk(nearest)  # a virtual file system (/proc), a full disk: what each profile would find
    if not args.cloud and max(args.nodes) > 1 and not args.bandwidths:
        what = (
            "a script's campaign runs on this machine: leave out --nodes" if args.script is not None
            else "several nodes are the emulated cluster's here: give --bandwidths (e.g. 1gbit) for its links"
        )  # fmt: skip
        raise UsageError(f"--nodes {max(args.nodes)}: {what}")
    settings = CampaignSettings(
        db_path=db_path(args),
        stalls=_split(args.stalls),
        iterations=args.iterations,
        input_shape=shapes_text(args.input_shape),
        num_classes=args.num_classes,
        device=args.device,
        results_dir=args.results_dir,
        cluster_name=args.cluster_name,
        max_phase_s=args.max_phase_s,
        launches=args.launches,
        target_relative_ci=args.target_relative_ci,
    )
    if args.cloud:
        return cmd_cloud(args, models, settings)
    workers = args.workers or [2]
    if args.script is not None:
        script = str(args.script)
        plan = plan_script_campaign(script, args.script_args, workers, args.nodes, args.instance)
    else:
        plan = plan_campaign(models, args.batch_sizes, workers, args.nodes, args.bandwidths, args.instance)
    check_measurable_plan(plan, settings)
    from stash_core.campaign.machine_label import refuse_contradicted_label

    refuse_contradicted_label(settings.db_path, args.instance)  # each rerun would profile it again
    if settings.device == "cuda":  # every profile would refuse it: said before the plan is approved
        from stash_core.engine.machine import cuda_device_count

        if cuda_device_count() == 0:
            raise UsageError("--device cuda: no CUDA device is visible on this machine")
    _check_fits_here(plan, settings)
    if args.script is None:  # a model file its profiles would refuse (a syntax error, no such factory): said
        from stash_core.cli.campaign_cloud import check_models_build  # now, not after the models before it

        check_models_build(models, settings)
    if args.dry_run:
        _print_plan(plan, settings)
        return 0

    from stash_core.campaign.local import progress_line, run_campaign

    def report(line: str) -> None:
        print(printable(line), file=sys.stderr, flush=True)

    if not Path(settings.db_path).exists():  # a mistyped --db would profile everything again, unsaid
        report(f"note: {settings.db_path} does not exist yet: this campaign starts a new database there, "
               "so nothing counts as stored")  # fmt: skip
    def on_event(event: dict) -> None:
        if line := progress_line(event):
            report(line)

    outcome = run_campaign(plan, settings, report=report, on_event=on_event)
    print(
        f"campaign: {len(outcome.completed)} profiled, {len(outcome.skipped)} already stored, "
        f"{len(outcome.failed)} failed, {outcome.elapsed_s / 60:.1f} min"
    )
    for item, reason in outcome.failed:
        print(printable(f"  failed: {item.describe()}: {reason}"))
    return 1 if outcome.failed else 0


def _check_fits_here(plan: list, settings: Any) -> None:
    """Each profile this machine runs alone fits it (workers against its cores or GPUs), said before the
    plan runs: a profile that refuses stops the campaign part way, before the ones that fit."""
    from stash_core.campaign.plan import profile_spec
    from stash_core.engine.machine import cuda_device_count, validate
    from stash_core.measure.nvml import gpu_status

    gpus = None
    for item in plan:
        if item.nodes > 1:  # the emulated cluster's nodes: checked once they answer
            continue
        if gpus is None:  # torch only where NVML sees a GPU: a CPU machine's dry run stays quick
            maybe_gpu = settings.device != "cpu" and gpu_status()[0]
            gpus = cuda_device_count() if maybe_gpu or settings.device == "cuda" else 0
        try:
            validate(profile_spec(item, settings), gpus)
        except UsageError as error:
            raise UsageError(f"{item.describe()}: {error}") from None


def check_script_options(args: argparse.Namespace) -> None:
    """What goes with --script and what does not: a script chooses its own batch, input and classes."""
    if args.script is None:
        if args.script_args:
            first = args.script_args[0]
            raise UsageError(f"arguments after -- are the script's: they need --script (got {first!r})")
        args.batch_sizes = args.batch_sizes or [CAMPAIGN_BATCH_SIZE]
        return
    options = (("--batch-sizes", args.batch_sizes), ("--input-shape", args.input_shape),
               ("--num-classes", args.num_classes), ("--depths", args.depths))  # fmt: skip
    given = [flag for flag, value in options if value]
    if given == ["--depths"]:
        raise UsageError("--depths does not go with --script: it picks the models of a --family")
    if given:
        flag = next(flag for flag in given if flag != "--depths")
        raise UsageError(f"{flag} does not go with --script: the script sets its own batch and data")


def _models(args: argparse.Namespace) -> list[str]:
    from stash_core.campaign.plan import family_models

    if args.script is not None:
        return []
    if args.family:
        return family_models(args.family, args.depths)
    if args.depths:
        raise UsageError("--depths goes with --family")
    return args.models


def _print_plan(plan: list, settings: Any) -> None:
    from stash_core.campaign.plan import split_done

    todo, stored = split_done(plan, settings)
    stored_keys = {item.key for item in stored}
    from stash_core.campaign.shapes import shape_for

    for item in plan:
        mark = "stored" if item.key in stored_keys else "to run"
        # of two --input-shape, the one of the model's kind (images or tokens): said, as it is chosen here
        shape = shape_for(item.model, settings.input_shape) if item.script is None else None
        shaped = f" input {','.join(str(size) for size in shape)}" if shape else ""
        print(printable(f"  {mark:<7} {item.describe()}{shaped}  [{item.instance}]"))
    where = printable(str(settings.db_path))
    print(f"{len(plan)} configuration(s): {len(todo)} to run, {len(stored)} stored in {where}")


def _split(text: str | None) -> list[str] | None:
    """A comma list's non-empty items; None for no text."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


COMMANDS = {"campaign": cmd_campaign}
