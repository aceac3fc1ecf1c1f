"""The `stash` command: one module per command group; each parses, calls the core and prints."""

from stash_core.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
