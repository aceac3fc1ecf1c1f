"""`stash runs` lists the runs of one model, instance or status: it offered only --limit, and a user with
hundreds of runs had to write SQL to find one model's."""

from __future__ import annotations

import json

import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.cli.main import STATUSES, main
from stash_core.errors import UsageError
from stash_core.results.file import RUN_STATUSES
from stash_core.store.runs import run_rows


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.duckdb"
    store.ingest_result(path, result_doc(run_id="20261122T110000Z-00000001", model="resnet10"))
    failed = result_doc(run_id="20261122T120000Z-00000002", model="resnet10", status="failed")
    store.ingest_result(path, failed)
    store.ingest_result(path, result_doc(run_id="20261122T130000Z-00000003", model="alexnet"))
    return path


def listed(capsys) -> list[str]:
    return [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.startswith("2026")]


def test_runs_lists_the_runs_of_one_model_instance_or_status(db, capsys) -> None:
    assert main(["runs", "--db", str(db), "--model", "resnet10"]) == 0
    assert listed(capsys) == ["20261122T120000Z-00000002", "20261122T110000Z-00000001"]
    assert main(["runs", "--db", str(db), "--model", "resnet10", "--status", "completed"]) == 0
    assert listed(capsys) == ["20261122T110000Z-00000001"]
    assert main(["runs", "--db", str(db), "--model", "resnet10", "--limit", "1"]) == 0
    out = capsys.readouterr().out  # the count left out is of the runs that match, not of all
    assert out.splitlines()[-1] == "... 1 more run(s) not shown (--limit 2 lists all 2)"
    assert main(["runs", "--db", str(db), "--model", "alexnet", "--format", "json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert [run["run_id"] for run in said["runs"]] == ["20261122T130000Z-00000003"] and said["stored"] == 1


def test_a_filter_that_matches_nothing_says_what_it_was_given(db, capsys) -> None:
    assert main(["runs", "--db", str(db), "--model", "vgg'16", "--status", "failed"]) == 0
    assert capsys.readouterr().out == f"no runs in {db} with model \"vgg'16\" and status 'failed'\n"
    assert main(["runs", "--db", str(db), "--status", "done"]) == 2  # a status no run has: a usage error
    assert "invalid choice: 'done'" in capsys.readouterr().err


def test_the_statuses_offered_are_a_result_files_and_other_columns_refused(db) -> None:
    assert STATUSES == RUN_STATUSES
    with pytest.raises(UsageError, match="runs are listed by model, instance, status, not by 'batch_size'"):
        run_rows(db, matching={"batch_size": "8"})
