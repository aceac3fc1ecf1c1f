"""Subcommands for machines and networks: remote hosts, the emulated cluster, bandwidth probes."""

from __future__ import annotations

import argparse


def add_commands(subparsers, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Register this group's subcommands (filled in as the network features land)."""


COMMANDS: dict = {}
