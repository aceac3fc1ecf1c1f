"""The SQL page's schema browser: no row counts for a database that does not exist yet (the sidebar says it
does not), and "1 row", not "1 rows"."""

from __future__ import annotations

import re
from pathlib import Path

from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core import store


def sql_page() -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.run()
    app.switch_page("pages/sql.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def labels(app: AppTest) -> list[str]:
    return [expander.label for expander in app.expander]


def test_a_database_not_made_yet_lists_its_tables_without_rows(empty_db: Path) -> None:
    app = sql_page()
    assert any(label.startswith("instances (table") for label in labels(app))
    assert not any("row" in label for label in labels(app)), labels(app)
    assert any("does not exist yet" in caption.value for caption in app.caption)


def test_one_row_is_one_row(empty_db: Path) -> None:
    store.ingest_result(empty_db, result_doc())
    app = sql_page()
    assert any(label.startswith("runs (table · 1 row)") for label in labels(app)), labels(app)
    assert not any(re.search(r"(?<![\d,])1 rows", label) for label in labels(app))  # 71 rows is fine


def test_text_of_the_database_is_shown_as_text_not_markdown(empty_db: Path) -> None:
    import duckdb

    store.ingest_result(empty_db, result_doc())
    with duckdb.connect(str(empty_db)) as con:
        con.execute("COMMENT ON TABLE runs IS '**Pwned** [log in again](http://example.invalid/login)'")
    app = sql_page()
    about = [caption.value for expander in app.expander for caption in expander.caption]
    # escaped, and the address kept from being linked (a word joiner after its h)
    assert "\\*\\*Pwned\\*\\* \\[log in again\\](h\u2060ttp\\://example.invalid/login)" in about, about
    app.session_state["sql-error"] = "query failed: could not convert '**bold** [x](javascript:alert(1))'"
    app.run()
    assert [error.value for error in app.error] == [
        r"query failed\: could not convert '\*\*bold\*\* \[x\](javascript\:alert(1))'"
    ]


def test_a_result_is_of_the_database_the_sidebar_names(empty_db: Path, tmp_path: Path) -> None:
    """After the sidebar switched databases, the last query's rows (and downloads) were still the old one's
    under a caption naming the new one."""
    from pages._shared import DB_SETTING_KEY

    store.ingest_result(empty_db, result_doc())
    other = tmp_path / "other" / "results.duckdb"
    for index in range(3):
        store.ingest_result(other, result_doc(run_id=f"20261120T09000{index}Z-0000000{index}"))
    app = sql_page()
    app.text_area(key="sql-text").input("SELECT count(*) AS runs FROM runs")
    next(button for button in app.button if button.label == "Run query").click().run()
    assert int(next(f.value for f in app.dataframe if "runs" in f.value.columns)["runs"].iloc[0]) == 1
    app.text_input(key=DB_SETTING_KEY).input(str(other)).run()
    assert not app.exception
    counts = [frame.value for frame in app.dataframe if "runs" in frame.value.columns]
    assert counts and int(counts[-1]["runs"].iloc[0]) == 3, counts


def test_a_number_past_what_a_browser_holds_is_shown_as_its_digits(empty_db: Path) -> None:
    app = sql_page()
    app.text_area(key="sql-text").set_value(
        "SELECT 9007199254740993::BIGINT AS big, 5 AS small UNION ALL SELECT NULL, 6"
    )
    [form_button] = [button for button in app.button if button.label == "Run query"]
    form_button.click().run()
    assert not app.exception, [e.value for e in app.exception]
    [table] = app.dataframe
    big = table.value["big"]
    assert big.iloc[0] == "9007199254740993" and big.isna().iloc[1]  # not 9007199254740992, nor greyed
    assert table.value["small"].tolist() == [5, 6]
