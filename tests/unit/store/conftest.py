"""Fixtures of the store tests: realistic documents (per-rank samples and telemetry in every phase, see
result_docs.result_doc), a database path, and the row count of every table."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import result_docs

_store_doc = functools.partial(result_docs.result_doc, instance="my-laptop", samples=True, telemetry=True)


@pytest.fixture
def result_doc() -> Callable[..., dict[str, Any]]:
    """Factory: result_doc(run_id=..., status=..., ...) -> a fresh document (see result_docs.result_doc)."""
    return _store_doc


@pytest.fixture(scope="session")
def result_doc_builder() -> Callable[..., dict[str, Any]]:
    """The same factory for module- or session-scoped fixtures."""
    return _store_doc


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "db" / "results.duckdb"


@pytest.fixture
def row_counts() -> Callable[[Any], dict[str, int]]:
    """row_counts(db_path) -> {table: rows} for every table of the store (read-only, through the store)."""
    from stash_core.store import TABLES, query_readonly

    def count(path: Any) -> dict[str, int]:
        # One query, one connection: opening DuckDB costs a noticeable fraction of a second.
        sql = "SELECT " + ", ".join(f"(SELECT count(*) FROM {table}) AS {table}" for table in TABLES)
        row = query_readonly(path, sql).iloc[0]
        return {table: int(row[table]) for table in TABLES}

    return count
