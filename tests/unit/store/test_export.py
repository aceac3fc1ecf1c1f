"""Export: every table and the view, in each format, with row counts that survive the round trip."""

from __future__ import annotations

import importlib
import json
import re

import duckdb
import pytest

from stash_core import store
from stash_core.errors import StashError, UsageError
from stash_core.sched import Cluster, Policy, TraceJob
from stash_core.sched.report import run_simulation

# The package re-exports the function `export`, which hides the module of the same name from attribute access.
export_module = importlib.import_module("stash_core.store.export")

READERS = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}


@pytest.fixture(scope="module")
def populated(tmp_path_factory, result_doc_builder):
    path = tmp_path_factory.mktemp("export") / "results.duckdb"
    store.ingest_result(path, result_doc_builder(run_id="done", seed=1))
    store.ingest_result(path, result_doc_builder(run_id="broken", status="failed", seed=2))
    jobs = [TraceJob(name, 3, 0.0, 100.0, None, 1.5, "trace") for name in ("X", "Y")]
    simulation, _ = run_simulation(jobs, Cluster(1, 2, 4), [Policy("fifo"), Policy("las")], tuning="given",
                                   trace="t.csv", trace_format="tiresias")  # fmt: skip
    store.ingest_simulation(path, simulation, None)
    return path


def test_every_table_and_view_is_exported() -> None:
    """`stash export` says it exports every table and view: the simulations table was left out."""
    assert set(export_module.EXPORTED) == {*store.TABLES, *store.VIEWS}


def test_a_database_older_than_a_table_exports_what_it_has(populated, tmp_path) -> None:
    """A database of schema 3, which readers take as it is, predates the simulations table (schema 4)."""
    import shutil

    old = tmp_path / "old.duckdb"
    shutil.copyfile(populated, old)
    with duckdb.connect(str(old)) as con:
        con.execute("DROP TABLE simulations")
        con.execute("UPDATE schema_meta SET value = '3' WHERE key = 'schema_version'")
    names = sorted(path.stem for path in store.export(old, "csv", tmp_path / "out"))
    assert names == sorted(set(export_module.EXPORTED) - {"simulations"})


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_export_round_trips_row_counts(populated, row_counts, tmp_path, fmt) -> None:
    out_dir = tmp_path / "export"
    written = store.export(populated, fmt, out_dir)
    assert sorted(path.name for path in written) == sorted(f"{name}.{fmt}" for name in export_module.EXPORTED)
    assert sorted(out_dir.iterdir()) == sorted(written)  # no staging folder left behind
    expected = {**row_counts(populated), "stall_breakdown": 2}
    con = duckdb.connect()
    try:
        for path in written:
            name = path.name.rsplit(".", 1)[0]
            if expected[name] == 0:
                assert path.stat().st_size < 4096  # empty table (instances): header or schema only
                continue
            rows = con.execute(f"SELECT count(*) FROM {READERS[fmt]}('{path}')").fetchall()[0][0]
            assert rows == expected[name], name
    finally:
        con.close()
    assert expected["iterations"] > 100 and expected["telemetry"] > 100 and expected["simulations"] == 2


def test_json_export_is_one_object_per_line(populated, tmp_path) -> None:
    store.export(populated, "json", tmp_path)
    lines = (tmp_path / "runs.json").read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("{") and line.endswith("}") for line in lines)


def test_json_export_writes_a_number_that_is_not_finite_as_null(populated, tmp_path) -> None:
    # NaN and Infinity are no JSON: a reader refused the whole file. Result files write them as null.
    db = tmp_path / "edited.duckdb"
    db.write_bytes(populated.read_bytes())
    with duckdb.connect(str(db)) as con:
        con.execute(
            "UPDATE runs SET iteration_s = 'nan'::DOUBLE, epoch_s = 'inf'::DOUBLE WHERE run_id = 'done'"
        )
        con.execute("UPDATE stalls SET seconds = '-inf'::DOUBLE WHERE run_id = 'done' AND stall = 'compute'")
    out = tmp_path / "out"
    for path in store.export(db, "json", out):
        for line in path.read_text().splitlines():
            json.loads(
                line, parse_constant=lambda word, name=path.name: pytest.fail(f"{name}: {word} is not JSON")
            )
    done = next(json.loads(line) for line in (out / "runs.json").read_text().splitlines() if '"done"' in line)
    assert done["iteration_s"] is None and done["epoch_s"] is None and done["model"] == "resnet18"


