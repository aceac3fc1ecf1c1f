"""SQL: a read-only query console over the results database, with a schema browser and example queries."""

from pathlib import Path

import streamlit as st

from pages._fields import CheckedNumbers
from pages._shared import current_db, download_buttons, load, page_guard, show_table
from stash_core import views
from stash_core.errors import UsageError
from stash_core.views.common import in_page_words, plain

EDITOR_KEY = "sql-text"
SCHEMA_PANEL_HEIGHT_PX = 560
MAX_ROWS_LIMIT = 100_000  # rows a result table shows at most
MAX_TIMEOUT_S = 300  # seconds a query may run


def schema_panel() -> None:
    st.markdown("##### Tables and views")
    browser = load(views.sql.schema_browser)
    exists = Path(current_db()).exists()
    if not exists:  # what is listed is the layout a first profile or ingest creates, not rows stored
        st.caption("The database does not exist yet: these are the tables and views it will have.")
    for name, info in browser.items():
        count = info.get("rows") if exists else None
        rows = f" · {count:,} row{'s' if count != 1 else ''}" if count is not None else ""
        with st.expander(
            f"{plain(name)} ({info['kind']}{rows})",
            icon=":material/table:" if info["kind"] == "table" else ":material/view_list:",
        ):
            if info.get("about"):
                st.caption(plain(info["about"]))  # the database's comment: data, not Markdown
            st.markdown(views.sql.columns_markdown(info["columns"]))
    st.caption("Column meanings are the database's own comments; docs/schema.md is made of them.")


def use_example() -> None:
    title = st.session_state.get("sql-example")
    for name, sql in views.sql.EXAMPLE_QUERIES:
        if name == title:
            st.session_state[EDITOR_KEY] = sql


def console() -> None:
    if EDITOR_KEY not in st.session_state:
        st.session_state[EDITOR_KEY] = views.sql.EXAMPLE_QUERIES[0][1]
    st.selectbox(
        "Example queries",
        [name for name, _ in views.sql.EXAMPLE_QUERIES],
        index=None,
        placeholder="Pick an example to load it into the editor",
        key="sql-example",
        persist_state="session",
        on_change=use_example,
    )
    with st.form("sql-form", border=False):
        st.text_area(
            "Query",
            key=EDITOR_KEY,
            persist_state="session",
            height=180,
            help="One statement. Read-only: SELECT, WITH, "
            "DESCRIBE, SUMMARIZE, SHOW, EXPLAIN and informational PRAGMAs.",
        )
        cols = st.columns([1, 1, 2], vertical_alignment="bottom")
        numbers = CheckedNumbers()  # bounds checked on Run query, named, not kept out in the browser
        max_rows = numbers.number(cols[0], "Row limit", 1, MAX_ROWS_LIMIT, 1_000, step=500,
                                  key="sql-max-rows", persist_state="session")  # fmt: skip
        timeout_s = numbers.number(cols[1], "Time limit (s)", 1, MAX_TIMEOUT_S, 10, step=5,
                                   key="sql-timeout", persist_state="session")  # fmt: skip
        submitted = cols[2].form_submit_button("Run query", type="primary", icon=":material/play_arrow:")
    first_visit = "sql-result" not in st.session_state  # show what the example query returns right away
    # a result is of the database it ran on: another one chosen in the sidebar runs the query again there
    other_database = st.session_state.get("sql-db") != str(current_db())
    if submitted or first_visit or other_database:
        st.session_state["sql-db"] = str(current_db())
        try:
            if numbers.problems:  # said where the result goes: an earlier result is not this query's
                raise UsageError(numbers.problems[0])
            with st.spinner("Running the query…"):
                result = views.sql.run_query(
                    current_db(),
                    st.session_state[EDITOR_KEY],
                    timeout_s=float(timeout_s),
                    max_rows=int(max_rows),
                )
        except UsageError as exc:
            st.session_state["sql-result"] = None
            st.session_state["sql-error"] = str(exc)
        else:
            st.session_state["sql-result"] = result
            st.session_state["sql-error"] = None


def query_result() -> None:
    """The last query's rows, the page's whole width (in the console's column a wide result scrolls)."""
    error = st.session_state.get("sql-error")
    result = st.session_state.get("sql-result")
    if error:
        st.error(plain(in_page_words(error, None)), icon=":material/block:")  # it quotes database values
    elif result is not None:
        frame = result.frame
        more = " (row limit reached: there are more)" if result.truncated else ""
        st.caption(
            f"{len(frame):,} row{'s' if len(frame) != 1 else ''}{more} in {result.elapsed_s * 1000:.0f} ms"
        )
        shown, as_digits = views.sql.digits_as_text(frame)
        right = {name: st.column_config.TextColumn(alignment="right") for name in as_digits}
        show_table(shown, labels=False, fit=False, column_config=right)  # the query's own names and widths
        if not frame.empty:
            download_buttons(frame, "query_result", "sql-result")


def main() -> None:
    st.title("SQL")
    st.caption(
        f"Query `{current_db()}` directly. The console is read-only: statements that write, change "
        "settings or read files are refused, and the database is never changed. Each query runs in a "
        "process of its own, stopped at its time limit or when it needs too much memory."
    )
    left, right = st.columns([1, 2], gap="large")
    # The schema panel scrolls within its own height, so that an opened table does not push the result
    # (across the page, under both) out of sight.
    with left.container(height=SCHEMA_PANEL_HEIGHT_PX, border=False):
        schema_panel()
    with right:
        console()
    query_result()


with page_guard():
    main()
