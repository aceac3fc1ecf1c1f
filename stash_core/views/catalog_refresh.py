"""The Recommend page's way out of a catalog an older Stash seeded: the warning in the page's words, and the
refresh that `stash instances seed` makes (rows a user edited or imported are never touched)."""

from __future__ import annotations

from pathlib import Path

from stash_core.catalog import seed_and_refresh

REFRESH_BUTTON = "Give them this Stash's values"
_COMMAND = "; `stash instances seed"  # where the command's advice starts in the warning


def warning_in_page_words(warning: str) -> str:
    """The catalog warning with the page's button in place of the command (the rest as the command says)."""
    head, found, _ = warning.partition(_COMMAND)
    if not found:
        return warning
    return f"{head}; the button below ({REFRESH_BUTTON}) gives them this Stash's values."


def refresh_builtin_rows(db_path: Path | str) -> list[str]:
    """Give stored rows still of origin 'builtin' the values this Stash ships (and store the shipped rows not
    stored yet); the names refreshed."""
    return seed_and_refresh(db_path)[1]
