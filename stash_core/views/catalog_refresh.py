"""The Recommend and Campaign pages' way out of a catalog an older Stash seeded: its button
(views.recommend's advice names it in place of the command), and the refresh that `stash instances seed`
makes (rows a user edited or imported are never touched)."""

from __future__ import annotations

from pathlib import Path

from stash_core.catalog import seed_and_refresh

REFRESH_BUTTON = "Give them this Stash's values"


def refresh_builtin_rows(db_path: Path | str) -> list[str]:
    """Give stored rows still of origin 'builtin' the values this Stash ships (and store the shipped rows not
    stored yet); the names refreshed."""
    return seed_and_refresh(db_path)[1]
