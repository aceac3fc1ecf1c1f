"""Fixtures for the dashboard tests: an empty and a populated database, chosen through STASH_DB."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from result_docs import populate_dashboard_db


@pytest.fixture()
def empty_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "empty" / "results.duckdb"
    db.parent.mkdir()
    monkeypatch.setenv("STASH_DB", str(db))
    return db


@pytest.fixture(scope="session")
def _populated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("template") / "results.duckdb"
    populate_dashboard_db(db)
    return db


@pytest.fixture()
def populated_db(_populated_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy (tests may write to it) of a database with five runs and two priced instances."""
    db = tmp_path / "populated" / "results.duckdb"
    db.parent.mkdir()
    shutil.copyfile(_populated_template, db)
    monkeypatch.setenv("STASH_DB", str(db))
    return db


@pytest.fixture(autouse=True)
def _no_other_measurements(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Run page looks for profiles running on this machine; measurements of whatever else runs on a
    shared test machine must not change what the page offers (a test that wants some patches this again)."""
    from stash_core.engine import job_state

    monkeypatch.setattr(job_state, "measuring_processes", lambda known_pids=frozenset(): [])
