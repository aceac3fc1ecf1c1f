"""Whether Stash's code changed on disk after the dashboard's server started (an update while it ran).

Streamlit runs a page's new script at once, but the modules the server imported before stay as they were, so
after an update a page can call old code with new arguments. A page that fails so says to restart the
dashboard, not "something went wrong".
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import psutil

# The package and the pages beside it (app.py, pages/): the code a dashboard's server runs.
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
CODE_FOLDERS = (PACKAGE_ROOT, PACKAGE_ROOT.parent / "pages")


def changed_since_start(folders: tuple[Path, ...] = CODE_FOLDERS, started_s: float | None = None) -> bool:
    """True when a .py file under `folders` was modified after this process started (`started_s`, epoch
    seconds; default the process's own start). Read only when a page has failed: some 400 stat calls."""
    started = psutil.Process().create_time() if started_s is None else started_s
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                if name.endswith(".py"):
                    try:
                        if os.stat(os.path.join(root, name)).st_mtime > started:
                            return True
                    except OSError:  # removed by the update as it was listed
                        return True
    return False


def known_changed() -> bool:
    """changed_since_start, False where it cannot tell: asked while a page fails, an error of its own must
    not replace the page's message."""
    try:
        return changed_since_start()
    except Exception:  # psutil or the file system
        logging.getLogger(__name__).exception("could not tell whether Stash's files changed")
        return False


RESTART_ADVICE = (
    "Stash's files changed after this dashboard started (an update?): restart the dashboard (stop it, then "
    "run it again) to use the new version; until then its pages may mix old and new code"
)
