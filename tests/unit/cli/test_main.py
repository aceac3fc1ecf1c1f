"""The command line parsed once per process: every command gets defaults of its own."""

from __future__ import annotations

import importlib

cli_main = importlib.import_module("stash_core.cli.main")  # the package's `main` is the function


def test_the_parser_is_built_once_per_process() -> None:
    assert cli_main._parser() is cli_main._parser()


def test_a_command_that_changes_a_default_list_leaves_the_next_commands_default_as_it_was() -> None:
    first = cli_main.parse_command(["spot-memory", "--model", "resnet10"])
    default_batches = list(first.batches)
    first.batches.append(4096)
    second = cli_main.parse_command(["spot-memory", "--model", "resnet10"])
    assert second.batches == default_batches
    assert second.batches is not first.batches


def test_parsed_arguments_are_those_of_a_freshly_built_parser() -> None:
    argv = ["profile", "--model", "resnet10", "--workers", "2", "--stalls", "compute,network"]
    assert vars(cli_main.parse_command(argv)) == vars(cli_main.build_parser().parse_args(argv))
