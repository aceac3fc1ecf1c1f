"""Every CSV Stash writes quotes a text cell that a spreadsheet would run as a formula (=, +, -, @, tab,
carriage return at its start): the export, recommend --csv, schedule --jobs-csv and the download buttons."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from stash_core.catalog.catalog import add_instance
from stash_core.cells import csv_text
from stash_core.cli.main import main
from stash_core.store.export import export
from stash_core.terminal import FORMULA_LEADS, formula_safe
from stash_core.views.common import frame_to_csv

NAMES = [f"{lead}cmd|' /C calc'!A0" for lead in ("=", "+", "-", "@")] + ["\tTAB", "\rCR", "plain", "a=b"]


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]


def _assert_no_formula(cells: list[str]) -> None:
    assert not [cell for cell in cells if cell.startswith(FORMULA_LEADS)], cells


def test_one_function_quotes_formula_leading_text_and_leaves_the_rest():
    assert [formula_safe(name) for name in NAMES[:4]] == [f"'{name}" for name in NAMES[:4]]
    assert formula_safe("plain") == "plain" and formula_safe("a=b") == "a=b" and formula_safe(-5) == -5
    text = csv_text(pd.DataFrame({"name": NAMES, "value": range(len(NAMES))}))
    _assert_no_formula(_cells(text))
    assert _cells(text)[-4:] == ["plain", "6", "a=b", "7"]


def test_download_buttons_write_safe_csv():
    frame = pd.DataFrame({"instance": NAMES, "iteration_s": [-0.5] * len(NAMES)})
    cells = _cells(frame_to_csv(frame).decode())
    _assert_no_formula([cell for cell in cells if cell != "-0.5"])
    assert "-0.5" in cells  # a negative number is a number, not a formula


@pytest.fixture()
def catalog_db(tmp_path):
    db = tmp_path / "x.duckdb"
    for name in ("=evil", "+evil", "@evil"):
        add_instance(db, name=name, accelerator="NVIDIA V100 SXM2 16 GB", accelerator_count=1,
                     on_demand_usd_per_h=1.0)  # fmt: skip
    return db


def test_the_csv_export_quotes_formula_leading_names(catalog_db, tmp_path):
    export(catalog_db, "csv", tmp_path / "out")
    cells = _cells((tmp_path / "out" / "instances.csv").read_text())
    assert {"'=evil", "'+evil", "'@evil"} <= set(cells)
    _assert_no_formula(cells)


def test_recommend_csv_quotes_formula_leading_names(catalog_db, tmp_path, capsys):
    out = tmp_path / "options.csv"
    status = main(["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1",
                   "--dataset-images", "1000", "--budget-hours", "100", "--db", str(catalog_db), "--csv",
                   str(out), "--instances", "=evil,+evil,@evil"])  # fmt: skip
    capsys.readouterr()
    assert status == 0
    cells = _cells(out.read_text())
    assert "'=evil" in " ".join(cells)
    _assert_no_formula(cells)


def test_schedule_jobs_csv_quotes_formula_leading_job_ids(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    leads = ("=", "+", "-", "@") * 3
    rows = [f"{lead}job{index},1,{index * 10},100" for index, lead in enumerate(leads)]
    trace.write_text("job_id,num_gpu,submit_time,duration\n" + "\n".join(rows) + "\n")
    out = tmp_path / "jobs.csv"
    status = main(["schedule", "--trace", str(trace), "--jobs-csv", str(out), "--no-store",
                   "--out", str(tmp_path / "sims"), "--tuning", "online"])  # fmt: skip
    capsys.readouterr()
    assert status == 0, capsys.readouterr()
    cells = _cells(out.read_text())
    assert "'=job0" in cells and "'-job2" in cells
    _assert_no_formula(cells)


def test_what_a_query_returns_downloads_as_csv_whatever_its_types():
    """The SQL console's download: DuckDB's infinite timestamps, BLOBs and intervals are written, not lost."""
    import duckdb

    con = duckdb.connect()
    frame = con.execute(
        "SELECT 'infinity'::TIMESTAMPTZ AS t, '-infinity'::TIMESTAMP AS u, "
        "TIMESTAMP '2024-01-02 03:04:05' AS v, NULL::TIMESTAMP AS w, 'ab'::BLOB AS b, INTERVAL 3 DAY AS i, "
        "'=x' AS s"
    ).df()
    cells = _cells(frame_to_csv(frame).decode())
    assert cells[7:] == ["infinity", "-infinity", "2024-01-02 03:04:05.000000", "", "0x6162", "3 days", "'=x"]


def test_lists_and_structs_a_query_returns_download_as_json_with_every_digit():
    """A list cell was written as numpy's repr ("[0.22906212 0.33227434]", 8 digits, no commas) and a
    struct as Python's ({'a': 1}): text no reader parses."""
    import json

    import duckdb

    frame = duckdb.connect().execute(
        "SELECT [0.2290621234567::DOUBLE, 1.0 / 0, NULL] AS l, {'a': 1, 'b': ['=x', 'y']} AS s, "
        "[]::INT[] AS e"
    ).df()
    cells = [json.loads(cell) for cell in _cells(frame_to_csv(frame).decode())[3:]]
    assert cells == [[0.2290621234567, None, None], {"a": 1, "b": ["=x", "y"]}, []]
    # a DECIMAL (a literal's type) is a number, a BLOB and an interval text as their own cells are written
    query = "SELECT MAP {'k': 1.5} AS m, ['ab'::BLOB] AS b, [INTERVAL 3 DAY] AS i"
    frame = duckdb.connect().execute(query).df()
    cells = [json.loads(cell) for cell in _cells(frame_to_csv(frame).decode())[3:]]
    assert cells == [{"k": 1.5}, ["0x6162"], ["3 days 00:00:00"]]


