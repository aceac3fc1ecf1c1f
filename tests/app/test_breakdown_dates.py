"""The Stall breakdown page's range of days: a run of a new day joins a range left at its ends at once, and a
range the user narrowed stays as chosen when the days' bounds move."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store


def _store(db: Path, day: int) -> str:
    doc = result_doc(started_at=datetime(2026, 11, day, 12, tzinfo=UTC))
    store.ingest_result(db, doc)
    return doc["run_id"]


def _counted(app: AppTest) -> str:
    return next(caption.value for caption in app.caption if "matching run(s)" in caption.value)


def _page(db: Path) -> AppTest:
    app = AppTest.from_file(str(REPO / "pages" / "breakdown.py"), default_timeout=90)
    app.session_state["stash_db_path"] = str(db)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_a_run_of_a_new_day_joins_an_open_range_at_once(empty_db: Path) -> None:
    """The page read the range the slider held before the new day moved its bounds: "2 of 2 matching runs",
    the new run on the next rerun only."""
    for day in (20, 22):
        _store(empty_db, day)
    app = _page(empty_db)
    assert _counted(app).startswith("2 of 2")
    _store(empty_db, 25)
    app.run()
    assert not app.exception and _counted(app).startswith("3 of 3")
    assert app.slider(key="bd-dates").value == (date(2026, 11, 20), date(2026, 11, 25))


def test_a_narrowed_range_stays_when_a_new_day_moves_the_bounds(empty_db: Path) -> None:
    for day in (20, 22, 24):
        _store(empty_db, day)
    app = _page(empty_db)
    app.slider(key="bd-dates").set_value((date(2026, 11, 21), date(2026, 11, 22))).run()
    assert _counted(app).startswith("1 of 1")
    _store(empty_db, 26)
    app.run()
    assert not app.exception and _counted(app).startswith("1 of 1")
    assert app.slider(key="bd-dates").value == (date(2026, 11, 21), date(2026, 11, 22))
