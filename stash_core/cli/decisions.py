"""The decision commands of `stash`: fit, instances, recommend, whatif, campaign (one module each).

cli/main.py wires them in with `add_commands(subparsers, parser_class)` and dispatches through COMMANDS.
Every handler takes the parsed arguments and returns the exit status; user mistakes raise UsageError.
"""

from __future__ import annotations

import argparse
from typing import Any

from stash_core.cli import campaign as cli_campaign
from stash_core.cli import fit as cli_fit
from stash_core.cli import instances as cli_instances
from stash_core.cli import recommend as cli_recommend
from stash_core.cli import whatif as cli_whatif

GROUPS = (cli_fit, cli_instances, cli_recommend, cli_whatif, cli_campaign)


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add the fit, instances, recommend, whatif and campaign subcommands to `stash`'s subparsers."""
    for group in GROUPS:
        group.add_commands(subparsers, parser_class)


COMMANDS = {name: handler for group in GROUPS for name, handler in group.COMMANDS.items()}
