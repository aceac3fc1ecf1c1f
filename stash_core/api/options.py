"""Keyword options of the Python API as the command's arguments, checked by the command's own rules.

A profile's options are `stash profile`'s flags with underscores (batch_size=8 for --batch-size 8), or the
ProfileSpec fields they set (workers_per_node=2 for --workers 2): they are written as the argument list the
command would get and parsed by the same parser (spec_argparse.add_profile_arguments), so a value the command
refuses is refused here with the same one-line UsageError, and a profile from Python is the command's profile.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import inspect
import numbers
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError
from stash_core.habits import TrainingJob
from stash_core.pathargs import check_outputs, default_db, required_path
from stash_core.spec import OPTIONS, Option, ProfileSpec, default_of, script_sha256
from stash_core.spec_argparse import add_profile_arguments, parse_script_args
from stash_core.spec_parse import FieldError, identifier
from stash_core.userfiles import check_reachable


class OptionParser(argparse.ArgumentParser):
    """argparse whose errors are UsageErrors that name the command ("profile: argument --batch-size: ..."),
    as the `stash` command's parser words them; it never prints or exits."""

    def __init__(self, command: str) -> None:
        super().__init__(prog=f"stash {command}", add_help=False, allow_abbrev=False)
        self.command = command

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.command}: {message}")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        # the script's arguments only after a literal `--`, as `stash profile` reads them
        given = list(args or [])
        return parse_script_args(super().parse_known_args, given, namespace)


def profile_parser() -> OptionParser:
    """The parser of `stash profile`'s arguments (the profile child's command line and the API's options)."""
    parser = OptionParser("profile")
    add_profile_arguments(parser)
    return parser


def _options_by_name() -> dict[str, Option]:
    names: dict[str, Option] = {}
    for option in OPTIONS:
        if option.flag != "--":
            names[option.dest] = option
    for option in OPTIONS:  # a field's name too, where it differs from the flag's (workers_per_node)
        if option.attr and option.flag != "--":
            names.setdefault(option.attr, option)
    return names


def profile_argv(spec: ProfileSpec | None, options: Mapping[str, Any]) -> list[str]:
    """The `stash profile` arguments of `spec` (its fields away from their defaults) with `options` on top:
    an option replaces the spec's value, so probes=True switches a spec's probes=False back on.
    UsageError for a name that is no option, or a spec that is not a ProfileSpec."""
    if spec is not None and not isinstance(spec, ProfileSpec):
        raise UsageError(f"profile: spec must be a ProfileSpec, not {type(spec).__name__}")
    # Each option's value as its field holds it (a switch: the field's True or False), the spec's first.
    values: dict[Option, Any] = spec.options_given() if spec is not None else {}
    script_args = list(spec.script_args) if spec is not None else []
    names = _options_by_name()
    given: dict[Option, str] = {}  # the option each keyword named: two names of one option are refused
    for name, value in options.items():
        if name == "script_args":
            script_args = [_script_arg(arg) for arg in _as_list(name, value)]
            continue
        option = names.get(name)
        if option is None:
            raise UsageError(f"profile: unknown option {name!r}{_suggestion(name, [*names, 'script_args'])}")
        if option in given:
            raise UsageError(f"profile: {given[option]} and {name} are one option ({option.flag}): give one")
        given[option] = name
        if option.switch:
            values[option] = _switch_value(name, option, value)
        elif isinstance(value, bool):
            values[option] = _on_off(name, option, value)
        elif value is not None:  # None: not given, as the command's default
            values[option] = _one(name, option, value)
    if spec is not None:
        values.update(_derived_fields(spec, values))
    argv: list[str] = []
    for option, value in values.items():
        argv += _option_argv(option, value)
    return argv + (["--", *script_args] if script_args else [])


# The backend Stash runs on each device: gloo between CPU workers, NCCL between GPUs.
_BACKEND_OF_DEVICE = {"cpu": "gloo", "cuda": "nccl"}


def _derived_fields(spec: ProfileSpec, values: Mapping[Option, Any]) -> dict[Option, Any]:
    """The spec's fields that no option sets, which a profile derives (a stored run's spec holds them), as
    options: taken where they agree with what the profile would derive, refused where they do not; never
    dropped unsaid. A backend given with device "auto" chooses the device it runs on."""
    by_name = _options_by_name()
    device_option = by_name["device"]
    device = values.get(device_option, "auto")
    implied: dict[Option, Any] = {}
    if spec.backend is not None:
        devices = [name for name, backend in _BACKEND_OF_DEVICE.items() if backend == spec.backend]
        if not devices:
            raise UsageError(f"profile: spec.backend {spec.backend!r} is not one Stash runs: gloo on the "
                             "CPU, nccl on GPUs (None: the device's)")  # fmt: skip
        if device == "auto":
            implied[device_option] = devices[0]
        elif device != devices[0]:
            raise UsageError(f"profile: spec.backend {spec.backend!r} does not run on device {device!r}: "
                             "gloo on the CPU, nccl on GPUs (None: the device's)")  # fmt: skip
    if spec.script_sha256 is not None:
        script = values.get(by_name["script"])
        if spec.script is None:
            raise UsageError("profile: spec.script_sha256 is a script's: the spec names no script")
        if script == spec.script and script_sha256(script) not in (None, spec.script_sha256):
            raise UsageError(
                f"profile: the script {script} changed since the spec was made (its sha256 is "
                "no longer spec.script_sha256): make the spec again, or set script_sha256=None"
            )
    return implied


