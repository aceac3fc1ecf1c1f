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


def _attached_elsewhere(db_path) -> duckdb.Error:
    return duckdb.Error(
        f'Resource In Use Error: Unique file handle conflict: Cannot attach "stash" - the database file '
        f'"{db_path}" is already attached by database "stash"'
    )


def test_another_thread_opening_the_same_file_this_instant_is_waited_for(db_path, result_doc, monkeypatch):
    # Two threads of one process open one file at once: DuckDB refuses the second while the first attaches.
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    real_connect, refusals = duckdb.connect, []

    def busy_once(*args, **kwargs):
        if not refusals:
            refusals.append(args)
            raise _attached_elsewhere(db_path)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(connection.duckdb, "connect", busy_once)
    assert list(store.list_runs(db_path)["run_id"]) == ["run-a"] and len(refusals) == 1

    def busy(*args, **kwargs):
        raise _attached_elsewhere(db_path)

    monkeypatch.setattr(connection.duckdb, "connect", busy)
    with pytest.raises(connection.DatabaseLocked, match="in use by another thread of this process"):
        with connection.connect(db_path, read_only=True, lock_timeout_s=0.2):
            pass


def test_a_writer_beside_the_callers_own_connection_is_refused_at_once(db_path, result_doc):
    """Waiting cannot close a connection of the caller's: the write said so only after the full 10 s."""
    import time

    store.ingest_result(db_path, result_doc(run_id="run-a"))
    mine = duckdb.connect(str(db_path), read_only=True)
    try:
        started = time.monotonic()
        with pytest.raises(connection.DatabaseLocked, match="close that connection first"):
            store.ingest_result(db_path, result_doc(run_id="run-b"))
        assert time.monotonic() - started < 2.0
    finally:
        mine.close()


def test_a_writer_waits_while_another_thread_of_stash_reads(db_path, result_doc):
    """A read of Stash's own in another thread is waited for, as before: it closes soon."""
    import threading

    store.ingest_result(db_path, result_doc(run_id="run-a"))
    opened, release = threading.Event(), threading.Event()

    def read() -> None:
        with connection.connect(db_path, read_only=True):
            opened.set()
            release.wait(5)

    reader = threading.Thread(target=read)
    reader.start()
    opened.wait(5)
    threading.Timer(0.5, release.set).start()
    try:
        store.ingest_result(db_path, result_doc(run_id="run-b"))  # waited about 0.5 s, then wrote
    finally:
        release.set()
        reader.join(5)
    assert set(store.list_runs(db_path)["run_id"]) == {"run-a", "run-b"}


def test_a_read_while_another_thread_of_stash_is_still_opening_waits(db_path, result_doc, monkeypatch):
    """A Stash connection was counted once opened: a read meanwhile (while the writer made the schema) was
    refused at once as 'a duckdb connection of your own'."""
    import threading
    import time

    real_ensure = connection.ensure_schema
    opening = threading.Event()

    def slow_ensure(con, path):
        opening.set()
        time.sleep(1.0)
        return real_ensure(con, path)

    monkeypatch.setattr(connection, "ensure_schema", slow_ensure)
    writer = threading.Thread(target=store.ingest_result, args=(db_path, result_doc(run_id="run-a")))
    writer.start()
    try:
        assert opening.wait(20)
        assert list(store.list_runs(db_path)["run_id"]) in ([], ["run-a"])  # waited, then read
    finally:
        writer.join(30)
    assert list(store.list_runs(db_path)["run_id"]) == ["run-a"]


def test_a_writer_refused_by_a_stash_read_that_closes_meanwhile_tries_again(db_path, result_doc, monkeypatch):
    """DuckDB refused the writer while a read of Stash's in another thread held the file; the read closed
    before the refusal was judged, and it was taken for the caller's own connection (refused at once)."""
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    reading = connection.connect(db_path, read_only=True)
    reading.__enter__()
    real_connect, refusals = duckdb.connect, []

    def refused_then_the_read_closes(*args, **kwargs):
        try:
            return real_connect(*args, **kwargs)
        except duckdb.Error:
            if not refusals:
                refusals.append(args)
                reading.__exit__(None, None, None)
            raise

    monkeypatch.setattr(connection.duckdb, "connect", refused_then_the_read_closes)
    assert store.ingest_result(db_path, result_doc(run_id="run-b")) is True
    assert len(refusals) == 1
    monkeypatch.undo()
    assert set(store.list_runs(db_path)["run_id"]) == {"run-a", "run-b"}
