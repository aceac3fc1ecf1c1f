"""Text from the database and the URL is shown as data on the Stall breakdown page: escaped for Markdown
(views.common.plain), never a link, emphasis or colour directive, never a terminal escape."""

from __future__ import annotations

from pathlib import Path

from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store
from stash_core.views.common import plain

LINK = "**bold** [click](javascript:alert(1)) :red[x] $x^2$"


def breakdown_page(query_run: str) -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.query_params["run"] = query_run
    app.run()
    app.switch_page("pages/breakdown.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_a_stored_runs_texts_and_a_links_run_id_are_shown_as_data(empty_db: Path) -> None:
    # an instance label holds no ':' (profile and ingest refuse one): NAME's Markdown, without the colons
    doc = result_doc(run_id="20261130T010000Z-aaaa0001", status="failed", instance=f"box {NAME}")
    doc["error"] = f"\x1b[31mboom {LINK}"
    store.ingest_result(empty_db, doc)
    app = breakdown_page(doc["run_id"])
    caption = " ".join(element.value for element in app.caption)
    assert plain(f"box {NAME}") in caption and "[click](" not in caption
    errors = [element.value for element in app.error]
    assert any(plain(doc["error"]) in error for error in errors), errors
    assert not any("\x1b" in error or "[click](" in error for error in errors)
    missing = breakdown_page(f"nothing {LINK}")
    warnings = [element.value for element in missing.warning]
    assert any(plain(f"nothing {LINK}") in warning for warning in warnings), warnings


NAME = "q**bold** [click](evil.example) _it_"


def test_names_on_the_overview_and_compare_pages_are_data(empty_db: Path) -> None:
    """A model name holding Markdown reads as itself on the Overview's newest run and in the Compare page's
    notes (it was a link and emphasis there)."""
    store.ingest_result(empty_db, result_doc(NAME, run_id="20261130T010000Z-aaaa0002", instance=f"box{NAME}"))
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    newest = [element.value for element in app.markdown if "Newest:" in element.value]
    assert newest and plain(NAME) in newest[0] and "[click](" not in newest[0], newest
    app.switch_page("pages/compare.py").run()
    assert not app.exception, [e.value for e in app.exception]
    shown = [e.value for kind in (app.markdown, app.caption, app.warning) for e in kind]
    assert not any("[click](" in text for text in shown), [t for t in shown if "click" in t]
    assert any(plain(NAME) in text for text in shown), [t for t in shown if "bold" in t]


def test_a_failed_jobs_error_and_label_on_the_run_page_are_data(empty_db: Path) -> None:
    import json

    from stash_core.engine import jobs

    folder = jobs.jobs_dir(empty_db) / "20261130T120000Z-abc123"
    folder.mkdir(parents=True)
    meta = {"argv": [], "label": f"lbl {NAME}", "db_path": str(empty_db), "origin": "dashboard",
            "kind": "profile"}  # fmt: skip
    (folder / "argv.json").write_text(json.dumps(meta))
    (folder / "stderr.log").write_text(f"stash: unknown model '{NAME}'; give a zoo model name\n")
    (folder / "rc").write_text("2\n")
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.query_params["job"] = "20261130T120000Z-abc123"
    app.run()
    app.switch_page("pages/run.py").run()
    assert not app.exception, [e.value for e in app.exception]
    shown = [e.value for kind in (app.markdown, app.error, app.caption) for e in kind]
    assert any(plain(NAME) in text for text in shown), shown
    assert not any("[click](" in text for text in shown), [t for t in shown if "click" in t]


def test_a_run_opened_by_link_stays_through_the_pages_other_controls(empty_db: Path) -> None:
    """A failed run (outside the default filter of completed runs) opened by link was replaced by the newest
    run at the first click on any other control of the page."""
    store.ingest_result(empty_db, result_doc(run_id="20261130T020000Z-aaaa0003", status="failed"))
    store.ingest_result(empty_db, result_doc(run_id="20261130T030000Z-aaaa0004"))
    app = breakdown_page("20261130T020000Z-aaaa0003")
    shown = lambda: " ".join(element.value for element in app.caption)  # noqa: E731
    assert "aaaa0003" in shown()
    sections = app.get("segmented_control")
    detail = next(control for control in sections if control.key == "bd-section")
    detail.set_value(detail.options[-1]).run()
    assert not app.exception, [e.value for e in app.exception]
    assert "aaaa0003" in shown() and app.query_params["run"] == "20261130T020000Z-aaaa0003"
    app.selectbox(key="bd-run").set_value("20261130T030000Z-aaaa0004").run()  # another run picked: it
    assert "aaaa0004" in shown()
