"""Arguments shared by every group of `stash` subcommands."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from stash_core.spec import positive_int

__all__ = ["add_db_argument", "db_path", "default_db", "positive_int"]


def default_db() -> Path:
    return Path(os.environ.get("STASH_DB") or "results.duckdb")


def db_path(args: argparse.Namespace) -> Path:
    """--db, else $STASH_DB, else ./results.duckdb."""
    if getattr(args, "db", None) is not None:
        return Path(args.db)
    return default_db()


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", type=Path, default=None, help="DuckDB file (default: $STASH_DB or ./results.duckdb)"
    )
