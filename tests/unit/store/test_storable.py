"""Before a command measures, a database it could not store into is refused: here, one held open by a
connection of the caller's own (a notebook's), which waiting never closes: the run was measured in full
and then not stored."""

from __future__ import annotations

import duckdb
import pytest

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store.storable import check_storable


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_a_database_held_by_a_connection_of_the_callers_is_refused_until_it_closes(
    db_path, result_doc, read_only
) -> None:
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    mine = duckdb.connect(str(db_path), read_only=read_only)
    try:
        with pytest.raises(UsageError) as refused:
            check_storable(db_path)
        assert mine.execute("SELECT count(*) FROM runs").fetchall() == [(1,)]  # still the caller's to use
    finally:
        mine.close()
    said = str(refused.value)
    assert said.startswith(f"--db: database {db_path} is open in this process") and "close that" in said
    check_storable(db_path)  # closed: fine


def test_stashs_own_connection_and_a_new_database_are_fine(db_path, result_doc) -> None:
    check_storable(db_path)  # not there yet: a profile makes it
    assert not db_path.exists()
    store.ingest_result(db_path, result_doc(run_id="run-a"))
    with store.connect(db_path, read_only=True):  # Stash's own, e.g. another thread reading: not the caller's
        check_storable(db_path)


def test_the_callers_connection_is_probed_while_no_stash_connection_can_open(tmp_path, monkeypatch) -> None:
    # A connection of Stash's opening in another thread between the check and the probe was taken for the
    # caller's (and refused the run); the probe's own could refuse Stash's.
    from stash_core.store import open_here

    db = tmp_path / "r.duckdb"
    duckdb.connect(str(db)).close()
    opened = open_here.duckdb.connect
    held: list[bool] = []

    def probe(*args, **kwargs):
        held.append(open_here.OPEN_HERE_LOCK.locked())
        return opened(*args, **kwargs)

    monkeypatch.setattr(open_here.duckdb, "connect", probe)
    assert open_here.held_by_caller(db) is False
    assert held == [True]


def test_a_database_another_process_holds_now_is_said_before_the_measuring(db_path, result_doc) -> None:
    """Found only when the run was stored, after the whole profile: said at the start now, and not refused
    (storing waits for its turn, and the holder may let go before the run ends)."""
    import subprocess
    import sys

    store.ingest_result(db_path, result_doc(run_id="run-a"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', "
         "flush=True); time.sleep(60)", str(db_path)], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        note = check_storable(db_path)
    finally:
        holder.kill()
        holder.wait()
    assert note is not None and note.startswith(f"note: database {db_path} is locked by another process")
    assert f"(PID {holder.pid})" in note and "kept in its result file (`stash ingest` stores it" in note
    assert check_storable(db_path) is None  # let go
