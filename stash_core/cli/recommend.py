"""`stash recommend`: the cheapest instances (type and count) that train a model within a time budget."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from stash_core.cli.args import (
    PRECISION_HELP,
    add_db_argument,
    add_format_argument,
    count,
    db_path,
    identifier,
    positive_real,
)
from stash_core.cli.figures import fixed, percent
from stash_core.cli.predict import add_job_arguments, instance_selection
from stash_core.csv_outputs import check_csv_replaceable
from stash_core.errors import UsageError
from stash_core.pathargs import output_path
from stash_core.spec_parse import BATCH_SIZE, parse_input_shape
from stash_core.units import STALLS as STALL_NAMES
from stash_core.units import duration_words, finite_float, relative_ci95, usd_words
from stash_core.userfiles import check_output, write_atomic

if TYPE_CHECKING:
    from stash_core.decide.recommend import Recommendation

# The decisions are imported inside the functions: building `stash --help` must not load pandas.


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `recommend` to `stash`'s subparsers."""
    rec = subparsers.add_parser("recommend", help="cheapest instances that train within a time budget")
    rec.add_argument(
        "--model", required=True, type=identifier, help="zoo name, FILE.py:FACTORY or a stored model"
    )
    rec.add_argument("--batch-size", required=True, type=BATCH_SIZE, help="samples per worker")
    rec.add_argument(
        "--input-shape",
        type=parse_input_shape,
        help="one sample: C,H,W for images or a sequence length for tokens (default: the model's)",
    )
    rec.add_argument(
        "--precision", choices=("pytorch", "fp32", "tf32", "amp"), default="pytorch", help=PRECISION_HELP
    )
    add_job_arguments(rec)
    rec.add_argument("--epochs", required=True, type=positive_real(1e6), help="epochs to train")
    rec.add_argument(
        "--dataset-images", "--dataset-samples", dest="dataset_images", required=True, type=count(10**12),
        help="samples (images, sequences) in one epoch: each epoch sees them all, the shards padded and the "
             "last batch kept (PyTorch's defaults)",
    )  # fmt: skip
    one_of = "; one of --budget-hours and --max-usd is required, or both"
    rec.add_argument("--budget-hours", type=positive_real(1e6), default=None, help=f"time budget{one_of}")
    rec.add_argument("--max-usd", type=positive_real(1e12), default=None, help=f"cost limit{one_of}")
    rec.add_argument("--spot", action="store_true", help="use spot prices")
    rec.add_argument(
        "--instances", type=instance_selection, default=None,
        help="'all' or a comma list of catalog instances to consider (default all)",
    )  # fmt: skip
    rec.add_argument("--max-instances", type=count(64), default=4, help="most instances of one type")
    rec.add_argument(
        "--workers-per-instance", type=count(1024), default=None,
        help="GPUs used per instance, one worker each (default all); instances with fewer are not evaluated",
    )  # fmt: skip
    rec.add_argument(
        "--all", action="store_true",
        help="list every evaluated configuration, also those that miss the constraints (JSON: predictions; "
        "its options are those that meet them)",
    )  # fmt: skip
    rec.add_argument("--csv", type=output_path, default=None, help="write every evaluated configuration to a CSV")
    keys = "job, recommended, options, predictions, not_predicted, profiles_set_aside, explanations, "
    keys += "infeasible_reason, warnings; with none: error, exit_status"
    add_format_argument(rec, keys)
    add_db_argument(rec)


def cmd_recommend(args: argparse.Namespace) -> int:
    from stash_core.api.decisions import recommend

    if args.budget_hours is None and args.max_usd is None:  # the API's words name its arguments, not flags
        raise UsageError("give --budget-hours, --max-usd or both: one of them is required")
    if args.csv is not None:
        check_output(args.csv, "CSV")  # a device, FIFO or folder is refused before the work
        check_csv_replaceable(args.csv, "--csv", "a CSV of configurations", "config,instance,")
    result = recommend(
        args.model, args.batch_size, args.epochs, args.dataset_images, input_shape=args.input_shape,
        budget_hours=args.budget_hours, max_usd=args.max_usd, spot=args.spot, instances=args.instances or None,
        max_instances=args.max_instances, workers_per_instance=args.workers_per_instance,
        precision=args.precision, memory_format=args.memory_format,
        optimizer=args.optimizer, optimizer_impl=args.optimizer_impl, attention=args.attention,
        db=db_path(args),
    ).answer  # fmt: skip
    if args.csv is not None:
        from stash_core.cells import csv_text

        write_atomic(args.csv, csv_text(result.options), "CSV")  # never a half-written CSV
    if args.format == "json":  # no recommendation: "error" and "exit_status" as every command's failure
        failure = {} if result.best is not None else {
            "error": f"no recommendation: {result.infeasible_reason}", "exit_status": 1,
        }  # fmt: skip
        print(json.dumps({**result.to_json(), **failure}, indent=2, allow_nan=False))
    else:
        print(format_recommendation(result, show_all=args.all))
    if result.best is None:
        print(f"stash: no recommendation: {result.infeasible_reason}", file=sys.stderr)
        return 1
    return 0


