"""Fixtures for the dashboard tests: an empty and a populated database, chosen through STASH_DB.

AppTest looks for Streamlit components in every installed package's metadata before each run of a page
(some 0.15 s of CPU, 70-odd runs); what is installed does not change while the tests run, so the scan is made
once per process. The dashboard itself scans once, when it starts (tests/e2e drive it).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest
from result_docs import populate_dashboard_db
from streamlit.components.v2 import manifest_scanner

manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


@pytest.fixture(autouse=True)
def _model_code_as_the_server_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page runs a user's model code in a new interpreter (pages/_shared.py turns it on when first
    imported); every page test does so, and the setting goes back afterwards, so that the tests of other
    files that this process runs next keep their own."""
    from stash_core import containment

    monkeypatch.setattr(containment, "FRESH_PROCESS", True)


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
