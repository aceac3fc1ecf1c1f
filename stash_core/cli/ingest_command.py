"""`stash ingest`: result, probe and simulation files into the database, each said as it goes in."""

from __future__ import annotations

import sys
from pathlib import Path

from stash_core.cli.args import db_path
from stash_core.errors import UsageError
from stash_core.terminal import printable


def cmd_ingest(args) -> int:
    """Store the files; 1 when --skip-bad left some out, 2 (a UsageError) when one refused them all."""
    from stash_core import store
    from stash_core.store.ingest_said import COMPLETED, NothingStored

    new = not db_path(args).exists()
    refused: list[str] = []

    def skip(path: Path, why: str) -> None:
        refused.append(why)
        print(printable(f"stash: not stored: {why}"), file=sys.stderr)

    def said(path: Path, run_id: str, words: str) -> None:  # as each file goes in: an interrupt keeps them
        what = "completed (what it lacked added)" if words == COMPLETED else words
        print(printable(f"{what}  {run_id}  ({path})"), flush=True)

    try:
        skip_bad = skip if args.skip_bad else None
        store.ingest_files(db_path(args), args.files, words=True, skip_bad=skip_bad, on_stored=said)
    except NothingStored as error:  # without --skip-bad: the flag that stores the others
        if len(error.reasons) > 1:  # every bad file, a line each in the order given, then what it meant
            for why in error.reasons:
                print(printable(f"stash: cannot be stored: {why}"), file=sys.stderr)
            others = " (--skip-bad stores the others)" if len(error.reasons) < len(args.files) else ""
            raise UsageError(f"{len(error.reasons)} of the {len(args.files)} files cannot be stored (named "
                             f"above): nothing stored{others}") from None
        if len(args.files) > 1:
            raise UsageError(f"{error} (--skip-bad stores them and names those it cannot)") from None
        raise
    if new and db_path(args).exists():  # a mistyped --db would otherwise go unnoticed
        print(printable(f"note: {db_path(args)} did not exist: it is a new database"))
    if refused:
        said = f"stash: {len(refused)} of the {len(args.files)} files not stored (named above)"
        print(said, file=sys.stderr)
        return 1
    return 0
