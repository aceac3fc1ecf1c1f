"""The store's functions called from Python with arguments of the wrong kind (docs/schema.md shows them):
one UsageError each, nothing written; `~` expanded as the command line expands it."""

from __future__ import annotations

import json

import pytest

from stash_core import store
from stash_core.errors import UsageError


@pytest.mark.parametrize(
    ("db", "paths", "says"),
    [
        ("DB", "a.json", "paths: expected a list"),
        ("DB", None, "paths: expected a list"),
        ("DB", [None], "paths: a value is required"),
        (None, ["a.json"], "db_path: a value is required"),
        (5, ["a.json"], "db_path: expected a path"),
        ("DB", ["/tmp/a\x00b.json"], "control characters"),
    ],
)
def test_ingest_files_refuses_arguments_of_the_wrong_kind(tmp_path, db, paths, says):
    db = tmp_path / "r.duckdb" if db == "DB" else db
    with pytest.raises(UsageError) as refused:
        store.ingest_files(db, paths)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("db", "out", "says"),
    [(5, "OUT", "db_path: expected a path"), ("DB", None, "out_dir: a value is required"),
     ("DB", "/tmp/a\x00b", "control characters")],
)  # fmt: skip
def test_export_refuses_arguments_of_the_wrong_kind(tmp_path, db, out, says):
    db = tmp_path / "r.duckdb" if db == "DB" else db
    out = tmp_path / "out" if out == "OUT" else out
    with pytest.raises(UsageError) as refused:
        store.export(db, "csv", out)
    assert says in str(refused.value)
    assert not list(tmp_path.iterdir())


def test_a_home_folder_path_is_expanded_for_ingest_and_export(tmp_path, monkeypatch, result_doc):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (home / "run.json").write_text(json.dumps(result_doc(run_id="run-a")))
    [(_, run_id, inserted)] = store.ingest_files("~/r.duckdb", ["~/run.json"])
    assert run_id == "run-a" and inserted and (home / "r.duckdb").is_file()
    written = store.export("~/r.duckdb", "csv", "~/exported")
    assert written and all(path.parent == home / "exported" for path in written)
    assert not (tmp_path / "~").exists()  # no folder literally named "~" where the call ran


def test_exporting_a_database_that_does_not_exist_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no database at .*nothing to export"):
        store.export(tmp_path / "typo.duckdb", "csv", tmp_path / "out")
    assert not list(tmp_path.iterdir())
