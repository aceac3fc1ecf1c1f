"""A page that fails after Stash's files changed under a running dashboard says to restart it: old modules
called with a new page's arguments said "Something went wrong ... TypeError", as a bug."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support import shown
from test_pages import open_page

from stash_core import views
from stash_core.views import code_age


def _old_module_called_anew(*args, **kwargs):
    raise TypeError("RecommendRequest.__init__() got an unexpected keyword argument 'workers_per_instance'")


@pytest.mark.parametrize("updated", [True, False], ids=["files-changed", "files-as-started"])
def test_a_failing_page_says_to_restart_when_the_code_changed_since_the_start(
    populated_db: Path, monkeypatch: pytest.MonkeyPatch, updated: bool
) -> None:
    monkeypatch.setattr(views.overview, "overview", _old_module_called_anew)
    monkeypatch.setattr(code_age, "changed_since_start", lambda: updated)
    if updated is False:  # an error while looking is the usual message, not a traceback of its own
        monkeypatch.setattr(code_age, "changed_since_start", lambda: (_ for _ in ()).throw(OSError("gone")))
    app = open_page("Overview")
    assert not app.exception
    said = " ".join(shown(error.value) for error in app.error)
    assert "unexpected keyword argument 'workers_per_instance'" in said
    assert ("restart the dashboard" in said) is updated
    assert ("Something went wrong on this page" in said) is not updated


def test_a_file_modified_after_the_start_is_found(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    module = tmp_path / "sub" / "m.py"
    module.write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not code")
    started = time.time() + 60  # the server started after the file was written
    assert not code_age.changed_since_start((tmp_path,), started_s=started)
    os.utime(module, (started + 5, started + 5))  # then an update wrote it
    assert code_age.changed_since_start((tmp_path,), started_s=started)


@pytest.mark.parametrize("updated", [True, False], ids=["files-changed", "files-as-started"])
def test_a_database_the_updated_stash_wrote_says_to_restart_not_to_upgrade(
    populated_db: Path, monkeypatch: pytest.MonkeyPatch, updated: bool
) -> None:
    """The new code, run by a profile the page started, moved the database to a newer schema: every page
    then said "upgrade Stash", where the dashboard only needs a restart."""
    from stash_core.errors import NewerThanStash

    def newer(*args, **kwargs):
        raise NewerThanStash("database r.duckdb has schema_version 99; this Stash reads up to 7 - upgrade")

    monkeypatch.setattr(views.overview, "overview", newer)
    monkeypatch.setattr(code_age, "changed_since_start", lambda: updated)
    app = open_page("Overview")
    said = " ".join(shown(error.value) for error in app.error)
    assert "schema_version 99" in said
    assert ("restart the dashboard" in said) is updated
