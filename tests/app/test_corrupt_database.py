"""A database damaged where its open-time checks do not look: the pages say so and how to recover."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from support import shown
from test_pages import open_page

BLOCK_BYTES = 262144  # DuckDB's block; its file starts with three 4 KiB headers


def damaged_copy(template: Path, folder: Path) -> Path | None:
    """A copy of `template` with one block overwritten whose damage only a read of the runs finds."""
    for block in range(template.stat().st_size // BLOCK_BYTES):
        db = folder / f"block{block}.duckdb"
        shutil.copyfile(template, db)
        with db.open("r+b") as file:
            file.seek(3 * 4096 + block * BLOCK_BYTES + 1000)
            file.write(b"\xab" * 3000)
        try:
            with duckdb.connect(str(db), read_only=True) as con:
                try:
                    con.execute("SELECT * FROM runs").fetchall()
                except duckdb.Error as exc:
                    if "Corrupt database file" in str(exc):
                        return db
        except duckdb.Error:  # the open itself found it: a case the pages said already
            pass
        db.unlink()
    return None


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
    assert any("stash ingest results/*.json" in e for e in said), said
    assert not any("Something went wrong" in e for e in said), said
