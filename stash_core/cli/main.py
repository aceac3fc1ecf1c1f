"""The `stash` command (also `python -m stash_core`).

Exit status: 0 success, 1 failed measurement, 2 bad usage or bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stash_core.cli.args import add_db_argument, db_path
from stash_core.errors import StashError, UsageError
from stash_core.spec import add_profile_arguments

# Imports inside the command functions are deliberate: `stash --help` and the commands that do not
# measure must start fast, without torch, pandas or DuckDB.

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
