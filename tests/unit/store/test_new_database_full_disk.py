"""A database that a full disk keeps from being made whole is not left behind: the file DuckDB created (a
partial header, or a header and no schema) and its WAL are removed, so that the next command, once there is
room, makes a new database instead of calling the remains corrupt. Never a database that was there before."""

from __future__ import annotations

import duckdb
import pytest
from support import fill, mounted_tmpfs

from stash_core.errors import UsageError
from stash_core.store.connection import connect

# Free bytes that stop DuckDB at each point of making a database on a 1 MiB tmpfs: its header (8 KiB
# written of the file's first blocks), then the schema's commit to the WAL.
KEEP_BYTES = {"header": 4 * 1024, "schema": 48 * 1024}


@pytest.fixture
def small_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "1m") as target:
        yield target


@pytest.mark.parametrize("stops_at", list(KEEP_BYTES))
def test_a_new_database_a_full_disk_refused_leaves_no_file(small_disk, stops_at):
    fill(small_disk, keep_bytes=KEEP_BYTES[stops_at])
    db = small_disk / "new.duckdb"
    with pytest.raises(UsageError, match="No space left on device"):
        with connect(db):
            pass
    assert sorted(path.name for path in small_disk.iterdir()) == ["filler"]
    (small_disk / "filler").unlink()
    with connect(db) as con:  # room again: a new database, not "corrupt"
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]


def test_a_database_that_was_there_is_kept_when_a_full_disk_refuses_a_write(small_disk):
    db = small_disk / "kept.duckdb"
    with connect(db):
        pass
    fill(small_disk)
    with pytest.raises(duckdb.Error, match="No space left on device"):
        with connect(db) as con:
            con.execute("CREATE TABLE big AS SELECT range AS x FROM range(200000)")
    assert db.exists()
    (small_disk / "filler").unlink()
    with connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