def api_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: an API function's unknown keyword ("profile: unknown option ..." words it), missing or
    extra argument is a UsageError naming `command`, as for profile(), not Python's TypeError. A function
    with **options checks their names itself."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function)
        known = list(signature.parameters)
        any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
        first = inspect.Parameter.POSITIONAL_ONLY
        only_first = {p.name for p in signature.parameters.values() if p.kind is first}

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            for name in kwargs:
                if name not in signature.parameters and not any_keyword:
                    raise UsageError(f"{command}: unknown option {name!r}{_suggestion(name, known)}")
            # a positional-only name given as a keyword goes to **options, as Python passes it (bind
            # refuses it)
            bound = {name: v for name, v in kwargs.items() if not (any_keyword and name in only_first)}
            try:
                signature.bind(*args, **bound)
            except TypeError as error:  # a missing argument, too many positional ones
                raise UsageError(f"{command}: {error}") from None
            # Stash's own callers (the commands, the pages) say its errors in their own words: the options
            # as flags, or as the page's fields
            users = not sys._getframe(1).f_globals.get("__name__", "").startswith("stash_core.")
            try:
                return function(*args, **kwargs)
            except UsageError as error:  # the same error (its class and fields), in this function's words
                # Stash's own words only: a subclass (a user's model, a newer file) may carry others' text
                if users and type(error) in (UsageError, FieldError) and len(error.args) == 1:
                    words = PROFILE_OPTION_NAMES if any_keyword else known
                    error.args = (argument_words(str(error.args[0]), words),)
                raise

        return call

    return decorate


_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")
# Left as they are: a command (in backticks, or from `stash ` to the end of its clause) is one to run, and a
# quoted value is data (a model named '--resnet50', a path "/data/--exp")
_KEPT = re.compile(r"""(`[^`]*`|(?<!\w)'[^'\n]*'(?!\w)|"[^"\n]*"|\bstash [^;,()\n]*)""")
# profile()'s keywords are the command's options: its messages name them (and only them) as flags
PROFILE_OPTION_NAMES = frozenset(
    option.flag.removeprefix("--").replace("-", "_") for option in OPTIONS if option.flag.startswith("--")
)


def argument_words(text: str, names: Collection[str]) -> str:
    """An error's command-line options named as the API function's arguments ("--batch-size must be ..." to
    batch_size=...'s caller), those of `names`; commands and quoted values are left whole (_KEPT)."""

    def argument(match: re.Match) -> str:
        name = match[1].replace("-", "_")
        return name if name in names else match[0]

    parts = _KEPT.split(text)  # the kept spans at the odd places
    return "".join(part if index % 2 else _FLAG.sub(argument, part) for index, part in enumerate(parts))


def parse_profile(argv: list[str]) -> tuple[argparse.Namespace, Path]:
    """`stash profile` arguments parsed and their database (--db, else $STASH_DB, else ./results.duckdb); an
    output that would replace what the profile reads (the database, a model file) is refused, as the command
    refuses it."""
    parser = profile_parser()
    args = parser.parse_args(argv)
    db = Path(args.db) if args.db is not None else default_db()
    check_outputs(parser, args, db)
    return args, db


def checked(name: str, value: Any, rule: Callable[[str], Any], many: bool = False) -> Any:
    """`value` through the rule its command-line flag has (Python values written as the flag's text first):
    the same value the command would get, or UsageError "name: reason"; None stays None. A list or tuple
    only where `many` (a comma list on the command line): batch_size=[8] was a batch of 8."""
    if value is None:
        return None
    if isinstance(value, list | tuple) and not many:
        raise UsageError(f"{name}: expected one value, not a list: {value!r}"[:200])
    try:
        return rule(as_text(value))
    except (argparse.ArgumentTypeError, ValueError, TypeError) as error:
        raise UsageError(f"{name}: {error}") from None


def required(name: str, value: Any, rule: Callable[[str], Any]) -> Any:
    """As `checked`, for an argument that has no "not given": None is refused like any bad value."""
    if value is None:
        raise UsageError(f"{name}: a value is required, got None")
    return checked(name, value, rule)


def text_value(name: str, value: Any, rule: Callable[[str], Any]) -> Any:
    """As `required`, for an argument that is one text (a model's or a run's name): a list is refused rather
    than joined with commas into a name that was never given."""
    if not isinstance(value, str):
        raise UsageError(f"{name}: expected a text, got {type(value).__name__} {value!r}"[:200])
    return checked(name, value, rule)


