"""The `stash` command (also `python -m stash_core`).

Exit status: 0 success, 1 failed measurement, 2 bad usage or bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stash_core.cli.args import add_db_argument, db_path, positive_int
from stash_core.errors import StashError, UsageError

EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="stash", description="Where does the time of a distributed training iteration go?")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    profile = commands.add_parser("profile", help="profile a training job by differential runs")
    add_profile_arguments(profile)

    ingest = commands.add_parser("ingest", help="store result files in the database (idempotent)")
    ingest.add_argument("files", nargs="+", type=Path)
    add_db_argument(ingest)

    runs = commands.add_parser("runs", help="list stored runs")
    runs.add_argument("--limit", type=int, default=50)
    add_db_argument(runs)

    show = commands.add_parser("show", help="show the stall breakdown of a stored run")
    show.add_argument("run_id")
    add_db_argument(show)

    export = commands.add_parser("export", help="export every table and view to files")
    export.add_argument("--format", required=True, choices=["parquet", "csv", "json"])
    export.add_argument("--out", required=True, type=Path)
    add_db_argument(export)

    models = commands.add_parser(
        "models", help="list the model zoo with parameter, gradient and layer counts"
    )
    models.add_argument("--num-classes", type=int, default=1000)

    for group in command_groups():
        group.add_commands(commands, Parser)
    return parser


def command_groups() -> list:
    """Modules that add subcommands of their own (each has add_commands and COMMANDS)."""
    from stash_core.cli import decisions as cli_decisions
    from stash_core.cli import network as cli_network
    from stash_core.cli import sched as cli_sched
    from stash_core.cli import spot as cli_spot

    return [cli_network, cli_decisions, cli_spot, cli_sched]


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="zoo name, FILE.py:FACTORY or package.module:FACTORY")
    p.add_argument("--batch-size", required=True, type=positive_int, help="samples per worker per iteration")
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes (GPUs) per machine")
    p.add_argument("--nodes", type=positive_int, default=1, help="machines (with --hosts or --cluster)")
    p.add_argument("--stalls", default=None, help="comma list of compute,interconnect,network,cpu,disk")
    data = p.add_mutually_exclusive_group()
    data.add_argument("--dataset", default=None, help="ImageFolder-style directory: one folder per class")
    data.add_argument(
        "--synthetic-images", type=positive_int, default=None, help="generate N JPEG files once"
    )
    p.add_argument(
        "--dataset-images", type=positive_int, default=None, help="epoch size for synthetic-only runs"
    )
    p.add_argument("--image-px", type=positive_int, default=256, help="side of generated images (pixels)")
    p.add_argument("--loader-workers", type=int, default=2, help="DataLoader processes per worker")
    p.add_argument("--iterations", default="auto", help="'auto' (until ± target) or a number per run")
    p.add_argument("--target-ci", type=float, default=0.02, help="relative 95%% CI to reach with auto")
    p.add_argument("--max-iterations", type=int, default=2000, help="cap per run with auto")
    p.add_argument("--max-phase-seconds", type=float, default=120.0, help="cap per run, in seconds")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--threads-per-worker", type=positive_int, default=None, help="torch threads per CPU worker"
    )
    p.add_argument("--instance", default=None, help="label of the machine or cloud instance type")
    p.add_argument("--input-shape", default=None, help="C,H,W for images or a sequence length for tokens")
    p.add_argument("--num-classes", type=positive_int, default=None)
    p.add_argument(
        "--disk-read-mbps", type=float, default=None, help="cap read throughput (block-I/O cgroup)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="result file (default: results/RUN_ID.json)")
    p.add_argument("--no-store", action="store_true", help="write the result file only, not the database")
    p.add_argument("--progress", default="auto", choices=["auto", "bar", "json", "none"])
    add_db_argument(p)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        handler = all_commands()[args.command]
        return handler(args) or 0
    except StashError as error:
        print(f"stash: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("stash: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


def cmd_profile(args) -> int:
    from stash_core.cli.profile import profile_from_args

    return profile_from_args(args, db_path(args))


def cmd_ingest(args) -> int:
    from stash_core import store

    outcomes = store.ingest_files(db_path(args), args.files)
    for path, run_id, inserted in outcomes:
        print(f"{'stored ' if inserted else 'already stored '} {run_id}  ({path})")
    return 0


def cmd_runs(args) -> int:
    from stash_core import store

    frame = store.list_runs(db_path(args), limit=args.limit)
    if frame.empty:
        print(f"no runs in {db_path(args)}")
        return 0
    columns = [
        c
        for c in (
            "run_id",
            "started_at",
            "status",
            "model",
            "batch_size",
            "workers_per_node",
            "nodes",
            "instance",
            "device",
            "iteration_s",
            "epoch_s",
        )
        if c in frame.columns
    ]
    print(frame[columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


def cmd_show(args) -> int:
    from stash_core import store
    from stash_core.cli.show import format_stored_run

    run = store.get_run(db_path(args), args.run_id)
    if run is None:
        raise UsageError(f"no run {args.run_id!r} in {db_path(args)}")
    print(format_stored_run(run))
    return 0


def cmd_export(args) -> int:
    from stash_core import store

    for path in store.export(db_path(args), args.format, args.out):
        print(path)
    return 0


def cmd_models(args) -> int:
    from stash_core.zoo import build_model, list_models

    print(f"{'model':<22}{'kind':<8}{'parameters':>14}{'grad tensors':>14}{'layers':>8}")
    for name in list_models():
        _, info = build_model(name, num_classes=args.num_classes)
        print(
            f"{name:<22}{info.kind:<8}{info.param_count:>14,}{info.grad_tensor_count:>14}{info.layer_count:>8}"
        )
    return 0


def all_commands() -> dict:
    commands = dict(COMMANDS)
    for group in command_groups():
        commands.update(group.COMMANDS)
    return commands


COMMANDS = {
    "profile": cmd_profile,
    "ingest": cmd_ingest,
    "runs": cmd_runs,
    "show": cmd_show,
    "export": cmd_export,
    "models": cmd_models,
}
