"""`stash predict`: the predicted training-step time of a model on every catalog instance (or a list), split
into compute, interconnect and network, each marked measured or predicted with its expected error."""

from __future__ import annotations

import argparse
from typing import Any

from stash_core.cli.args import add_db_argument, comma_list, db_path, identifier
from stash_core.cli.figures import fixed, percent
from stash_core.spec import BATCH_SIZE, count

# The predictions are imported inside cmd_predict: building `stash --help` must not load torch or pandas.


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `predict` to `stash`'s subparsers."""
    pred = subparsers.add_parser(
        "predict", help="predicted step time of a model on every catalog instance, no profile needed"
    )
    pred.add_argument("--model", required=True, type=identifier, help="zoo name or FILE.py:FACTORY")
    pred.add_argument("--batch-size", required=True, type=BATCH_SIZE, help="samples per worker (GPU)")
    pred.add_argument(
        "--instances", default="all", help="'all' or a comma list of catalog instances (default all)"
    )
    pred.add_argument(
        "--workers-per-instance", type=count(1024), default=None, help="GPUs used per instance (default all)"
    )
    pred.add_argument("--max-instances", type=count(64), default=1, help="also 2..N instances of each type")
    pred.add_argument(
        "--precision", choices=("fp32", "tf32", "amp"), default="fp32", help="arithmetic of the training"
    )
    add_db_argument(pred)


def cmd_predict(args: argparse.Namespace) -> int:
    from stash_core.decide.predict import predict_instances

    names = None if args.instances.strip().lower() == "all" else comma_list(identifier, 1000)(args.instances)
    result = predict_instances(
        db_path(args),
        args.model,
        args.batch_size,
        instances=names,
        workers_per_instance=args.workers_per_instance,
        max_instances=args.max_instances,
        precision=args.precision,
    )
    print(format_prediction(result))
    return 0 if len(result.frame) else 1


def format_prediction(result: Any) -> str:
    request = result.request
    errors = result.expected_errors
    lines = [
        f"{request['model']}, batch {request['batch_size']} per GPU, {request['precision']}; "
        f"expected error of compute: roofline {percent(errors.get('roofline'))}, scaled from a profile "
        f"{percent(errors.get('scaled'))} (leave-one-GPU-out on published figures)",
        "",
        f"  {'configuration':<30}{'accelerator':<20}{'source':<11}{'path':<10}{'step ms':>9}{'±err':>7}"
        f"{'samples/s':>11}{'mem GB':>13}  compute/interconnect/network ms",
    ]
    for row in result.frame.to_dict(orient="records"):
        parts = "/".join(
            fixed(row[f"{part}_s"] * 1e3, ".1f") for part in ("compute", "interconnect", "network")
        )
        memory = f"{row['memory_needed_gb']:.1f}/{row['memory_gb']:g}"
        lines.append(
            f"  {row['config']:<30}{row['accelerator'][7:]:<20}{row['source']:<11}{row['path']:<10}"
            f"{row['iteration_s'] * 1e3:>9.1f}{percent(row['expected_error']):>7}"
            f"{row['samples_per_s']:>11,.0f}"
            f"{memory:>13}  {parts}"
        )
    if result.not_predictable:
        lines += ["", f"not predicted ({len(result.not_predictable)}):"]
        lines += [f"  {line}" for line in result.not_predictable]
    lines += [
        "",
        "communication: ring all-reduce at the catalog's nominal bandwidths, DDP buckets overlapping "
        "backward (not validated against measurements)",
    ]
    return "\n".join(lines)


COMMANDS = {"predict": cmd_predict}
