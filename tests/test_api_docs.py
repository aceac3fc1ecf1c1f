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
