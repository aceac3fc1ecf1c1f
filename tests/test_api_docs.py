"""docs/api.md's Python runs as written: its ```python blocks, one after the other as a notebook's cells, in a
new Python in a temporary folder (where its temporary database goes), so the page and the API cannot drift
apart. The example profiles for real (about half a minute)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "api.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[str]:
    return PYTHON_BLOCK.findall(text)


def test_the_blocks_are_found():
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) >= 4 and "stash.profile(" in blocks[0] and "stash.predict(" in blocks[-1]
    assert python_blocks("text\n```python\na = 1\n```\n```sql\nSELECT 1\n```\n") == ["a = 1\n"]


@pytest.mark.launches
@pytest.mark.slow
def test_the_pages_python_runs_as_written(tmp_path):
    code = "\n".join(python_blocks(PAGE.read_text()))
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}  # its temporary folder is ours
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    (db,) = tmp_path.glob("*/stash.duckdb")
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("completed",)]


FRAMES_SECTION = "## What the frames hold"
TABLE_ROW = re.compile(r"^\| (`.*?) \| .* \|$", re.MULTILINE)


def documented_columns(table: str) -> tuple[set[str], set[str]]:
    """The frame's columns a table's first cells name, and the JSON names given in brackets after them."""
    columns, json_names = set(), set()
    for cell in TABLE_ROW.findall(table):
        bracketed = re.findall(r"\(`(\w+)`", cell)
        json_names.update(bracketed)
        columns.update(set(re.findall(r"`(\w+)`", cell)) - set(bracketed))
    return columns, json_names


@pytest.mark.slow
def test_the_frames_columns_are_those_the_page_lists(tmp_path):
    """Every column of predict's and recommend's frames is on the page, and nothing else, with the JSON
    names where they differ (a user indexing `frame["step_s"]` from the JSON's name met a KeyError)."""
    import stash_core as stash

    section = PAGE.read_text().split(FRAMES_SECTION, 1)[1]
    predict_table, recommend_table = section.split("\n\n| column |")[1:3]
    db = tmp_path / "none.duckdb"
    predictions = stash.predict(
        model="resnet18", batch_size=32, instances=["g5.xlarge", "p4d.24xlarge"], db=db
    )
    columns, json_names = documented_columns(predict_table)
    assert set(predictions.to_frame().columns) == columns
    assert json_names <= set(predictions.to_dict()["predictions"][0]) and json_names.isdisjoint(columns)
    recommendation = stash.recommend("resnet18", 32, 1, 100_000, budget_hours=100, db=db,
                                     instances=["g5.xlarge", "p4d.24xlarge"])  # fmt: skip
    extra, _ = documented_columns(recommend_table)
    assert set(recommendation.to_frame().columns) == (columns - {"workers"}) | {"workers_total"} | extra
    assert not db.exists()


def table_after(section: str, lead: str) -> str:
    """The first table after the paragraph that starts with `lead`: its rows up to the blank line after it."""
    after = section.split(f"\n{lead}", 1)[1]
    return after.split("\n| column |", 1)[1].split("\n\n", 1)[0]


@pytest.mark.slow
def test_the_spot_plan_and_schedule_frames_columns_are_those_the_page_lists(tmp_path):
    """SpotPlan.to_frame()'s and Schedule.to_frame()'s columns (R among them, spotDNN's convergence
    coefficient) were on no page: each is listed, and nothing else."""
    import stash_core as stash

    section = PAGE.read_text().split(FRAMES_SECTION, 1)[1]
    db = tmp_path / "none.duckdb"
    plan = stash.plan_spot(REPO / "examples" / "workload.json", "g3.8xlarge:5,g3.16xlarge:3", 0.8, 2600,
                           rate_per_h=0, db=db)  # fmt: skip
    columns, json_names = documented_columns(table_after(section, "`plan_spot(...).to_frame()`"))
    assert set(plan.to_frame().columns) == columns and not json_names
    assert set(plan.to_dict()["candidates"][0]) == columns  # "under the same names"
    schedule = stash.simulate_schedule(synthetic_jobs=12, tuning="online", out=tmp_path, no_store=True, db=db)
    columns, json_names = documented_columns(table_after(section, "`simulate_schedule(...).to_frame()`"))
    assert set(schedule.to_frame().columns) == columns and not json_names
    assert set(schedule.to_dict()["policies"][0]["metrics"]) == columns - {"policy"}
    assert not db.exists()


def test_a_table_is_read_up_to_the_blank_line_after_it():
    page = "intro\n`f()` holds:\n\n| column | what |\n| --- | --- |\n| `a`, `b` | x |\n\nprose `c`\n"
    assert documented_columns(table_after(page, "`f()`")) == ({"a", "b"}, set())
