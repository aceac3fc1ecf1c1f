"""Column documentation: every table, view and column of a new database carries its meaning as a comment,
and docs/schema.md is rendered from the same descriptions."""

from __future__ import annotations

import duckdb
import pytest

from stash_core import store
from stash_core.store import schema_markdown
from stash_core.store.schema import SCHEMA_DIGEST
from stash_core.store.schema_docs import RELATIONS, described_comments


@pytest.fixture(scope="module")
def fresh_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("fresh") / "results.duckdb"
    with store.connect(path):  # the first writer creates the file with the schema
        pass
    return path


def _catalog(path) -> dict[str, dict[str, str | None]]:
    """{relation: {"": its comment, column: its comment}} as stored in the database file."""
    with duckdb.connect(str(path), read_only=True) as con:
        relations = con.execute(
            "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name = 'main' UNION ALL "
            "SELECT view_name, comment FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal"
        ).fetchall()
        columns = con.execute(
            "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE database_name = "
            "current_database() AND schema_name = 'main' ORDER BY table_name, column_index"
        ).fetchall()
    catalog = {name: {"": comment} for name, comment in relations}
    for table, column, comment in columns:
        catalog[table][column] = comment
    return catalog


def test_every_table_view_and_column_of_a_new_database_has_a_comment(fresh_db) -> None:
    catalog = _catalog(fresh_db)
    assert set(catalog) == {"schema_meta", *store.TABLES, *store.VIEWS}
    blank = [f"{name}.{column}" for name, comments in catalog.items() for column, text in comments.items()]
    blank = [
        entry for entry in blank if not (catalog[entry.split(".")[0]][entry.split(".", 1)[1]] or "").strip()
    ]
    assert blank == []
    assert sum(len(comments) - 1 for comments in catalog.values()) > 150  # every column, views included


def test_the_comments_are_the_described_meanings(fresh_db) -> None:
    catalog = _catalog(fresh_db)
    assert catalog == described_comments()
    assert catalog["phases"]["telemetry_interval_s"] == "sampling interval of the phase's telemetry (s)"
    assert catalog["stall_breakdown"]["disk_share"] == "stall / iteration_s (fraction)"
    assert catalog["stall_breakdown"]["model"] == catalog["runs"]["model"]
    assert catalog["runs"][""].startswith("One row per profile")
    with duckdb.connect(str(fresh_db), read_only=True) as con:
        stored = con.execute("SELECT value FROM schema_meta WHERE key = 'comments_digest'").fetchall()
    assert stored == [(SCHEMA_DIGEST,)]


def test_every_description_names_a_real_relation() -> None:
    assert [relation.name for relation in RELATIONS] == ["schema_meta", *store.TABLES, *store.VIEWS]


def test_the_schema_browser_reads_the_comments_of_the_database(fresh_db) -> None:
    described = store.describe_schema(fresh_db)
    assert list(described) == [*store.TABLES, *store.VIEWS]
    runs = described["runs"]
    assert runs["kind"] == "table" and runs["rows"] == 0 and runs["about"] == described_comments()["runs"][""]
    assert described["stall_breakdown"]["kind"] == "view" and described["stall_breakdown"]["rows"] is None
    meanings = {column["column"]: (column["type"], column["meaning"]) for column in runs["columns"]}
    assert meanings["iteration_s"] == ("DOUBLE", described_comments()["runs"]["iteration_s"])


def test_docs_schema_md_is_rendered_from_the_descriptions() -> None:
    current = schema_markdown.SCHEMA_MD.read_text(encoding="utf-8")
    assert current == schema_markdown.render(), (
        "docs/schema.md is stale: run `python -m stash_core.store.schema_markdown --write`"
    )


def test_the_docs_command_checks_and_writes(tmp_path, monkeypatch, capsys) -> None:
    target = tmp_path / "schema.md"
    target.write_text("# an older schema document\n")
    monkeypatch.setattr(schema_markdown, "SCHEMA_MD", target)
    assert schema_markdown.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert schema_markdown.main(["--write"]) == 0
    assert schema_markdown.main(["--check"]) == 0
    text = target.read_text()
    assert "### `runs` - one row per profile" in text and "| `<stall>_share` | fraction |" in text
    assert schema_markdown.main([]) == 0 and capsys.readouterr().out == text
