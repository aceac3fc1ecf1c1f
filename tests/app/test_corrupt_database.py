"""A database damaged where its open-time checks do not look: the pages say so and how to recover."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import damaged_copy, shown
from test_pages import open_page


def test_a_corrupt_block_is_said_with_the_way_back_not_as_a_bug(
    populated_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = damaged_copy(populated_db, tmp_path)
    assert db is not None, "no block of the runs table found to damage"
    monkeypatch.setenv("STASH_DB", str(db))
    app = open_page("Overview")
    assert not app.exception, [e.value for e in app.exception]
    said = [shown(e.value) for e in app.error]
    assert any(e.startswith("the database is corrupt (Corrupt database file") for e in said), said
    assert any("stash ingest --skip-bad results/*.json" in e for e in said), said
    assert not any("Something went wrong" in e for e in said), said
