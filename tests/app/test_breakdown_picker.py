"""The Stall breakdown page's run picker follows a link to another run without Streamlit's warning that a
widget got a default value and a Session State value at once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from result_docs import result_doc
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _two_runs_linked(db: Path, monkeypatch: pytest.MonkeyPatch, link) -> tuple[AppTest, dict, dict]:
    """The app on two runs, opened with ?run= of `link(the first run id)`: (app, first, second)."""
    first, second = result_doc(stalls={"compute": 0.30}), result_doc(stalls={"compute": 0.20})
    store.ingest_result(db, first)
    store.ingest_result(db, second)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)  # said once a process otherwise
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.query_params["run"] = link(first["run_id"])
    return app.run(), first, second


def test_a_link_to_another_run_moves_the_picker_without_a_state_warning(
    empty_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, first, second = _two_runs_linked(empty_db, monkeypatch, lambda run_id: run_id)
    kept = Kept()
    policies._LOGGER.addHandler(kept)
    try:
        app.switch_page("pages/breakdown.py").run()
        assert app.selectbox(key="bd-run").value == first["run_id"]
        app.query_params["run"] = second["run_id"]
        app.run()
    finally:
        policies._LOGGER.removeHandler(kept)
    assert not app.exception, [e.value for e in app.exception]
    assert app.selectbox(key="bd-run").value == second["run_id"]
    assert not [m for m in kept.messages if "created with a default value" in m]


def test_a_link_with_the_short_id_the_labels_show_opens_that_run(
    empty_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """?run=<suffix> said "No run ..." and opened the newest run, as if the link named none."""
    app, older, newer = _two_runs_linked(empty_db, monkeypatch, lambda run_id: run_id.rsplit("-", 1)[1])
    app.switch_page("pages/breakdown.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.selectbox(key="bd-run").value == older["run_id"] != newer["run_id"]
    assert not app.warning
