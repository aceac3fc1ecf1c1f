"""`stash profile --no-store` writes its result file and nothing beside the database it would have used."""

from __future__ import annotations

import json

import pytest
from support import ONE_RUN, stash_main

pytestmark = pytest.mark.launches  # a real launch of one run


def test_no_store_leaves_no_job_folder_where_the_command_ran(tmp_path):
    """A hidden .stash-jobs folder, with the whole command line, was left in the folder the command ran
    from, beside a results.duckdb that never exists."""
    here, out = tmp_path / "here", tmp_path / "run.json"
    here.mkdir()
    done = stash_main("profile", *ONE_RUN, "--no-store", "--out", str(out), "--progress", "none", cwd=here,
                      env_extra={"STASH_CACHE_DIR": str(tmp_path / "cache")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["status"] == "completed"
    assert sorted(path.name for path in here.iterdir()) == []
