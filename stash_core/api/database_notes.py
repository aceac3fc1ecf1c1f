"""What a profile says of the database it stores into: that it starts a new one (a mistyped --db would
otherwise go unnoticed), and the command that opens the dashboard on it."""

from __future__ import annotations

import os
from pathlib import Path

import stash_core
from stash_core.terminal import shell_word


def new_database_note(db_path: Path, at_start: bool) -> str:
    """The note that a profile starts a new database (at its start) or made one (at its end)."""
    if at_start:  # a folder made for it is said too: a mistyped folder in --db starts a new tree
        folder = "" if db_path.parent.exists() else f", nor its folder {db_path.parent} (made for it)"
        return (
            f"note: {db_path} does not exist yet{folder}: this profile starts a new database there (the "
            f"dashboard opens it with {dashboard_command(db_path)}, or its sidebar)"
        )
    return (
        f"note: {db_path} is a new database: the dashboard shows it when opened on it "
        f"({dashboard_command(db_path)}, or its sidebar); --db or $STASH_DB chooses the database"
    )


def dashboard_command(db_path: Path) -> str:
    """The command that opens the dashboard on `db_path`, to paste in any folder: the database's absolute
    path (run.sh changes to its own folder, where a relative one would name another file) and run.sh's,
    each quoted for the shell."""
    database = f"STASH_DB={shell_word(os.path.abspath(db_path))}"
    run_sh = Path(stash_core.PACKAGE_PARENT) / "run.sh"
    if run_sh.is_file():
        return f"{database} {shell_word(str(run_sh))}"
    return f"{database} ./run.sh in a Stash checkout"  # installed without the repository
