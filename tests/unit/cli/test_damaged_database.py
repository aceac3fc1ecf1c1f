"""A damaged database is said with the way back by every command: found by the open (a truncated file) or by a
read of a damaged block (`runs`, `export`), not only where the read is `stash show`'s."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc
from support import damaged_copy

from stash_core import store
from stash_core.cli.main import main

WAY_BACK = "stash ingest --skip-bad results/*.json --db NEW.duckdb"


@pytest.fixture(scope="module")
def whole_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("whole") / "r.duckdb"
    for _ in range(6):
        store.ingest_result(db, result_doc(samples=True, iterations=400))
    return db


def test_a_database_the_open_finds_damaged_is_said_with_the_way_back(whole_db, tmp_path, capsys) -> None:
    truncated = tmp_path / "truncated.duckdb"
    whole = whole_db.read_bytes()
    truncated.write_bytes(whole[: len(whole) // 2])
    assert main(["runs", "--db", str(truncated)]) == 2
    err = capsys.readouterr().err
    # not "the database could not be written" (exit 1): a file cut short is damaged, and said so
    assert "corrupt" in err and WAY_BACK in err and err.count("\n") == 1, err


def test_an_export_that_reads_a_damaged_block_says_the_way_back(whole_db, tmp_path, capsys) -> None:
    db = damaged_copy(whole_db, tmp_path)
    assert db is not None, "no block of the runs table found to damage"
    assert main(["export", "--db", str(db), "--format", "json", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Corrupt database file" in err and WAY_BACK in err and err.count("\n") == 1, err
