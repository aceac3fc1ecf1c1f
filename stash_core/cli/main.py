"""The `stash` command (also `python -m stash_core`).

Exit status: 0 success, 1 failed measurement (or a run that could not be saved whole), 2 bad usage or bad
input, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP); an interrupted profile is
saved first.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import functools
import re
import sys
from pathlib import Path

from stash_core import __version__, containment
from stash_core.cli.args import add_db_argument, add_format_argument, db_path, options_meant, unknown_options
from stash_core.cli.ingest_command import cmd_ingest
from stash_core.errors import StashError, UsageError, first_line
from stash_core.exits import refuse_undecodable, refuse_vanished_folder, run_command
from stash_core.pathargs import check_outputs, input_path, output_path
from stash_core.spec_argparse import add_profile_arguments, parse_script_args, takes_script_args
from stash_core.spec_parse import count
from stash_core.terminal import printable
from stash_core.userfiles import check_reachable

# argparse's words for a subcommand not among the choices: "argument <dest>: invalid choice: 'x' (choose ...)"
_INVALID_CHOICE = re.compile(r"argument ([a-z_]+): invalid choice: '(.*)' \(choose from")

# Imports inside the command functions are deliberate: `stash --help` and the commands that do not
# measure must start fast, without torch, pandas or DuckDB.

EXIT_INTERRUPTED = 130


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows every option's default (where it has one), with or without a help text."""

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and _shows_default(action):
            action = copy.copy(action)
            action.help = f"default: {_default_text(action)}"
            action.default_said = True  # by the help itself: _get_help_string adds nothing
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" in text or getattr(action, "default_said", False) or not _shows_default(action):
            return text
        return f"{text} (default: {_default_text(action)})"


def _shows_default(action: argparse.Action) -> bool:
    no_default = (None, False, True, argparse.SUPPRESS)  # by identity: 1 == True
    if isinstance(action.default, (list, tuple)) and not action.default:  # an empty list: no default to say
        return False
    return bool(action.option_strings) and not any(action.default is value for value in no_default)


