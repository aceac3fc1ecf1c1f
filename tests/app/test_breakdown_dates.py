"""The Stall breakdown page's filters: a run of a new day joins a range left at its ends at once, and a range
the user narrowed stays as chosen when the days' bounds move; the filter holds only values the database has (a
model or days chosen on one database, then another picked in the sidebar, must not hide its runs); a run
named in the address again (a link, the browser's Back) is the one shown."""

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


def _infos(app: AppTest) -> list[str]:
    return [info.value for info in app.info]


def test_a_model_the_new_database_lacks_filters_nothing(tmp_path: Path) -> None:
    first, second = tmp_path / "first.duckdb", tmp_path / "second.duckdb"
    store.ingest_result(first, result_doc("resnet18"))
    store.ingest_result(first, result_doc("vgg11"))
    store.ingest_result(second, result_doc("mlp"))
    app = _page(first)
    app.multiselect(key="bd-models").set_value(["resnet18"]).run()
    assert not app.exception and app.selectbox(key="bd-run").options[0].startswith("resnet18")
    app.session_state["stash_db_path"] = str(second)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert "No run matches these filters." not in _infos(app)
    assert app.selectbox(key="bd-run").options[0].startswith("mlp")
    assert app.multiselect(key="bd-models").value == []


def test_a_value_the_database_still_has_stays_chosen(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    store.ingest_result(db, result_doc("resnet18"))
    store.ingest_result(db, result_doc("vgg11"))
    app = _page(db)
    app.multiselect(key="bd-models").set_value(["vgg11"]).run()
    app.run()
    assert not app.exception and app.multiselect(key="bd-models").value == ["vgg11"]
    assert [option.split(" · ")[0] for option in app.selectbox(key="bd-run").options] == ["vgg11"]


def test_a_run_named_in_the_address_again_is_shown(tmp_path: Path) -> None:
    """The browser's Back puts the run shown before in the address: the Run picker kept the one picked since,
    and wrote it back over the address."""
    db = tmp_path / "results.duckdb"
    first, second = result_doc("resnet18"), result_doc("vgg11")
    for doc in (first, second):
        store.ingest_result(db, doc)
    app = _page(db)
    app.selectbox(key="bd-run").set_value(first["run_id"]).run()
    assert app.query_params["run"] == first["run_id"]
    assert not app.warning, [w.value for w in app.warning]
    app.selectbox(key="bd-run").set_value(second["run_id"]).run()
    assert app.query_params["run"] == second["run_id"]
    app.query_params["run"] = first["run_id"]  # Back
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.selectbox(key="bd-run").value == first["run_id"]
    assert app.query_params["run"] == first["run_id"]
    assert not app.warning, [w.value for w in app.warning]


def test_a_range_of_another_databases_days_opens_to_this_ones(tmp_path: Path) -> None:
    """Days narrowed on one database, another picked: "No run matches these filters.", then its first day's
    runs only."""
    first, second = tmp_path / "first.duckdb", tmp_path / "second.duckdb"
    for db, days in ((first, (20, 22, 25)), (second, (26, 28))):
        for day in days:
            store.ingest_result(
                db, result_doc(started_at=datetime(2026, 10 if db == first else 11, day, 12, tzinfo=UTC))
            )
    app = _page(first)
    app.slider(key="bd-dates").set_value((date(2026, 10, 20), date(2026, 10, 22))).run()
    assert len(app.selectbox(key="bd-run").options) == 2
    app.session_state["stash_db_path"] = str(second)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert "No run matches these filters." not in _infos(app)
    assert len(app.selectbox(key="bd-run").options) == 2
    assert app.slider(key="bd-dates").value == (date(2026, 11, 26), date(2026, 11, 28))


def test_show_at_most_out_of_its_range_is_said_not_ignored(empty_db: Path) -> None:
    """500 typed into a bounded "Show at most" stayed "Press Enter to apply": the page went on with 15, and
    said nothing."""
    for day in (20, 21, 22):
        _store(empty_db, day)
    app = _page(empty_db)
    app.number_input(key="bd-limit").set_value(500).run()
    said = "matching run(s), newest first (Show at most takes a whole number, 1 to 200)"
    assert not app.exception and _counted(app) == f"3 of 3 {said}."
    app.number_input(key="bd-limit").set_value(0).run()
    assert _counted(app) == f"1 of 3 {said}."
    app.number_input(key="bd-limit").set_value(2).run()
    assert _counted(app) == "2 of 3 matching run(s), newest first."
    app.number_input(key="bd-limit").set_value(2.5).run()  # the browser's whole-number field read it as 2
    assert _counted(app) == f"2 of 3 {said}."
