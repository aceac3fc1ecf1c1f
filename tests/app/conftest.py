"""Fixtures for the dashboard tests: an empty and a populated database, chosen through STASH_DB."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_docs import populate  # noqa: E402


@pytest.fixture()
def empty_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "empty" / "results.duckdb"
    db.parent.mkdir()
    monkeypatch.setenv("STASH_DB", str(db))
    return db


@pytest.fixture()
def populated_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "populated" / "results.duckdb"
    populate(db)
    monkeypatch.setenv("STASH_DB", str(db))
    return db