def _default_text(action: argparse.Action) -> str:
    """The default as the option is typed: a list as 8,32,128 (not Python's [8, 32, 128])."""
    if isinstance(action.default, (list, tuple)):
        return ",".join(str(value) for value in action.default).replace("%", "%%")
    return "%(default)s"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2, and help shows defaults."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        # no abbreviated options: `recommend --budget 5` meant dollars to one user and ran as 5 hours
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # a value that starts like a negative number, with its unit (--latency -5ms), is the option's value
        # for its check to refuse, not an option of its own ("expected one argument"); no option of Stash's
        # looks like one
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse asks for the missing command before it looks at an unknown option in front of it
        # (`stash --bogus` said "the following arguments are required: command"): name the option
        given = sys.argv[1:] if args is None else list(args)
        self._given = given  # for error(): the options typed that this parser does not know
        if self._command_choices() and given and given[0].startswith("-"):
            option = given[0].split("=", 1)[0]
            if not any(known.startswith(option) for known in self._option_string_actions):
                if " " in self.prog:  # a command of commands (`stash instances --db x`): name them
                    commands = self._command_choices()
                    self.error(f"{option} goes after a command: one of {', '.join(commands)} "
                               f"(`{self.prog} {commands[0]} {option} ...`)")  # fmt: skip
                self.error(f"unrecognized option {given[0]} (a command's options go after the command)")
        if takes_script_args(self):  # `stash profile`, `stash campaign`: the script's arguments after `--`
            namespace, left = parse_script_args(super().parse_known_args, given, namespace)
            if left and getattr(namespace, "script", None):  # most likely the script's, typed before `--`
                self.error(f"unrecognized arguments: {' '.join(left)} (a script's own arguments go after --)")
            return namespace, left
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, left = self.parse_known_args(args, namespace)
        if left:  # said by the command's own parser, which knows how it prints JSON (error's hint)
            self._command_parser(namespace).error(f"unrecognized arguments: {' '.join(left)}")
        return namespace

    def _command_parser(self, namespace: argparse.Namespace) -> Parser:
        """The parser of the (sub)command `namespace` was parsed for: this one where it has none."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(namespace, action.dest, None) or "")
                if isinstance(chosen, Parser):
                    return chosen._command_parser(namespace)
        return self

    def _command_choices(self) -> list[str]:
        """The subcommands this parser takes, as typed (none for a parser without any)."""
        return [name for action in self._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices]  # fmt: skip

    def _command_dests(self) -> set[str]:
        return {action.dest for action in self._actions if isinstance(action, argparse._SubParsersAction)}

    def _print_message(self, message: str, file=None) -> None:
        # argparse drops a failed write of the help (`stash --help > /dev/full` ended 0, nothing shown): the
        # failure is the command's (exits.run_command says it)
        if message:
            (file or sys.stderr).write(message)

    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prints "stash: " before every error: name the subcommand only ("recommend: ...")
        command = self.prog.removeprefix("stash").strip()
        choices = self._command_choices()
        typed = getattr(self, "_given", [])
        if _REQUIRED.match(message) and (unknown := unknown_options(typed, self._option_string_actions)):
            message = f"unrecognized arguments: {' '.join(unknown)}"  # --modle mistyped, not --model missing
        if choices and message.startswith("the following arguments are required"):
            # argparse names the missing command by its internal dest (instances_action): say what to type
            message = f"a command is required: one of {', '.join(choices)}"
        elif (typo := _INVALID_CHOICE.match(message)) and typo.group(1) in self._command_dests():
            # the same internal dest for a mistyped command ("argument instances_action: invalid choice")
            close = difflib.get_close_matches(typo.group(2), choices, n=1, cutoff=0.7)
            hint = f" (did you mean {close[0]}?)" if close else ""
            message = f"unknown command {typo.group(2)!r}{hint}: one of {', '.join(choices)}"
        if message.startswith("unrecognized arguments") and ("--json" in message or "--format" in message):
            message += f" ({self._json_hint()})"  # two spellings of one wish: say this command's
        elif message.startswith("unrecognized arguments") and (
            meant := options_meant(message.split(": ", 1)[-1].split(), self._option_string_actions)
        ):
            hint = f"did you mean {' or '.join(meant)}?"
            # beside a hint already given (a script's own arguments go after --), in its parentheses
            message = f"{message[:-1]}; {hint})" if message.endswith(")") else f"{message} ({hint})"
        raise UsageError(f"{command}: {message}" if command else message)

    def _json_hint(self) -> str:
        """How this command prints JSON, for a user who typed the other spelling."""
        if "--json" in self._option_string_actions:
            return "this command takes --json"
        formats = self._option_string_actions.get("--format")
        if formats is not None and "json" in (formats.choices or ()):
            return "this command takes --format json"
        return "this command prints no JSON: `stash export --format json` or stash_core in Python give it"


_REQUIRED = re.compile(r"the following arguments are required|one of the arguments .* is required")

# results.file.RUN_STATUSES, said again: importing it costs every command some 50 ms of start-up
STATUSES = ("completed", "failed", "interrupted")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="stash", description="Where does the time of a distributed training iteration go?")
    parser.add_argument("--version", action="version", version=f"stash {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    # no abbreviated options where a script's own follow: `--batch 8` typed without `--` is refused, not
    # taken as --batch-size (the API's parser refuses it too)
    profile = commands.add_parser(
        "profile", help="profile a training job by differential runs", allow_abbrev=False
    )
    add_profile_arguments(profile)

    ingest = commands.add_parser("ingest", help="store result files in the database (idempotent)")
    ingest.add_argument("files", nargs="+", type=input_path, help="result, probe or simulation files (JSON)")
    ingest.add_argument(
        "--skip-bad", action="store_true",
        help="store the files that can be stored and name those that cannot (exit 1 when any); without it, "
        "one bad file stores none",
    )  # fmt: skip
    add_db_argument(ingest)

    runs = commands.add_parser("runs", help="list stored runs")
    runs.add_argument("--limit", type=count(10**6), default=50, help="most runs to list, newest first")
    runs.add_argument("--model", help="only the runs of this model (a script's is script:FILE)")
    runs.add_argument("--instance", help="only the runs of this instance label")
    runs.add_argument("--status", choices=STATUSES, help="only the runs that ended so")
    add_format_argument(runs, "runs, stored")
    add_db_argument(runs)

    show = commands.add_parser("show", help="show the stall breakdown of a stored run (or a probe set)")
    show.add_argument(
        "run_id",
        help="the run id or a probe set's, or any unique part of it (the short suffix the pages show)",
    )
    add_format_argument(show, "run, breakdown")
    add_db_argument(show)

    export = commands.add_parser("export", help="export every table and view to files")
    export.add_argument("--format", required=True, choices=["parquet", "csv", "json"], help="one file per "
                        "table and view, in this format (json: JSON Lines, one object per row)")  # fmt: skip
    export.add_argument("--out", required=True, type=output_path, help="folder to write the files into (new, "
                        "or an earlier export's; never the results folder or one holding other files of "
                        "the same names)")  # fmt: skip
    add_db_argument(export)

    models = commands.add_parser(
        "models", help="list the model zoo with parameter, gradient and layer counts"
    )
    models.add_argument(
        "--num-classes",
        type=count(10**7),
        default=1000,
        help="classes of each classifier's output (not a language model's)",
    )

    for group in command_groups():
        group.add_commands(commands, Parser)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process (some 25 ms of CPU: a process that runs several commands, like the
    dashboard's jobs or the tests, builds it once)."""
    return build_parser()


def parse_command(argv: list[str]) -> argparse.Namespace:
    """argv parsed; a deep copy, so that a command changing a list it was given (a default) leaves the next
    command's defaults as they were."""
    return copy.deepcopy(_parser().parse_args(argv))


