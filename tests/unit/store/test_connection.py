"""A database nothing has written reads as a new one would, from a stand-in: a file that does not exist and
a DuckDB file without any table (a first writer that stopped before the schema) alike."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.store.connection import connect, is_stand_in


@pytest.fixture()
def empty_file(tmp_path: Path) -> Path:
    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()  # a DuckDB file with no table at all
    return path


def test_a_reader_of_a_database_nothing_wrote_gets_the_stand_in(empty_file, tmp_path) -> None:
    for path in (empty_file, tmp_path / "missing.duckdb"):
        with connect(path, read_only=True) as con:
            assert is_stand_in(con)
            assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
    written = tmp_path / "written.duckdb"
    store.ingest_result(written, result_doc())
    with connect(written, read_only=True) as con:
        assert not is_stand_in(con)
    with connect(empty_file) as con:  # a writer makes the schema in the file itself
        assert not is_stand_in(con)
