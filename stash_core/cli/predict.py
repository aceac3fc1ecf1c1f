"""`stash predict`: the predicted training-step time of a model on every catalog instance (or a list), split
into compute, interconnect and network, each marked measured or predicted with its expected error; with
--script-run, of a profiled training script, scaled from its run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from stash_core.cli.args import (
    PRECISION_HELP,
    add_db_argument,
    add_format_argument,
    comma_list,
    db_path,
    identifier,
)
from stash_core.cli.figures import fixed, percent
from stash_core.errors import UsageError
from stash_core.spec_parse import BATCH_SIZE, count, parse_input_shape
from stash_core.units import relative_ci95

# The predictions (api/predicting.py) are imported inside cmd_predict: building `stash --help` must not
# load torch or pandas.


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
        "--gpu", type=comma_list(identifier, 100), default=None,
        help="only instances with this GPU (comma list; names as NVML, SkyPilot or datasheets give them)",
    )  # fmt: skip
    pred.add_argument(
        "--precision", choices=("pytorch", "fp32", "tf32", "amp"), default="pytorch", help=PRECISION_HELP
    )
    pred.add_argument(
        "--rows", type=rows_shown, default=DEFAULT_ROWS,
        help="table rows shown, in order ('all' for every one); JSON has every row",
    )  # fmt: skip
    add_job_arguments(pred)
    add_format_argument(
        pred, "job, predictions, not_predicted, profiles_set_aside, warnings; with none: error, exit_status"
    )
    add_db_argument(pred)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """How the job trains, as the step model tells it apart (decide/predict/job.py)."""
    from stash_core.habits import ATTENTIONS, MEMORY_FORMATS, OPTIMIZER_IMPLS, OPTIMIZERS

    parser.add_argument(
        "--memory-format", choices=MEMORY_FORMATS, default="nchw",
        help="image models: the tensors' layout (channels_last runs tensor-core convolutions without "
        "conversions)",
    )  # fmt: skip
    parser.add_argument(
        "--optimizer", choices=OPTIMIZERS, default=None,
        help="the optimizer (default: sgd with momentum for image models, adamw for token models)",
    )  # fmt: skip
    parser.add_argument(
        "--optimizer-impl", choices=OPTIMIZER_IMPLS, default="foreach",
        help="PyTorch's implementation: foreach (what PyTorch picks when told none), fused (fused=True) or "
        "loop (per parameter)",
    )  # fmt: skip
    parser.add_argument(
        "--attention", choices=ATTENTIONS, default="fused",
        help="transformers: fused (scaled_dot_product_attention) or eager (matrix products and a softmax)",
    )  # fmt: skip


DEFAULT_ROWS = 100  # a table a terminal can hold; a catalog of 100,000 instances prints its first rows


def rows_shown(text: str) -> int | None:
    """--rows: a positive count, or 'all' (None)."""
    if text.strip().lower() == "all":
        return None
    try:
        return count(10**9)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of rows, at least 1, or 'all', got {text!r}"
        ) from None


def instance_selection(text: str) -> list[str] | None:
    """argparse type of --instances: None for 'all', else the names (a comma list of identifiers)."""
    if text.strip().lower() == "all":
        return None
    names = comma_list(identifier, 1000)(text)
    if "all" in (name.lower() for name in names):  # else "unknown instance(s) all"
        raise argparse.ArgumentTypeError("'all' stands for every catalog instance: give it alone, or names")
    return names


def cmd_predict(args: argparse.Namespace) -> int:
    from stash_core.api.predicting import predict
    from stash_core.decide.predict.refusals import nothing_predicted

    if args.model is not None and args.batch_size is None:  # said in the command's words, not Python's
        raise UsageError("--batch-size is required with --model")
    result = predict(
        args.model, args.batch_size, script_run=args.script_run, input_shape=args.input_shape,
        instances=args.instances, workers_per_instance=args.workers_per_instance,
        max_instances=args.max_instances, gpu=args.gpu, precision=args.precision,
        memory_format=args.memory_format, optimizer=args.optimizer, optimizer_impl=args.optimizer_impl,
        attention=args.attention, db=db_path(args),
    )  # fmt: skip
    # Everything is computed before anything is printed: an error leaves stdout empty.
    failed = None if len(result.frame) else (
        f"no configuration could be predicted: {nothing_predicted(result.not_predictable)}"
    )  # fmt: skip
    if args.format == "json":  # a failure's "error" and "exit_status" as every command's, and the reasons
        failure = {} if failed is None else {"error": failed, "exit_status": 2}
        print(json.dumps({**result.to_dict(), **failure}, indent=2, allow_nan=False))
    else:
        print(format_prediction(result, args.rows))
    if failed is not None:
        where = "in the JSON's not_predicted" if args.format == "json" else "above"
        print(f"stash: {failed} (each reason {where})", file=sys.stderr)
        return 2
    return 0


def format_prediction(result: Any, rows: int | None = DEFAULT_ROWS) -> str:
    from stash_core.decide.predict.network import comm_method_line

    lines = [*_header(result.request, result.expected_errors)]
    lines += [f"warning: {warning}" for warning in result.warnings] + [""]
    shown = result.frame if rows is None else result.frame.head(rows)
    records = shown.to_dict(orient="records")
    # columns as wide as their widest cell (a 1024-GPU instance's workers), so later columns stay under
    # their headings
    config_w = max([28, *(len(row["config"]) + 1 for row in records)])
    workers_w = max([8, *(len(workers_cell(row)) + 1 for row in records)])
    gpu_w = max([20, *(len(accelerator_cell(row)) + 2 for row in records)])  # a long name: "GeForce RTX ..."
    if len(result.frame):  # no header over no rows: each instance's reason follows
        lines += [
            f"  {'configuration':<{config_w}}{'workers':>{workers_w}}  {'accelerator':<{gpu_w}}{'source':<11}"
            f"{'path':<10}{'step ms':>9}{'±err':>9}{'±comm':>8}{'samples/s':>11}{'mem GiB':>13}"
            "  compute/interconnect/network ms",
        ]
    from stash_core.cells import is_missing  # pandas: imported when a table is printed, not for --help
    from stash_core.decide.predict.memory import NEAR_LIMIT

    near_limit = False
    for row in records:
        parts = "/".join(
            fixed(row[f"{part}_s"] * 1e3, ".1f") for part in ("compute", "interconnect", "network")
        )
        # two significant figures below 1 GiB: a small model's 0.03 GiB is not shown as 0.0
        small = not is_missing(row["memory_needed_gb"]) and row["memory_needed_gb"] < 1
        needed = fixed(row["memory_needed_gb"], ".2g" if small else ".1f")
        # a CPU machine's row (a profile's) has no GPU memory to check
        if is_missing(row["memory_gb"]):
            memory = "-"
        else:
            memory = f"{needed if needed != '-' else '?'}/{row['memory_gb']:g}"
            # fits on paper, as memory.py marks it: the row's note says so, the table with a mark
            needed_gb = row["memory_needed_gb"]
            if not is_missing(needed_gb) and needed_gb > NEAR_LIMIT * row["memory_gb"]:
                memory, near_limit = memory + "!", True
        speed = fixed(row["samples_per_s"], ",.0f")
        # a row measured whole: its profile's 95% interval, as recommend gives it
        measured = row["source"] == "measured"
        spread = relative_ci95(row) if measured else row["expected_error"]
        error = percent(spread) + ("*" if row.get("unvalidated") else "")
        comm = percent(row["comm_error"]) if row.get("workers", 1) > 1 else "-"
        lines.append(
            f"  {row['config']:<{config_w}}{workers_cell(row):>{workers_w}}  {accelerator_cell(row):<{gpu_w}}"
            f"{row['source']:<11}{row['path']:<10}{row['iteration_s'] * 1e3:>9.1f}{error:>9}{comm:>8}"
            f"{speed:>11}{memory:>13}  {parts}"
        )
    if len(shown) < len(result.frame):
        lines.append(f"  ... {len(result.frame) - len(shown):,} more rows (--rows all, or --format json)")
    if near_limit:
        lines.append(f"  ! near the GPU's memory (over {NEAR_LIMIT:.0%} of it): the allocator's fragmentation "
                     "and the CUDA context, not counted, may not fit; a smaller batch is safer")  # fmt: skip
    lines += _noted_rows(records)
    if len(shown) and shown["unvalidated"].any():  # said where a row shown carries its mark
        lines.append("  * unvalidated: no held-out published figure of this GPU; its error is a wider guess")
    if len(shown) and (shown["source"].eq("measured") & shown["memory_gb"].isna()).any():  # a CPU profile's
        lines.append("  measured on a CPU machine: the profile's compute, interconnect and network; its CPU "
                     "and disk stalls are in no step here (its whole iteration: `stash show RUN`)")
    if result.not_predictable:
        lines += ([""] if len(result.frame) else []) + [f"not predicted ({len(result.not_predictable)}):"]
        listed = result.not_predictable if rows is None else result.not_predictable[:rows]
        lines += [f"  {line}" for line in listed]
        if len(listed) < len(result.not_predictable):
            more = len(result.not_predictable) - len(listed)
            lines.append(f"  ... {more:,} more (--rows all, or --format json)")
    set_aside = result.profiles_set_aside
    if set_aside:
        from stash_core.terminal import printable

        lines += ["", f"stored profiles of this job set aside ({len(set_aside)}):"]
        lines += [f"  {printable(line)}" for line in set_aside]
    given = result.request.get("workers_per_instance")
    fewer = "--workers-per-instance " + (str(given) if isinstance(given, int) else "for fewer")
    lines += [
        "",
        f"workers: GPUs used of each instance's GPUs, one worker each ({fewer}); "
        "CPU: the worker processes a profile ran on a CPU machine",
        comm_method_line(),
    ]
    return "\n".join(lines)


def _noted_rows(records: list[dict]) -> list[str]:
    """A line for each MEANING_NOTES note some shown rows carry, naming them (three at most)."""
    from stash_core.decide.predict.instances import MEANING_NOTES, meaning_notes

    lines = []
    for words in MEANING_NOTES.values():
        noted = [row["config"] for row in records if words in meaning_notes(row["note"])]
        if noted:
            more = f" and {len(noted) - 3} more" if len(noted) > 3 else ""
            lines.append(f"  {words} ({', '.join(noted[:3])}{more})")
    return lines


def accelerator_cell(row: dict) -> str:
    """The row's GPU without the vendor's name; 'CPU' for a CPU machine (a profile's row)."""
    from stash_core.cells import is_missing

    return "CPU" if is_missing(row["accelerator"]) else str(row["accelerator"]).removeprefix("NVIDIA ")


def workers_cell(row: dict) -> str:
    """GPUs used of the instance's GPUs, times the instances (instances.gpus_used_cell)."""
    from stash_core.decide.predict.instances import gpus_used_cell

    return gpus_used_cell(row["instance_count"], row["workers_per_instance"], row["gpus_per_instance"])


def _header(request: dict, errors: dict) -> list[str]:
    from stash_core.decide.predict.profile_arithmetic import precision_words

    shape = request.get("input_shape")
    shape = f", input {'x'.join(str(size) for size in shape)}" if shape else ""
    workers = request.get("workers_per_instance") or "all GPUs"
    per_instance = "one worker per GPU" if workers == "all GPUs" else f"{workers} worker(s) per instance"
    if request.get("script_run"):
        batch = request["batch_size"] or "unknown"
        return [
            f"script {request['model']} (run {request['script_run']} on {request['measured_on']}), batch "
            f"{batch} per worker, {precision_words(request)}, {per_instance}; compute scaled by the GPU "
            "ratio (the "
            f"GPUs' {request['precision']} matrix peaks and memory bandwidths, blended as fitted on "
            "published pairs); ±err: the held-out error of that scaling between GPUs on published figures in "
            "the row's batch regime (a GPU's own where it runs wider); ±comm: the held-out error of the "
            "step's communication on several GPUs, a share of the step; memory not checked"
        ]
    return [
        f"{request['model']}, batch {request['batch_size']} per worker{shape}, {precision_words(request)}, "
        f"{request['habits'] + ', ' if request.get('habits') else ''}{per_instance}; ±err: the held-out "
        "error of each row's compute path and batch regime on "
        "published figures it was not fitted to (its GPU's own where that runs wider; -: compute measured on "
        "this GPU, or scaled from a profile on it, no model between; a row measured whole: its profile's 95% "
        "interval); ±comm: the held-out "
        "error of the step's communication on several GPUs (one machine, several machines, or the links' "
        "own where wider), a share of the step",
        *([f"GPUs: {', '.join(name.removeprefix('NVIDIA ') for name in request['gpus'])}"]
          if request.get("gpus") else []),
    ]  # fmt: skip


COMMANDS = {"predict": cmd_predict}
