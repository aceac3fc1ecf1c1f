"""SQL console: the schema browser, column documentation, example queries and running a query."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.store.console import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryResult, run_readonly_query
from stash_core.store.examples import EXAMPLE_QUERIES

# ---------------------------------------------------------------------------------------------------------
# SQL console: schema browser and examples (the example queries are store/examples.py's)

__all__ = ["EXAMPLE_QUERIES", "columns_markdown", "digits_as_text", "run_query", "schema_browser"]


def schema_browser(db_path: Path | str) -> dict[str, dict[str, Any]]:
    """Per table and view of the store: kind, row count (tables), what it holds ("about") and its columns
    with type and meaning, all read from the database itself (its COMMENT ON metadata)."""
    return store.describe_schema(db_path)


_MARKDOWN_SPECIAL = re.compile(r"[\\`*_\[\]<>#|~$]")


def columns_markdown(columns: list[dict[str, Any]]) -> str:
    """A table's columns (schema_browser's "columns") as a Markdown list, one line each: name, type and
    meaning when it has one. A list wraps in the narrow schema panel, where a table's third column would be
    cut off at the edge."""
    lines = []
    for column in columns:
        meaning = _MARKDOWN_SPECIAL.sub(r"\\\g<0>", str(column.get("meaning") or ""))  # as text, no emphasis
        lines.append(
            f"- `{column['column']}` {column.get('type') or ''}".rstrip()
            + (f" — {meaning}" if meaning else "")
        )
    return "\n".join(lines)


def run_query(
    db_path: Path | str, sql: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS
) -> QueryResult:
    """Run one read-only console statement in a process of its own (stash_core/store/console.py): refused
    statements, SQL errors, queries past the time or memory limit and results larger than a page shows
    (PAGE_RESULT_BYTES) end in UsageError; nothing in this process (its other connections, their settings,
    its memory) is touched."""
    return run_readonly_query(
        db_path, sql, timeout_s=timeout_s, max_rows=max_rows, max_result_bytes=PAGE_RESULT_BYTES
    )


# What a browser table is sent at most: one cell of 100 MB crashed the page's tab, and 20 MB took 7 s.
PAGE_RESULT_BYTES = 8 * 2**20


# A browser's numbers hold every whole number up to 2^53, and about 15 significant digits: beyond, a table
# cell showed the digits greyed and marked as a value it could not show (a BIGINT, UBIGINT, HUGEINT, DECIMAL).
BROWSER_EXACT_INT = 2**53
BROWSER_EXACT_DIGITS = 15


def digits_as_text(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The frame as the page shows it, and the columns changed: a column holding a number a browser cannot
    hold exactly is given as its digits (NULL stays missing); the query's result itself is not changed."""
    shown, changed = frame, []
    for position, name in enumerate(frame.columns):
        column = frame.iloc[:, position]
        if column.dtype.kind in "iu":  # a numpy integer column: at once
            beyond = bool(((column > BROWSER_EXACT_INT) | (column < -BROWSER_EXACT_INT)).any())
        else:  # Python ints and Decimals (HUGEINT, DECIMAL) are objects
            beyond = column.dtype == object and any(_beyond_browser(value) for value in column.dropna())
        if not beyond:
            continue
        if shown is frame:
            shown = frame.copy()
        digits = [None if pd.isna(value) else str(value) for value in column]
        shown.isetitem(position, pd.Series(digits, index=column.index, dtype=object))
        changed.append(str(name))
    return shown, changed


def _beyond_browser(value: Any) -> bool:
    if isinstance(value, Decimal):
        return value.is_finite() and len(value.as_tuple().digits) > BROWSER_EXACT_DIGITS
    if isinstance(value, bool) or not hasattr(value, "__index__"):  # whole numbers only (numpy's too)
        return False
    return abs(int(value)) > BROWSER_EXACT_INT
