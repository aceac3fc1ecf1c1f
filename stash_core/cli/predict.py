"""`stash predict`: the predicted training-step time of a model on every catalog instance (or a list), split
into compute, interconnect and network, each marked measured or predicted with its expected error; with
--script-run, of a profiled training script, scaled from its run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stash_core.cli.args import add_db_argument, comma_list, db_path, identifier
from stash_core.cli.figures import fixed, percent
from stash_core.errors import UsageError
from stash_core.spec_parse import BATCH_SIZE, count, parse_input_shape

# The predictions are imported inside cmd_predict: building `stash --help` must not load torch or pandas.


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `predict` to `stash`'s subparsers."""
    pred = subparsers.add_parser(
        "predict", help="predicted step time of a model on every catalog instance, no profile needed"
    )
    what = pred.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", type=identifier, help="zoo name or FILE.py:FACTORY")
    what.add_argument(
        "--script-run", type=identifier, help="a run of `stash profile --script` (on a GPU) to scale from"
    )
    pred.add_argument("--batch-size", type=BATCH_SIZE, help="samples per worker (GPU); with --model")
    pred.add_argument(
        "--input-shape",
        type=parse_input_shape,
        help="one sample: C,H,W for images or a sequence length for tokens (default: the model's)",
    )
    pred.add_argument(
        "--instances", type=instance_selection, default=None,
        help="'all' or a comma list of catalog instances (default all)",
    )  # fmt: skip
    pred.add_argument(
        "--workers-per-instance", type=count(1024), default=None, help="GPUs used per instance (default all)"
    )
    pred.add_argument("--max-instances", type=count(64), default=1, help="also 2..N instances of each type")
    pred.add_argument(
        "--precision", choices=("fp32", "tf32", "amp"), default="fp32", help="arithmetic of the training"
    )
    add_db_argument(pred)


def instance_selection(text: str) -> list[str] | None:
    """argparse type of --instances: None for 'all', else the names (a comma list of identifiers)."""
    return None if text.strip().lower() == "all" else comma_list(identifier, 1000)(text)


def cmd_predict(args: argparse.Namespace) -> int:
    from stash_core.decide.predict import predict_instances

    common = {
        "instances": args.instances,
        "workers_per_instance": args.workers_per_instance,
        "max_instances": args.max_instances,
        "precision": args.precision,
    }
    if args.script_run:
        if args.batch_size is not None or args.input_shape is not None:
            raise UsageError(
                "--batch-size and --input-shape come from the run with --script-run; leave them out"
            )
        from stash_core.decide.predict.instances import predict_script_run

        result = predict_script_run(db_path(args), args.script_run, **common)
    else:
        if args.batch_size is None:
            raise UsageError("--batch-size is required with --model")
        shape = tuple(args.input_shape) if args.input_shape else None
        result = predict_instances(db_path(args), args.model, args.batch_size, input_shape=shape, **common)
    print(format_prediction(result))
    if not len(result.frame):
        print("stash: no configuration could be predicted (the reasons are listed above)", file=sys.stderr)
        return 1
    return 0


def format_prediction(result: Any) -> str:
    lines = [*_header(result.request, result.expected_errors), ""]
    lines += [
        f"  {'configuration':<30}{'accelerator':<20}{'source':<11}{'path':<11}{'step ms':>9}{'±err':>7}"
        f"{'samples/s':>11}{'mem GB':>13}  compute/interconnect/network ms",
    ]
    for row in result.frame.to_dict(orient="records"):
        parts = "/".join(
            fixed(row[f"{part}_s"] * 1e3, ".1f") for part in ("compute", "interconnect", "network")
        )
        needed = fixed(row["memory_needed_gb"], ".1f")
        memory = f"{needed if needed != '-' else '?'}/{row['memory_gb']:g}"
        speed = fixed(row["samples_per_s"], ",.0f")
        lines.append(
            f"  {row['config']:<30}{row['accelerator'].removeprefix('NVIDIA '):<20}{row['source']:<11}"
            f"{row['path']:<11}{row['iteration_s'] * 1e3:>9.1f}{percent(row['expected_error']):>7}"
            f"{speed:>11}{memory:>13}  {parts}"
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


def _header(request: dict, errors: dict) -> list[str]:
    shape = f", input {request['input_shape']}" if request.get("input_shape") else ""
    if request.get("script_run"):
        batch = request["batch_size"] or "unknown"
        return [
            f"script {request['model']} (run {request['script_run']} on {request['measured_on']}), batch "
            f"{batch} per GPU, {request['precision']}; compute scaled by the GPUs' {request['precision']} "
            f"matrix peaks: expected error {percent(errors.get('script'))} (the same scaling between GPUs "
            "on published figures); memory not checked"
        ]
    return [
        f"{request['model']}, batch {request['batch_size']} per GPU{shape}, {request['precision']}; "
        f"expected error of compute: roofline {percent(errors.get('roofline'))}, scaled from a profile "
        f"{percent(errors.get('scaled'))} (leave-one-GPU-out on published figures)"
    ]


COMMANDS = {"predict": cmd_predict}
