"""The chosen database is kept in the page's address (?db=): a reload, a new tab or a copied link opens the
same one, where it used to fall back to the default."""

from __future__ import annotations

from pathlib import Path

from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store

DB_FIELD = "stash_db_setting"


def test_a_chosen_database_is_put_in_the_address_and_the_default_is_not(
    empty_db: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.duckdb"
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90).run()
    assert "db" not in app.query_params  # the default: a plain address
    app.text_input(key=DB_FIELD).set_value(str(other)).run()
    assert app.query_params["db"] == str(other)
    app.text_input(key=DB_FIELD).set_value(str(empty_db)).run()  # STASH_DB's, the default again
    assert "db" not in app.query_params
    assert not app.exception, [e.value for e in app.exception]


def test_an_address_with_a_database_opens_it(empty_db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    doc = result_doc(stalls={"compute": 0.3})
    store.ingest_result(other, doc)
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.query_params["db"] = str(other)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.text_input(key=DB_FIELD).value == str(other)
    assert any("other.duckdb" in caption.value for caption in app.sidebar.caption)
