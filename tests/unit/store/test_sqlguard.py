"""The read-only SQL console: what it refuses, that the database never changes, and the time limit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from stash_core.errors import UsageError
from stash_core.store.console import run_readonly_query
from stash_core.store.sqlguard import check_sql


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE runs (run_id VARCHAR, model VARCHAR, share DOUBLE, load INT, source_file VARCHAR)"
        )
        con.execute(
            "INSERT INTO runs VALUES ('a', 'resnet18', 0.5, 1, '/tmp/a.json'), ('b', 'vgg16', 0.25, 2, NULL)"
        )
        con.execute("CREATE TABLE schema_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute("INSERT INTO schema_meta VALUES ('schema_version', '3')")
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


READING = [
    "SELECT * FROM runs",
    "select run_id from runs;",
    "FROM runs",
    "WITH x AS (SELECT 1 AS a) SELECT * FROM x",
    "SELECT share, load FROM runs",  # column names that DuckDB tokenizes as keywords
    "SELECT * FROM runs WHERE source_file = '/tmp/a.json'",  # a path as a value is fine
    "SELECT * FROM runs WHERE model = 'drop'",
    'SELECT "copy" FROM (SELECT 1 AS "copy")',
    "DESCRIBE runs",
    "SHOW TABLES",
    "SUMMARIZE runs",
    "EXPLAIN SELECT * FROM runs",
    "PRAGMA table_info('runs')",
    "SELECT count(*) FROM runs r, runs s WHERE r.run_id = s.run_id",
    "PIVOT runs ON model IN ('resnet18', 'vgg16') USING count(*)",
    "SELECT * FROM (PIVOT runs ON model IN ('resnet18') USING count(*))",
]


@pytest.mark.parametrize("sql", READING)
def test_reading_statements_pass(sql: str) -> None:
    assert check_sql(sql)


REFUSED = {
    "DROP TABLE runs": "DROP",
    "DELETE FROM runs": "DELETE",
    "UPDATE runs SET model = 'x'": "UPDATE",
    "INSERT INTO runs VALUES ('c', 'x', 0, 0, NULL)": "INSERT",
    # named by the statement after the WITH, which is allowed before a SELECT ("WITH statements are refused")
    "WITH x AS (SELECT 1) INSERT INTO runs SELECT * FROM x": "INSERT statements are refused",
    "WITH x AS (SELECT 1) DELETE FROM runs": "DELETE statements are refused",
    "CREATE TABLE t AS SELECT 1": "CREATE",
    "ALTER TABLE runs ADD COLUMN x INTEGER": "ALTER",
    "ATTACH 'other.duckdb' AS other": "ATTACH",
    "DETACH other": "DETACH",
    "COPY runs TO '/tmp/runs.csv'": "COPY",
    "INSTALL httpfs": "INSTALL",
    "LOAD httpfs": "LOAD",
    "EXPORT DATABASE '/tmp/out'": "EXPORT",
    "IMPORT DATABASE '/tmp/out'": "IMPORT",
    "SET threads = 1": "SET",
    "PRAGMA threads = 1": "PRAGMA",
    "PRAGMA enable_profiling": "PRAGMA",
    "CALL pragma_version()": "read with SELECT * FROM it, e.g. SELECT * FROM pragma_version()",
    "CHECKPOINT": "CHECKPOINT",
    "SELECT * FROM read_csv('/etc/passwd')": "read_csv",
    "SELECT * FROM read_csv_auto('/etc/passwd')": "read_csv_auto",
    "SELECT * FROM read_parquet('x.parquet')": "read_parquet",
    "SELECT * FROM parquet_scan('x.parquet')": "parquet_scan",
    "SELECT * FROM read_json('x.json')": "read_json",
    "SELECT * FROM read_text('/etc/hostname')": "read_text",
    "SELECT * FROM read_blob('/etc/hostname')": "read_blob",
    "SELECT * FROM glob('/etc/*')": "glob",
    "SELECT * FROM sniff_csv('/etc/passwd')": "sniff_csv",
    "SELECT * FROM query('SELECT 1')": "query",
    "SELECT * FROM 'data.csv'": "data.csv",
    "SELECT * FROM runs, 'https://example.com/x.parquet'": "example.com",
    'SELECT * FROM "/etc/passwd.csv"': "passwd",
    "SELECT * FROM runs JOIN '/tmp/x.csv' ON true": "/tmp/x.csv",
    "SELECT 1; DROP TABLE runs": "one statement",
    # without its IN list, DuckDB makes a PIVOT a statement that creates a type first
    "PIVOT runs ON model USING count(*)": "a PIVOT needs an explicit IN (...) list",
    "SELECT * FROM (PIVOT runs ON model USING count(*))": "a PIVOT needs an explicit IN (...) list",
    "PIVOT_WIDER runs ON model USING count(*)": "a PIVOT needs an explicit IN (...) list",
    "": "type a query",
    "SELEC 1": "syntax error",
}


@pytest.mark.parametrize("sql", list(REFUSED))
def test_writing_or_outside_statements_are_refused_with_a_reason(sql: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_sql(sql)
    assert REFUSED[sql].lower() in str(caught.value).lower()
    assert "\n" not in str(caught.value)


def test_drop_table_is_refused_and_the_database_is_unchanged(db: Path) -> None:
    before = _digest(db)
    for sql in ("DROP TABLE runs", "DELETE FROM runs", "CREATE TABLE x (a INT)", "COPY runs TO 'x.csv'"):
        with pytest.raises(UsageError):
            run_readonly_query(db, sql)
    assert _digest(db) == before
    assert len(run_readonly_query(db, "SELECT * FROM runs").frame) == 2


def test_select_returns_rows_and_caps_them(db: Path) -> None:
    result = run_readonly_query(db, "SELECT run_id FROM runs ORDER BY run_id", max_rows=1)
    assert list(result.frame["run_id"]) == ["a"]
    assert result.truncated
    full = run_readonly_query(db, "SELECT run_id FROM runs ORDER BY run_id", max_rows=10)
    assert list(full.frame["run_id"]) == ["a", "b"]
    assert not full.truncated


def test_the_connection_cannot_reach_files_even_past_the_token_check(db: Path, tmp_path: Path) -> None:
    # A replacement scan through a quoted name without a path character passes the token check; external
    # access being off still stops it.
    (tmp_path / "secret").write_text("a,b\n1,2\n")
    with pytest.raises(UsageError):
        run_readonly_query(db, 'SELECT * FROM "secret"')


def test_sql_errors_are_one_line(db: Path) -> None:
    with pytest.raises(UsageError) as caught:
        run_readonly_query(db, "SELECT no_such_column FROM runs")
    assert str(caught.value).startswith("query failed:")
    assert "\n" not in str(caught.value)


def test_a_long_query_is_interrupted_at_the_time_limit(db: Path) -> None:
    with pytest.raises(UsageError, match="time limit"):
        run_readonly_query(db, "SELECT count(*) FROM range(1000000000000) a, range(1000) b", timeout_s=0.5)
    # The database is still usable afterwards.
    assert len(run_readonly_query(db, "SELECT * FROM runs").frame) == 2


def test_a_missing_database_reads_as_empty(tmp_path: Path) -> None:
    result = run_readonly_query(tmp_path / "none.duckdb", "SELECT count(*) AS n FROM runs")
    assert int(result.frame["n"][0]) == 0
    assert not (tmp_path / "none.duckdb").exists()


def test_a_pivot_with_its_in_list_runs(db: Path) -> None:
    result = run_readonly_query(
        db, "PIVOT (FROM runs SELECT model) ON model IN ('resnet18', 'vgg16') USING count(*)"
    )
    assert result.frame.to_dict("records") == [{"resnet18": 1, "vgg16": 1}]
