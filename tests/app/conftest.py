"""Fixtures for the dashboard tests: an empty and a populated database, chosen through STASH_DB."""

from __future__ import annotations

import shutil
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


@pytest.fixture(scope="session")
def _populated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("template") / "results.duckdb"
    populate(db)
    return db


@pytest.fixture()
def populated_db(_populated_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy (tests may write to it) of a database with five runs and two priced instances."""
    db = tmp_path / "populated" / "results.duckdb"
    db.parent.mkdir()
    shutil.copyfile(_populated_template, db)
    monkeypatch.setenv("STASH_DB", str(db))
    return db
