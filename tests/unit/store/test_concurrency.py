"""Several processes on one database file: readers and a writer take turns; a held lock is waited for.

Child processes are started with "spawn" (a clean interpreter, no forked DuckDB or thread state), so their
entry points live at module level.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store import connection, writer_turn

SPAWN = multiprocessing.get_context("spawn")


def _reader_loop(db_path: Path, stop: Any, results: Any) -> None:
    try:
        seen_counts = []
        while not stop.is_set():
            seen_counts.append(len(store.list_runs(db_path)))
            time.sleep(0.01)  # a dashboard refreshing, not a busy loop
        results.put(("reader", "ok", seen_counts))
    except BaseException as exc:  # report anything, including a lock timeout, to the test
        results.put(("reader", "error", repr(exc)))


def _writer(db_path: Path, docs: list[dict[str, Any]], results: Any) -> None:
    try:
        results.put(("writer", "ok", [store.ingest_result(db_path, doc) for doc in docs]))
    except BaseException as exc:
        results.put(("writer", "error", repr(exc)))


def _hold_write_lock(db_path: Path, held: Any, release: Any, hold_s: float, released_at: Any) -> None:
    with store.connect(db_path) as con:
        con.execute("SELECT 1").fetchall()
        held.set()
        release.wait(hold_s)
        released_at.value = time.time()  # just before the lock goes; a waiter can only succeed after this


@contextlib.contextmanager
def _write_lock_held(db_path: Path, hold_s: float):
    """A child process holding the database's write lock (for at most hold_s) while the block runs: yields the
    process and the time it let go (0 until then); released and joined on leaving."""
    held, release = SPAWN.Event(), SPAWN.Event()
    released_at = SPAWN.Value("d", 0.0)
    holder = SPAWN.Process(target=_hold_write_lock, args=(db_path, held, release, hold_s, released_at))
    holder.start()
    try:
        assert held.wait(timeout=120), "the child never took the lock"
        yield holder, released_at
    finally:
        release.set()
        holder.join(timeout=30)


@pytest.mark.slow
def test_reader_and_writer_processes_take_turns(tmp_path, result_doc) -> None:
    db_path = tmp_path / "shared.duckdb"
    docs = [result_doc(run_id=f"run-{i:02d}", iterations=5, seed=i) for i in range(20)]
    results = SPAWN.Queue()
    stop = SPAWN.Event()
    reader = SPAWN.Process(target=_reader_loop, args=(db_path, stop, results))
    writer = SPAWN.Process(target=_writer, args=(db_path, docs, results))
    reader.start()
    writer.start()
    try:
        outcomes = {}
        first = results.get(timeout=240)
        outcomes[first[0]] = first
        stop.set()  # the writer is done (or the reader failed): let the reader finish
        second = results.get(timeout=60)
        outcomes[second[0]] = second
    finally:
        stop.set()
        writer.join(timeout=30)
        reader.join(timeout=30)
    assert outcomes["writer"][1] == "ok", outcomes["writer"][2]
    assert outcomes["reader"][1] == "ok", outcomes["reader"][2]
    assert outcomes["writer"][2] == [True] * 20
    seen_counts = outcomes["reader"][2]
    assert seen_counts, "the reader never got a turn"
    assert seen_counts == sorted(seen_counts) and seen_counts[-1] <= 20  # runs only ever appear, whole
    assert store.database_summary(db_path)["runs"] == 20
    assert writer.exitcode == 0 and reader.exitcode == 0


def test_ingest_waits_for_a_held_write_lock(tmp_path, result_doc) -> None:
    db_path = tmp_path / "held.duckdb"
    with _write_lock_held(db_path, 1.0) as (_, released_at):
        assert store.ingest_result(db_path, result_doc(iterations=5)) is True
        finished_at = time.time()
    assert released_at.value > 0 and finished_at > released_at.value
    assert store.database_summary(db_path)["runs"] == 1


def test_a_lock_held_too_long_is_a_clear_usage_error(tmp_path, result_doc, monkeypatch) -> None:
    db_path = tmp_path / "stuck.duckdb"
    monkeypatch.setattr(connection, "LOCK_TIMEOUT_S", 0.3)
    with _write_lock_held(db_path, 120.0) as (holder, _):
        with pytest.raises(UsageError, match=f"locked by another process \\(PID {holder.pid}\\)"):
            store.ingest_result(db_path, result_doc(iterations=5))
        with pytest.raises(UsageError, match="gave up after 0.3 s"):
            store.list_runs(db_path)
    assert store.ingest_result(db_path, result_doc(iterations=5)) is True  # free again: works


def test_threads_of_one_process_take_turns(tmp_path, result_doc) -> None:
    # DuckDB refuses a writer while the same process has the file open read-only (a Streamlit server runs
    # sessions in threads): that conflict is retried like a lock held by another process.
    db_path = tmp_path / "threads.duckdb"
    store.ingest_result(db_path, result_doc(run_id="first", iterations=5))
    opened = threading.Event()
    events: queue.Queue[str] = queue.Queue()

    def read_slowly() -> None:
        with store.connect(db_path, read_only=True) as con:
            opened.set()
            time.sleep(0.5)
            con.execute("SELECT count(*) FROM runs").fetchall()
            events.put("reader closes")

    thread = threading.Thread(target=read_slowly)
    thread.start()
    assert opened.wait(timeout=30)
    inserted = store.ingest_result(db_path, result_doc(run_id="second", iterations=5))
    events.put("writer done")
    thread.join(timeout=30)
    assert inserted is True
    assert [events.get_nowait(), events.get_nowait()] == ["reader closes", "writer done"]


def test_readers_step_aside_while_a_writer_is_announced(tmp_path, result_doc, monkeypatch) -> None:
    db_path = tmp_path / "fair.duckdb"
    store.ingest_result(db_path, result_doc(run_id="only", iterations=5))
    monkeypatch.setattr(writer_turn, "READER_YIELD_S", 30.0)
    announcement = writer_turn.announce_waiting_writer(db_path)
    assert announcement is not None
    events: queue.Queue[str] = queue.Queue()

    def withdraw_later() -> None:
        time.sleep(1.0)  # longer than an unhindered read takes, so an early read shows up as wrong order
        events.put("writer withdrew")
        os.close(announcement)

    thread = threading.Thread(target=withdraw_later)
    thread.start()
    runs = store.list_runs(db_path)  # must wait for the announced writer, then read normally
    events.put("reader read")
    thread.join(timeout=30)
    assert list(runs["run_id"]) == ["only"]
    assert [events.get_nowait(), events.get_nowait()] == ["writer withdrew", "reader read"]


@pytest.mark.parametrize("damage", ["garbage", "damaged blocks"])
def test_a_corrupt_database_is_reported_as_corrupt_at_once_not_as_locked(
    tmp_path, result_doc, damage
) -> None:
    db = tmp_path / "broken.duckdb"
    if damage == "garbage":
        db.write_bytes(os.urandom(64 * 1024))
    else:  # a real DuckDB header, then blocks whose checksums fail: DuckDB's message names the "block"
        store.ingest_result(db, result_doc())
        data = bytearray(db.read_bytes())
        data[3 * 4096 :] = bytes((value * 7 + 13) & 255 for value in data[3 * 4096 :])
        db.write_bytes(bytes(data))
    started = time.monotonic()
    for open_it in (lambda: store.list_runs(db), lambda: store.ingest_result(db, result_doc(run_id="other"))):
        with pytest.raises(UsageError, match="corrupt") as caught:
            open_it()
        assert "locked" not in str(caught.value)
    assert time.monotonic() - started < connection.LOCK_TIMEOUT_S / 2  # no waiting for a lock


def test_a_directory_is_not_a_database(tmp_path) -> None:
    with pytest.raises(UsageError, match="is a directory"):
        store.list_runs(tmp_path)
    with pytest.raises(UsageError, match="is a directory"):
        connection.check_database_path(tmp_path)
    (tmp_path / "empty.duckdb").write_bytes(b"")
    with pytest.raises(UsageError, match="empty"):
        connection.check_database_path(tmp_path / "empty.duckdb")
    connection.check_database_path(tmp_path / "new" / "r.duckdb")  # creatable


def test_a_pipe_given_as_the_database_is_refused_without_being_read(tmp_path) -> None:
    """`stash profile --db FIFO` and `stash probe --db FIFO` waited for good on its first 16 bytes."""
    os.mkfifo(tmp_path / "fifo")
    outcome: list[str] = []

    def check() -> None:
        try:
            connection.check_database_path(tmp_path / "fifo")
        except UsageError as error:
            outcome.append(str(error))

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert outcome == [f"database {tmp_path / 'fifo'} is a FIFO (named pipe), not a DuckDB file"]


def test_a_pipe_named_as_the_writer_s_side_file_blocks_no_reader_or_writer(tmp_path, result_doc) -> None:
    """A FIFO named <db>.writer-waiting made `stash runs` hang without a word."""
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc())
    os.mkfifo(tmp_path / "r.duckdb.writer-waiting")
    done = []
    reader = threading.Thread(target=lambda: done.append(len(store.list_runs(db))), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert done == [1]
    assert writer_turn.announce_waiting_writer(db) is None  # not taken as the side file


def test_a_database_locked_past_the_wait_and_a_failed_write_exit_1(tmp_path, result_doc) -> None:
    """A locked database exited 2 ('bad usage or bad input') in ingest and 1 in profile; a write the file
    system refused (read-only) exited 2 in ingest and 1 in instances add."""
    import duckdb

    from stash_core.errors import StashError
    from stash_core.exits import run_command
    from stash_core.store import ingest as ingest_module

    def locked() -> int:
        raise connection.DatabaseLocked("database r.duckdb is locked by another process - gave up after 10 s")

    assert run_command(locked) == 1

    def refused() -> None:
        raise duckdb.IOException("Failed to commit: Read-only file system")

    with store.connect(tmp_path / "r.duckdb") as con, pytest.raises(StashError) as failed:
        ingest_module._insert_once(con, "runs", "run_id", "x", refused)
    assert not isinstance(failed.value, UsageError) and "Read-only file system" in str(failed.value)


def test_a_writer_working_in_turns_gives_way_while_a_reader_is_announced(tmp_path) -> None:
    """An ingest of a folder reopened the database a few milliseconds after each turn: readers backing off
    never hit the gap and gave up after 10 s (`stash runs` beside a 600-file ingest waited 8-10 s)."""
    db_path = tmp_path / "turns.duckdb"
    started = time.monotonic()
    writer_turn.give_way(db_path)  # nobody waits: no pause
    assert time.monotonic() - started < 0.5
    announcement = writer_turn.announce_waiting_reader(db_path)
    assert announcement is not None
    threading.Timer(0.6, os.close, [announcement]).start()  # the reader got in and withdrew
    started = time.monotonic()
    writer_turn.give_way(db_path)
    assert 0.5 <= time.monotonic() - started < writer_turn.WRITER_GIVES_WAY_S


@pytest.mark.slow
def test_a_reader_that_finds_the_database_busy_announces_itself(tmp_path, result_doc) -> None:
    db_path = tmp_path / "busy.duckdb"
    store.ingest_result(db_path, result_doc(run_id="only", iterations=5))
    with _write_lock_held(db_path, 30.0):
        reader = threading.Thread(target=store.list_runs, args=(db_path,))
        reader.start()
        deadline = time.monotonic() + 5
        while not writer_turn._someone_waits(db_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert writer_turn._someone_waits(db_path)  # the writer sees it, and gives way
    reader.join(timeout=30)
    assert not writer_turn._someone_waits(db_path)  # withdrawn once it got in


def _in_threads(count: int, work) -> list:
    """work() in `count` threads at once: what each returned, or the error it raised."""
    results: list = [None] * count

    def run(index: int) -> None:
        try:
            results[index] = work()
        except Exception as error:  # noqa: BLE001 - the test reads it
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def test_threads_storing_one_new_run_store_it_once_and_the_others_find_it_stored(db_path, result_doc,
                                                                                 monkeypatch, row_counts):
    """Dashboard sessions are threads of one process: they share DuckDB's instance, where two inserts of one
    run conflicted at commit ("Conflict on update!", said as a failure)."""
    from stash_core.store import ingest

    real = ingest._insert_run
    monkeypatch.setattr(ingest, "_insert_run", lambda con, row: time.sleep(0.3) or real(con, row))
    doc = result_doc(run_id="together", iterations=5)
    results = _in_threads(3, lambda: store.ingest_result(db_path, doc))
    assert sorted(map(repr, results)) == ["False", "False", "True"], results
    assert row_counts(db_path)["runs"] == 1


def test_threads_adding_a_stored_runs_missing_samples_add_them_once(db_path, result_doc, monkeypatch,
                                                                   row_counts):
    """A run stored without its samples (from an export of runs, phases and stalls) gets them from its result
    file: two sessions storing that file at once appended every sample twice."""
    from stash_core.store import ingest

    doc = result_doc(run_id="samples", iterations=5)
    store.ingest_result(db_path, doc)
    whole = row_counts(db_path)
    with store.connect(db_path) as con:
        for table in ("iterations", "telemetry", "probes"):
            con.execute(f"DELETE FROM {table} WHERE run_id = 'samples'")
    assert row_counts(db_path)["iterations"] == 0 < whole["iterations"]
    real = ingest.missing_sample_parts
    monkeypatch.setattr(ingest, "missing_sample_parts", lambda *a: (real(*a), time.sleep(0.3))[0])
    results = _in_threads(2, lambda: store.ingest_result(db_path, doc))
    assert sorted(map(repr, results)) == ["False", "True"], results
    assert row_counts(db_path) == whole
