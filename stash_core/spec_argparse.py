"""`stash profile`'s options (spec.OPTIONS) given to argparse: a parser of every option or of the machines'
only, and the script's own arguments after a literal `--`, taken apart before argparse sees them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import MISSING
from typing import Any

from stash_core.spec import DATA, MACHINES, OPTIONS, PROFILE_MACHINES, Option, default_of


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of `stash profile`: what to run (the spec's fields) and how (--out, --db, --progress)."""
    data = parser.add_mutually_exclusive_group()
    machines = parser.add_argument_group("several machines")
    for option in OPTIONS:
        group = {DATA: data, MACHINES: machines, PROFILE_MACHINES: machines}.get(option.group, parser)
        _add_option(group, option)


def add_machine_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that name the machines, for other commands than `stash profile` (`stash probe`)."""
    group = parser.add_argument_group("several machines")
    for option in OPTIONS:
        if option.group == MACHINES:
            _add_option(group, option)


def _add_option(parser: Any, option: Option) -> None:
    if option.flag == "--":
        add_script_args(parser, option.help)
        return
    if option.attr in ("model", "batch_size"):  # not with --script: from_args checks
        parser.add_argument(option.flag, type=option.type, default=None, help=option.help)
        return
    if option.switch:
        parser.add_argument(option.flag, action="store_true", help=option.help)
        return
    default = option.default if option.attr is None or option.parse else default_of(option.attr)
    required = option.attr is not None and default is MISSING
    parser.add_argument(option.flag, type=option.type, choices=option.choices, default=None if required
                        else default, required=required, help=option.help, action=_Typed)  # fmt: skip


def add_script_args(parser: Any, help_text: str | None) -> None:
    """The script's own arguments, after a literal `--` only: a parser given them must read its command line
    with `parse_script_args`, which takes them apart before argparse sees them."""
    parser.add_argument("script_args", nargs="*", default=[], metavar="-- SCRIPT_ARGS", help=help_text)


def takes_script_args(parser: argparse.ArgumentParser) -> bool:
    """Whether `parser` has the script's arguments (add_script_args)."""
    return any(action.dest == "script_args" and not action.option_strings for action in parser._actions)


def parse_script_args(parse_known: Callable, args: list[str], namespace: Any) -> tuple[Any, list[str]]:
    """argparse's parse_known_args of a parser with add_script_args: what follows the first `--` is the
    script's, word for word; any other bare word is an unrecognized argument (a stray "interconnect" of
    `--stalls compute, interconnect` is not passed to the script, nor said to come after a `--`)."""
    cut = args.index("--") if "--" in args else len(args)
    namespace, extras = parse_known(args[:cut], namespace)
    left = [*namespace.script_args, *extras]  # bare words before any `--` (the positional took them), then
    namespace.script_args = args[cut + 1 :]  # unknown options: said in the order they were typed
    ordered = []
    for word in args[:cut]:
        if word in left:
            left.remove(word)
            ordered.append(word)
    return namespace, [*ordered, *left]


class _Typed(argparse.Action):
    """Store the value, and note in `typed` that the option was on the command line: one typed at its
    default value is no different otherwise."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)
        namespace.typed = {*getattr(namespace, "typed", ()), self.dest}
