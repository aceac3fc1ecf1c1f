"""A new database made by copying the template is the database create_schema makes, catalog and rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from stash_core.store import connection, schema_template
from stash_core.store.schema import create_schema

# Every part of a catalog a copy could lose, each as rows of this database in a fixed order.
HERE = "database_name = current_database()"
CATALOG = {
    "tables": f"SELECT schema_name, table_name, comment, sql FROM duckdb_tables() WHERE {HERE}",
    "columns": "SELECT table_name, column_name, column_index, data_type, column_default, is_nullable, "
    f"comment FROM duckdb_columns() WHERE {HERE}",
    "views": f"SELECT view_name, comment, sql FROM duckdb_views() WHERE NOT internal AND {HERE}",
    "constraints": "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() "
    f"WHERE {HERE}",
    "indexes": f"SELECT table_name, index_name, sql FROM duckdb_indexes() WHERE {HERE}",
    "sequences": f"SELECT sequence_name, start_value, increment_by FROM duckdb_sequences() WHERE {HERE}",
}


def described(path: Path) -> dict:
    with duckdb.connect(str(path), read_only=True) as con:
        found = {name: con.execute(sql + " ORDER BY ALL").fetchall() for name, sql in CATALOG.items()}
        # in a fixed order too: a table's rows have none (the copy inserts them in parallel, in any order)
        found["rows"] = {
            table: con.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall()
            for _, table, *_ in found["tables"]
        }
    return found


def test_a_copied_database_is_the_one_create_schema_makes(tmp_path: Path) -> None:
    made = tmp_path / "made.duckdb"
    with duckdb.connect(str(made)) as con:
        con.execute("BEGIN TRANSACTION")
        create_schema(con)
        con.execute("COMMIT")
    with connection.connect(tmp_path / "copied.duckdb"):  # a writer's first use: copied from the template
        pass
    expected, copied = described(made), described(tmp_path / "copied.duckdb")
    assert copied == expected
    assert len(copied["columns"]) > 100 and all(comment for *_, comment in copied["columns"])
    assert copied["rows"]["instances"] and copied["rows"]["schema_meta"]


@pytest.mark.parametrize("name", ['my "db".duckdb', "1.duckdb", "select.duckdb"])
def test_any_file_name_takes_the_copy(tmp_path: Path, name: str) -> None:
    with connection.connect(tmp_path / name) as con:
        assert con.execute("SELECT count(*) FROM instances").fetchall()[0][0] > 0


def test_a_reader_of_a_missing_file_gets_the_same_empty_schema(tmp_path: Path) -> None:
    with connection.connect(tmp_path / "new.duckdb"):
        pass
    with connection.connect(tmp_path / "missing.duckdb", read_only=True) as con:
        tables = con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
    assert tables == [(table,) for _, table, *_ in described(tmp_path / "new.duckdb")["tables"]]
    assert not (tmp_path / "missing.duckdb").exists()


def test_without_a_template_the_schema_is_created_statement_by_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cannot(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(schema_template, "_template", None)
    monkeypatch.setattr(schema_template.tempfile, "mkdtemp", cannot)
    made = tmp_path / "made.duckdb"
    with connection.connect(made):
        pass
    monkeypatch.undo()
    with connection.connect(tmp_path / "copied.duckdb"):
        pass
    assert described(made) == described(tmp_path / "copied.duckdb")


def test_a_removed_template_is_made_again(tmp_path: Path) -> None:
    first = schema_template.template_path()
    first.unlink()
    again = schema_template.template_path()
    assert again.exists() and again != first


def test_the_templates_of_killed_processes_are_removed_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    gone = tmp_path / f"stash-schema-{int(ended.stdout)}-abc"  # its process ended without removing it
    alive = tmp_path / f"stash-schema-{os.getpid()}-def"
    for folder in (gone, alive):
        folder.mkdir()
        (folder / "schema.duckdb").write_bytes(b"")
    monkeypatch.setattr(schema_template.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(schema_template, "_template", None)
    made = schema_template.template_path()
    assert not gone.exists() and alive.exists()
    assert made.parent.name.startswith(f"stash-schema-{os.getpid()}-") and made.exists()


def test_threads_that_make_one_new_database_at_once_all_open_it(tmp_path: Path) -> None:
    """They share DuckDB's instance of the file: one attached the template under a name the other then found
    taken ('database with name ... already exists'), or made the schema a second time."""
    import threading

    made = tmp_path / "made.duckdb"
    with duckdb.connect(str(made)) as con:
        con.execute("BEGIN TRANSACTION")
        create_schema(con)
        con.execute("COMMIT")
    expected = described(made)
    for attempt in range(5):
        path = tmp_path / f"new{attempt}.duckdb"
        start, failures = threading.Barrier(4), []

        def open_it(path: Path = path, start: threading.Barrier = start, failures: list = failures) -> None:
            start.wait()
            try:
                with connection.connect(path) as con:
                    con.execute("SELECT count(*) FROM runs").fetchall()
            except Exception as error:  # noqa: BLE001  (every failure is reported below)
                failures.append(f"{type(error).__name__}: {error}")

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert described(path) == expected  # one schema, made once