def how_it_trains(precision: str | None, *habits: str | None) -> tuple[str, TrainingJob]:
    """predict()'s and recommend()'s precision and TrainingJob (memory format, optimizer, its implementation,
    attention); None for any of them is its default, as the command's flag left out."""
    defaults = dataclasses.astuple(TrainingJob())
    given = zip(habits, defaults, strict=True)
    job = TrainingJob(*(default if value is None else value for value, default in given))
    return ("pytorch" if precision is None else precision), job


def switch(name: str, value: Any) -> bool:
    """A yes/no argument: True or False only (bool("no") would be True)."""
    if not isinstance(value, bool):
        raise UsageError(f"{name}: expected True or False, got {value!r}"[:200])
    return value


def instance_selection(value: list[str] | str | None, most: int) -> list[str] | None:
    """None for every instance ("all", as the commands' default), else the names."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "all"):
        return None
    return names("instances", value, most)


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> Any:
    """`value` when it is one of `allowed` (or None), else UsageError naming the choices."""
    if value is not None and value not in allowed:
        raise UsageError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return value


def names(name: str, value: Any, most: int) -> list[str] | None:
    """A list of names (instances, GPUs): a list, or one comma-separated text as the command takes it;
    each a name the command would take (spec_parse.identifier), at least one and at most `most`. None stays
    None."""
    if value is None:
        return None
    parts = [part.strip() for part in value.split(",")] if isinstance(value, str) else value
    if not isinstance(parts, list | tuple) or not parts or len(parts) > most:
        raise UsageError(f"{name}: expected a list of 1 to {most} names, got {value!r}")
    return [checked(name, part, identifier) for part in parts]


def as_text(value: Any) -> str:
    """A Python value as the command line writes it: a sequence comma separated, a float in its shortest
    exact form (a whole one without its point), a path as its text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return ",".join(as_text(item) for item in value)
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral | float):
        value = float(value)  # numpy's float32 is no float: its "8.0" was refused as not a whole number
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:  # 1e6 as 1000000: a whole number's rule reads it
            return str(int(value))
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def database(db: Path | str | None) -> Path:
    """The database an API call reads or writes: `db`, else $STASH_DB, else ./results.duckdb; UsageError for a
    path below a file or through a symlink loop."""
    path = default_db() if db is None else required_path("db", db)
    check_reachable(path)
    return path


def _script_arg(value: Any) -> str:
    """One of the script's arguments: text, or a number written as the shell would pass it; None is none."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise UsageError(f"profile: script_args must be text, got {value!r}")
    return str(value)


def _switch_value(name: str, option: Option, value: Any) -> bool:
    """A switch given by its flag's name (no_probes=True) or its field's (probes=False), as the value its
    field gets (False for both); a switch that sets no field (no_store) as whether the flag is typed."""
    wanted = switch(name, value)
    if option.attr is None or name == option.attr:
        return wanted
    return not default_of(option.attr) if wanted else default_of(option.attr)


def _option_argv(option: Option, value: Any) -> list[str]:
    """One option's arguments: a switch's flag where its value is away from the default, else --flag=VALUE."""
    if option.switch:
        typed = value if option.attr is None else value != default_of(option.attr)
        return [option.flag] if typed else []
    return [f"{option.flag}={as_text(value)}"]  # "=": a value that starts with "-" stays a value


# The options that take a comma list on the command line, and so a list or tuple here.
_LIST_OPTIONS = frozenset({"stalls", "hosts", "input_shape"})
# The options that name something (a model, an instance type): text only, as predict()'s model is.
_NAME_OPTIONS = frozenset({"model", "instance"})


def _one(name: str, option: Option, value: Any) -> Any:
    """A keyword's value as its option takes it: text, a number or a path, or a list for a comma-list option;
    db=5 was a database file named "5", out=["a", "b.json"] a file "a,b.json", batch_size=[2] a batch of 2."""
    if isinstance(value, list | tuple) and option.dest in _LIST_OPTIONS:
        return value
    if option.dest in _NAME_OPTIONS and not isinstance(value, str):  # model=5 was the model named "5"
        raise UsageError(f"profile: {name} takes a text, not {type(value).__name__} {value!r}"[:200])
    if not isinstance(value, str | numbers.Real | os.PathLike) or (  # numpy's numbers too
        option.dest in ("db", "out") and not isinstance(value, str | os.PathLike)
    ):
        given = f"{type(value).__name__} {value!r}"
        raise UsageError(f"profile: {name} takes {_takes(option)}, not {given}"[:200])
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _takes(option: Option) -> str:
    if option.dest in ("db", "out"):
        return "a path"
    return "a value or a list" if option.dest in _LIST_OPTIONS else "one value"


def _on_off(name: str, option: Option, value: bool) -> str:
    """A choice of on and off (paired="auto" | "on" | "off") takes True and False as those; others no bool."""
    if option.choices is None or not {"on", "off"} <= set(option.choices):
        raise UsageError(f"profile: {name} takes a value, not {value!r}")
    return "on" if value else "off"


def _as_list(name: str, value: Any) -> list[Any]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise UsageError(f"profile: {name} must be a list of the script's arguments")
    return list(value)


def _suggestion(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f"; the options are {', '.join(sorted(set(known)))}"