def profile_refusal(args: list[str], db: Path) -> str | None:
    """What `stash profile ARGS` with database `db` refuses before it measures (a database it could not
    store into, an output or the database inside what it reads), in the command's words; None where it
    would start. The Run page asks it before it starts a job, which would fail on it after making its folder
    beside that database."""
    from stash_core.store.storable import check_storable

    command = ["profile", *args]  # --db before a script's own arguments (after "--"), as a job puts it
    at = command.index("--") if "--" in command else len(command)
    try:
        check_storable(db)
        check_outputs(_parser(), parse_command([*command[:at], "--db", str(db), *command[at:]]), db)
    except UsageError as error:
        return str(error)
    return None


def command_groups() -> list:
    """Modules that add subcommands of their own (each has add_commands and COMMANDS)."""
    from stash_core.cli import decisions as cli_decisions
    from stash_core.cli import network as cli_network
    from stash_core.cli import predict as cli_predict
    from stash_core.cli import sched as cli_sched
    from stash_core.cli import spot as cli_spot

    return [cli_network, cli_decisions, cli_predict, cli_spot, cli_sched]


def main(argv: list[str] | None = None) -> int:
    """Run one `stash` command; its exit status. SIGTERM and SIGHUP stop a command as Ctrl-C does (a profile
    saves what it measured and ends its workers), with 143 and 129 instead of 130 (exits.run_command)."""

    def command() -> int:
        given = sys.argv[1:] if argv is None else argv
        refuse_undecodable(given)
        refuse_vanished_folder()
        args = parse_command(given)
        containment.enable()  # a user's model code runs in a child process (zoo/contained.py)
        db = db_path(args) if hasattr(args, "db") else None
        if db is not None:  # a command that finds no file there would answer as for a new database
            check_reachable(db)
        check_outputs(_parser(), args, db)
        handler = all_commands()[args.command]
        return handler(args) or 0

    return run_command(command, json_errors=asks_for_json(sys.argv[1:] if argv is None else argv))


def asks_for_json(argv: list[str]) -> bool:
    """Whether a command line asks for JSON on stdout (--json, or --format json of predict, recommend, runs
    and show),
    so that its failure is JSON too. A script's own arguments (after --) are not read."""
    given = argv[: argv.index("--")] if "--" in argv else argv

    def spells(arg: str, option: str) -> bool:  # a start (--js) is refused, and its refusal is JSON too
        name = arg.split("=", 1)[0]
        return len(name) > 2 and option.startswith(name)

    if any(spells(arg, "--json") and "=" not in arg for arg in given):
        return True
    command = next((arg for arg in given if not arg.startswith("-")), None)
    formats = [b for a, b in zip(given, given[1:], strict=False) if "=" not in a and spells(a, "--format")]
    formats += [arg.split("=", 1)[1] for arg in given if "=" in arg and spells(arg, "--format")]
    return command in ("predict", "recommend", "runs", "show") and "json" in formats


def cmd_profile(args) -> int:
    from stash_core.cli.profile import profile_from_args

    return profile_from_args(args, db_path(args))


def cmd_runs(args) -> int:
    from stash_core.cli.show import runs_json, runs_table
    from stash_core.store.runs import RUN_FILTERS

    if not db_path(args).exists():  # a script must tell a mistyped --db from an empty database (exit 2)
        raise UsageError(f"no database {db_path(args)} (check --db or $STASH_DB; a first profile creates it)")
    matching = {key: getattr(args, key) for key in RUN_FILTERS if getattr(args, key) is not None}
    if args.format == "json":
        print(runs_json(db_path(args), limit=args.limit, matching=matching))
        return 0
    table = runs_table(db_path(args), limit=args.limit, matching=matching)
    said = " and ".join(f"{key} {value!r}" for key, value in matching.items())  # what left none
    said = f" with {said}" if said else ""
    print(printable(table) if table is not None else printable(f"no runs in {db_path(args)}{said}"))
    return 0


def cmd_show(args) -> int:
    from stash_core.cli.show import show_json, show_run

    shown = show_json if args.format == "json" else show_run
    print(printable(shown(db_path(args), args.run_id)))
    return 0


def cmd_export(args) -> int:
    import duckdb

    from stash_core import store

    try:
        paths = store.export(db_path(args), args.format, args.out)
    except duckdb.Error as error:  # a full disk while DuckDB writes the files
        raise StashError(f"cannot write the export to {args.out}: {first_line(error)}") from None
    for path in paths:
        print(printable(str(path)))
    return 0


def cmd_models(args) -> int:
    from stash_core.zoo import list_models
    from stash_core.zoo.build import describe_model
    from stash_core.zoo.registry import ZOO

    print(f"{'model':<22}{'kind':<8}{'parameters':>14}{'grad tensors':>14}{'layers':>8}")
    for name in list_models():
        # Counted on the meta device (llama2_7b's weights would take 27 GB); a language model's output is its
        # vocabulary, so --num-classes applies to the classifiers only.
        classes = None if ZOO[name].causal_lm else args.num_classes
        info = describe_model(name, num_classes=classes)
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
