"""A database this process already holds open through a connection of its own (docs/database.md's
`duckdb.connect(db, read_only=True)` in a notebook): Stash's readers share it, and a writer that cannot says
why instead of blaming another process."""

from __future__ import annotations

import duckdb
import pytest

from stash_core import store
from stash_core.store import connection


def test_a_reader_shares_a_read_only_connection_of_the_users(db_path, result_doc):
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    mine = duckdb.connect(str(db_path), read_only=True)
    try:
        runs = store.list_runs(db_path)
        assert list(runs["run_id"]) == ["run-a"]
        assert mine.execute("SELECT count(*) FROM runs").fetchall() == [(1,)]  # still usable after Stash's
    finally:
        mine.close()


def test_a_writer_beside_a_read_only_connection_of_the_users_names_it(db_path, result_doc):
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    mine = duckdb.connect(str(db_path), read_only=True)
    try:
        with pytest.raises(connection.DatabaseLocked) as refused:
            with connection.connect(db_path, lock_timeout_s=0.2):
                pass
    finally:
        mine.close()
    message = str(refused.value)
    assert "open in this process" in message and "close that connection first" in message
    assert "another process" not in message and "\n" not in message
    store.ingest_result(db_path, result_doc(run_id="run-b"))  # once it is closed, writing works
    assert set(store.list_runs(db_path)["run_id"]) == {"run-a", "run-b"}