def test_unknown_format_is_a_usage_error(populated, tmp_path) -> None:
    with pytest.raises(UsageError, match="unknown export format 'xlsx'"):
        store.export(populated, "xlsx", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_empty_duckdb_file_is_refused_as_a_missing_one(tmp_path) -> None:
    """Nothing was stored in a DuckDB file without any table: it exported the stand-in's tables, among them
    the shipped catalog as if the file held it."""
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with pytest.raises(UsageError, match="holds no Stash tables .*: nothing to export"):
        store.export(empty, "csv", tmp_path / "out")
    with pytest.raises(UsageError, match="no database at .*: nothing to export"):
        store.export(tmp_path / "missing.duckdb", "csv", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_failed_export_leaves_nothing(populated, tmp_path, monkeypatch) -> None:
    # The last object fails after the others were written: none of them may appear.
    last = list(export_module.EXPORTED)[-1]
    monkeypatch.setitem(export_module.EXPORTED, last, "no_such_column")
    out_dir = tmp_path / "out"
    with pytest.raises(UsageError, match=f"cannot export {last}"):
        store.export(populated, "csv", out_dir)
    assert not out_dir.exists()  # the folder it made is removed again


def test_csv_export_writes_control_characters_as_text_and_quotes_formulas(result_doc, tmp_path) -> None:
    db = tmp_path / "results.duckdb"
    hostile = "\x1b[2J\x1b]0;title\x07 boom\r\u202e\x9b =x"
    for run_id, error in (("hostile", hostile), ("formula", '=HYPERLINK("http://x")')):
        store.ingest_result(db, {**result_doc(run_id=run_id, status="failed"), "error": error})
    store.export(db, "csv", tmp_path / "out")
    text = (tmp_path / "out" / "runs.csv").read_text()
    assert not any(char in text for char in "\x1b\x07\r\u202e\x9b")
    assert "\\x1b[2J\\x1b]0;title\\x07 boom\\r\\u202e\\x9b =x" in text
    assert "'=HYPERLINK" in text
    with duckdb.connect() as con:  # the cells still read back as one row each
        query = f"SELECT run_id, error FROM read_csv('{tmp_path / 'out' / 'runs.csv'}')"
        errors = dict(con.execute(query).fetchall())
    assert errors["formula"].startswith("'=") and errors["hostile"].startswith("\\x1b[2J")


def test_json_export_writes_controls_as_escapes_that_read_back_as_the_same_text(result_doc, tmp_path) -> None:
    """DuckDB writes C1 controls, bidirectional overrides and line separators raw into JSON: `cat` of the
    export ran a CSI (U+009B), and a line reader split one row in three at U+2028 and U+0085."""
    db = tmp_path / "results.duckdb"
    hostile = "\x1b[2J boom \u202e txt \x9b31m a\u2028b\x85c\u2029d é 👩"
    store.ingest_result(db, {**result_doc(run_id="hostile", status="failed"), "error": hostile})
    store.export(db, "json", tmp_path / "out")
    text = (tmp_path / "out" / "runs.json").read_text(encoding="utf-8")
    assert not any(char in text for char in "\x1b\u202e\x9b\u2028\x85\u2029")
    assert "é 👩" in text  # other characters as they are
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 1 and rows[0]["error"] == hostile  # the same text to a JSON reader


def test_the_csv_cells_are_written_as_printable_writes_them(tmp_path) -> None:
    """Every character terminal.printable escapes, alone, between letters and leading a cell, comes out of
    the CSV select list exactly as printable (then the formula quote) writes it; a cell without one as is."""
    from stash_core.terminal import escaped_characters, formula_safe, printable

    cells = ["plain é 👩", "", "-1", "=x", "\tlead", "\rlead", "a\u200eb\u0301"]
    for char in escaped_characters():
        cells += [char, f"a{char}b{char}", f"{char}=x"]
    with duckdb.connect() as con:
        con.execute("CREATE TABLE t (cell VARCHAR, n INTEGER)")
        con.executemany("INSERT INTO t VALUES (?, 1)", [[cell] for cell in cells])
        con.execute("INSERT INTO t VALUES (NULL, 2)")
        select = export_module._csv_safe_columns(con, "t")
        written = con.execute(f"SELECT {select} FROM t").fetchall()
    assert written[:-1] == [(formula_safe(printable(cell)), 1) for cell in cells]
    assert written[-1] == (None, 2)


def test_an_existing_file_as_the_export_s_folder_is_said_so(populated, tmp_path) -> None:
    """`stash export --out model.py` said 'File exists'."""
    target = tmp_path / "model.py"
    target.write_text("def make(): ...\n")
    with pytest.raises(UsageError, match="model.py: it is a file, and an export is a folder of files"):
        store.export(populated, "csv", target)
    assert target.read_text() == "def make(): ...\n"


def test_the_staging_folder_of_an_export_killed_part_way_goes_with_the_next(populated, tmp_path) -> None:
    """An export killed by SIGKILL left .stash-export-* with partial files, which nothing ever removed; one
    of a live export (its owner running) is left alone."""
    from stash_core.store.console_files import mark_owner

    out_dir = tmp_path / "out"
    dead, alive = out_dir / ".stash-export-dead1234", out_dir / ".stash-export-live5678"
    for folder in (dead, alive):
        folder.mkdir(parents=True)
        (folder / "runs.csv").write_text("run_id\n")
    (dead / "owner").write_text(f"{2**22 + 1} 1.0\n")  # a pid and start time no process has
    mark_owner(alive)
    store.export(populated, "csv", out_dir)
    assert not dead.exists() and alive.exists()
    assert (out_dir / "runs.csv").exists()


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_an_export_replaces_an_earlier_export_and_nothing_else(populated, tmp_path, fmt) -> None:
    """A result file saved as runs.json, a database as telemetry.<fmt>, notes as stalls.<fmt> were replaced
    without a word (exit 0): refused now before anything is written; an earlier export, also one of an older
    schema with fewer columns, is replaced."""
    out_dir = tmp_path / "export"
    store.export(populated, fmt, out_dir)
    store.export(populated, fmt, out_dir)  # a rerun replaces its own files
    runs = out_dir / f"runs.{fmt}"
    older = duckdb.connect()
    literal = str(runs).replace("'", "''")
    options = export_module.EXPORT_FORMATS[fmt][1]
    older.execute(
        f"COPY (SELECT run_id, model FROM {READERS[fmt]}('{literal}')) TO '{literal}.old' ({options})"
    )
    older.close()
    (out_dir / f"runs.{fmt}.old").replace(runs)
    store.export(populated, fmt, out_dir)  # an export of fewer columns is an earlier export too
    for name, content in (("telemetry", populated.read_bytes()), ("stalls", b"my notes\n"),
                          ("runs", b'{"kind": "stash-result", "run_id": "r1"}\n')):  # fmt: skip
        kept = out_dir / f"{name}.{fmt}"
        before = {path.name: path.read_bytes() for path in out_dir.iterdir()}
        kept.write_bytes(content)
        with pytest.raises(
            UsageError, match=f"{name}.{fmt} there is not an earlier export of the {name} table"
        ):
            store.export(populated, fmt, out_dir)
        assert kept.read_bytes() == content
        assert {path.name for path in out_dir.iterdir()} == set(before)  # nothing added, no staging left
        kept.write_bytes(before[kept.name])


def test_an_export_that_cannot_start_on_a_full_disk_leaves_no_folder(populated, tmp_path, monkeypatch) -> None:
    """The staging folder's owner file could not be written: the new folder stayed, with a staging folder
    whose empty owner file no later export judged stale."""
    import errno

    def full(folder):
        (folder / "owner").write_text("")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export_module, "mark_owner", full)
    with pytest.raises(UsageError, match="No space left on device"):
        store.export(populated, "csv", tmp_path / "new" / "out")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor the one made above it


def test_an_export_on_a_full_disk_says_why_in_words_and_leaves_nothing(populated, tmp_path) -> None:
    """DuckDB's refusal came with its error as JSON ('... {"exception_type":"IO","exception_message":...')."""
    from support import fill, mounted_tmpfs

    small = tmp_path / "small"
    with mounted_tmpfs(small, "256k"):
        fill(small, keep_bytes=16 * 1024)
        with pytest.raises(StashError) as refused:
            store.export(populated, "csv", small / "out")
        said = str(refused.value)
        words = r"cannot export \w+: IO Error: Could not write file .*: No space left on device$"
        assert re.match(words, said), said
        assert "exception_type" not in said and "\n" not in said
        assert sorted(path.name for path in small.iterdir()) == ["filler"]


def test_an_export_into_the_folder_of_the_result_files_is_refused(populated, tmp_path) -> None:
    """Exported there, instances.json stood among the result files and `stash ingest results/*.json` (the way
    back from a damaged database) refused the whole folder."""
    results = populated.parent / "results"
    with pytest.raises(UsageError, match="profiles on this database write their result files there"):
        store.export(populated, "json", results)
    assert not results.exists()
    assert store.export(populated, "json", tmp_path / "elsewhere")  # any other folder is taken
    for fmt in ("csv", "parquet"):  # `stash ingest results/*` read them too, and refused the folder
        with pytest.raises(UsageError, match="profiles on this database write their result files there"):
            store.export(populated, fmt, results)
        with pytest.raises(UsageError, match="profiles on this database write their result files there"):
            store.export(populated, fmt, results / "exported")  # a folder among them: refused by ingest
    assert not results.exists()


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_an_export_into_any_folder_of_result_files_is_refused(populated, tmp_path, fmt) -> None:
    """Only the database's own results/ folder was guarded: an export into a folder of result files copied
    elsewhere was taken, and `stash ingest in/*` then refused the whole folder for the tables."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "r1.json").write_text('{"schema_version":1,"kind":"stash-profile","run_id":"x"}')
    with pytest.raises(UsageError, match=r"cannot export into .*: it holds result files \(r1.json\)"):
        store.export(populated, fmt, folder)
    assert sorted(path.name for path in folder.iterdir()) == ["r1.json"]
    (folder / "r1.json").write_text('{"settings": "a JSON file that is no result"}')
    assert store.export(populated, fmt, folder)  # other JSON is no result file: taken