def format_recommendation(result: Recommendation, show_all: bool = False) -> str:
    """The request, the instance labels that do not fit their machine, the ranked options (every one with
    show_all), why others lose, what was not evaluated."""
    from stash_core.decide.recommend.explain import job_headline

    lines = [job_headline(result.request)]
    lines += [f"warning: {warning}" for warning in result.warnings]
    options = result.options if show_all else result.ranked.head(10)
    if result.best is None:
        lines.append(f"no recommendation: {result.infeasible_reason}")
    if len(options):
        records = options.to_dict(orient="records")
        # as wide as the widest label: "1 x Standard_NC80adis_H100_v5 (1 of 2 GPUs each)" runs past 34
        config_w = max([34, *(len(str(row["config"])) + 1 for row in records)])
        lines.append("")
        lines.append(
            f"  {'#':>2} {'configuration':<{config_w}}{'workers':>8}  {'source':<11}"
            f"{'epoch':>9}{'training':>10}"
            f"{'USD':>11}{'USD/h':>8}{'price of':>12}"
            f"{'±err':>7}{'±comm':>7}  stalls per iteration (compute/interconnect/network/cpu/disk, ms)"
        )
        budget_h = result.request.get("budget_hours")
        within_s = None if budget_h is None else budget_h * 3600
        lines += [_option_line(row, within_s, config_w) for row in records]
        lines.append(
            "  workers: GPUs used of each instance's GPUs (2x: on each of 2 instances); price of: the "
            "date of the catalog's price (its source: `stash instances show NAME`); ?: not predicted, left "
            "out of the time (CPU and disk stalls need a profile with real data; one on another GPU gives "
            "the CPU stall alone); "
            "±err: the held-out error of the compute path (-: compute measured), of a measured row its "
            "profile's 95% interval (-: none stored); ±comm: of the communication, a share of the step; *: "
            "unvalidated error"
        )
    if result.explanations:
        lines.append("")
        lines += [f"- {line}" for line in result.explanations]
    if result.excluded:
        lines.append("")
        lines.append(f"not evaluated or not ranked ({len(result.excluded)}):")
        lines += [f"  {line}" for line in result.excluded[:8]]
        if len(result.excluded) > 8:
            lines.append(f"  ... and {len(result.excluded) - 8} more")
    if result.profiles_set_aside:
        from stash_core.terminal import printable

        lines += ["", f"stored profiles of this job set aside ({len(result.profiles_set_aside)}):"]
        lines += [f"  {printable(line)}" for line in result.profiles_set_aside]
    return "\n".join(lines)


def _workers(row: dict[str, Any]) -> str:
    """As predict writes it: '8/8' on one instance, '2x8/8' on two (an '8/8' there read as 8 GPUs in all)."""
    from stash_core.decide.predict.instances import gpus_used_cell

    count = int(row.get("instance_count") or 1)
    return gpus_used_cell(count, row["workers_per_instance"], row.get("gpus_per_instance") or 0)


def _option_line(row: dict[str, Any], within_s: float | None, config_w: int = 34) -> str:
    rank = finite_float(row["rank"])
    stalls = "/".join(
        "?" if finite_float(row[f"{s}_s"]) is None else fixed(row[f"{s}_s"] * 1e3, ".0f") for s in STALL_NAMES
    )
    pareto = " pareto" if row["pareto"] else ""
    usd, usd_per_h = usd_words(finite_float(row["training_usd"])), fixed(row["usd_per_h"], ".2f")
    # a measured row's: its run's 95% interval, as the dashboard's card and Compare show it
    spread = relative_ci95(row) if row["source"] == "measured" else row["expected_error"]
    error = percent(spread) + ("*" if row.get("unvalidated") else "")
    comm = percent(row.get("comm_error")) if int(row["workers_total"]) > 1 else "-"
    return (
        f"  {'' if rank is None else str(int(rank)):>2} {row['config']:<{config_w}}{_workers(row):>8}  "
        f"{row['source']:<11}"
        f"{_cell(duration_words(row['epoch_s']), 9)}"
        f"{_cell(duration_words(row['training_h'] * 3600, within_s), 10)}"
        f"{_cell(usd, 11)}{_cell(usd_per_h, 8)}{str(row.get('price_date') or '-')[:10]:>12}"
        f"{error:>7}{comm:>7}"
        f"  {stalls}{pareto}"
    )


def _cell(text: str, width: int) -> str:
    """`text` right-aligned in `width`, always after a space: a figure wider than its column (thousands of
    days, a billion dollars) pushes the line on instead of running into the column before it."""
    return " " + f"{text:>{width - 1}}"


COMMANDS = {"recommend": cmd_recommend}
