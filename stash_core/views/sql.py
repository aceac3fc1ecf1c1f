"""SQL console: the schema browser, column documentation, example queries and running a query."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stash_core import store
from stash_core.store.console import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryResult, run_readonly_query
from stash_core.store.examples import EXAMPLE_QUERIES

# ---------------------------------------------------------------------------------------------------------
# SQL console: schema browser and examples (the example queries are store/examples.py's)

__all__ = ["EXAMPLE_QUERIES", "columns_markdown", "run_query", "schema_browser"]


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
