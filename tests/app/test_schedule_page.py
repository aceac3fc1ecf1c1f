"""The Schedule page in Streamlit's AppTest: empty database, a synthetic simulation stored and shown, and
bad input shown as a message."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stash_core.store import simulations_frame

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "pages" / "schedule.py"


def _page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("STASH_DB", str(db))
    monkeypatch.setenv("STASH_VALIDATE_CHARTS", "1")
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def _simulate(app: AppTest) -> AppTest:
    next(button for button in app.button if button.label == "Simulate").click()
    return app.run()


def test_a_synthetic_simulation_is_stored_and_compared(tmp_path, monkeypatch):
    db = tmp_path / "r.duckdb"
    app = _page(db, monkeypatch)
    assert not app.exception and any("No simulation stored yet" in info.value for info in app.info)
    app.number_input(key="sched-jobs").set_value(60)
    app.multiselect(key="sched-policies").set_value(["fifo", "las", "network-preempt"])
    app.selectbox(key="sched-tuning").set_value("online")
    app = _simulate(app)
    assert not app.exception and not app.error
    assert sorted(simulations_frame(db)["policy"]) == ["fifo", "las", "network-preempt"]
    assert len(list((tmp_path / "results").glob("sim-*.json"))) == 1
    text = " ".join(md.value for md in app.markdown)
    assert "Lowest makespan:" in text and "Lowest communication overhead:" in text
    assert "timers set online" in " ".join(c.value for c in app.caption).lower()
    assert set(app.dataframe[0].value["policy"]) == {"fifo", "las", "network-preempt"}


def test_bad_input_shows_a_message(tmp_path, monkeypatch):
    app = _page(tmp_path / "r.duckdb", monkeypatch)
    app.multiselect(key="sched-policies").set_value([])
    app = _simulate(app)
    assert not app.exception and "choose at least one policy" in app.error[0].value
    app.multiselect(key="sched-policies").set_value(["delay"])
    app.radio(key="sched-source").set_value("upload")
    app = _simulate(app)
    assert not app.exception and "Upload a trace file" in app.error[0].value