def test_a_small_parquet_upload_that_expands_to_gigabytes_is_refused_before_it_is_read():
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stash_core.views import upload

    buffer = io.BytesIO()
    import numpy as np

    pq.write_table(pa.table({"x": np.zeros(21_000_000, dtype=np.int8)}), buffer, compression="zstd",
                   row_group_size=21_000_000)  # fmt: skip
    data = buffer.getvalue()
    assert len(data) < 1_000_000
    check = upload._check_file("bomb.parquet", data)
    assert not check.ok and "21,000,000 rows" in check.reason and check.frame is None


def test_downloads_write_control_characters_escaped_as_the_export_does(tmp_path):
    """A terminal escape in a stored text (a failed run's error) is written as \\xNN text by both the CSV
    export and the dashboard's download, never as the raw bytes that act on a terminal printing the CSV."""
    from result_docs import result_doc

    from stash_core import store

    doc = result_doc(run_id="20261122T110600Z-aaaaaaaa")
    doc.update(status="failed", error="boom \x1b[31mRED\x1b[0m\r\u202e =x", phases=[], breakdown=None)
    db = tmp_path / "x.duckdb"
    store.ingest_result(db, doc)
    export(db, "csv", tmp_path / "out")
    exported = pd.read_csv(tmp_path / "out" / "runs.csv")["error"].tolist()
    frame = store.query_readonly(db, "SELECT error FROM runs")
    downloaded = pd.read_csv(io.BytesIO(frame_to_csv(frame)))["error"].tolist()
    assert downloaded == exported == ["boom \\x1b[31mRED\\x1b[0m\\r\\u202e =x"]
    assert _cells(csv_text(pd.DataFrame({"s": ["\x1b]0;title\x07", "\rCR", "tab\there"]})))[1:] == [
        "\\x1b]0;title\\x07",
        "\\rCR",
        "tab\there",
    ]


def test_an_empty_text_and_a_missing_value_are_told_apart_as_duckdb_tells_them(tmp_path):
    """pandas wrote both as nothing, so no reader could tell an empty text from NULL. Now "" and nothing, as
    `stash export --format csv` (DuckDB's COPY) writes them; DuckDB reads them apart with
    allow_quoted_nulls=false."""
    import duckdb

    text = csv_text(pd.DataFrame({"error": ["", None, "x", "\x00"], "value": [1.5, None, 3.0, 4.0]}))
    assert text.splitlines() == ["error,value", '"",1.5', ",", "x,3.0", "\\x00,4.0"]
    path = tmp_path / "back.csv"
    path.write_text(text)
    query = f"SELECT error FROM read_csv('{path}', all_varchar=true, allow_quoted_nulls=false)"
    back = duckdb.connect().execute(query).fetchall()
    assert [row[0] for row in back] == ["", None, "x", "\\x00"]


def test_a_lone_missing_cell_is_nothing_and_pandas_own_missing_text_no_error():
    assert csv_text(pd.DataFrame({"a": ["", None, "x"]})).splitlines() == ["a", '""', "", "x"]
    text = pd.array(["", None], dtype="string")  # pandas' NA, which == "" cannot answer
    assert csv_text(pd.DataFrame({"a": text, "n": pd.array([1, None], dtype="Int64")})).splitlines() == [
        "a,n", '"",1', ","
    ]
