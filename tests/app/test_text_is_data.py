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
    doc = result_doc(run_id="20261130T010000Z-aaaa0001", status="failed", instance=f"box {LINK}")
    doc["error"] = f"\x1b[31mboom {LINK}"
    store.ingest_result(empty_db, doc)
    app = breakdown_page(doc["run_id"])
    caption = " ".join(element.value for element in app.caption)
    assert plain(f"box {LINK}") in caption and "[click](" not in caption
    errors = [element.value for element in app.error]
    assert any(plain(doc["error"]) in error for error in errors), errors
    assert not any("\x1b" in error or "[click](" in error for error in errors)
    missing = breakdown_page(f"nothing {LINK}")
    warnings = [element.value for element in missing.warning]
    assert any(plain(f"nothing {LINK}") in warning for warning in warnings), warnings
