"""A CSV output replaces only an earlier CSV of its kind: a mistyped --jobs-csv, --csv or --loss-csv that
names a database, a result file or a workload is refused before any work, the file left as it was."""

from __future__ import annotations

import json

import pytest

from stash_core import simulate_schedule
from stash_core.cli.main import main
from stash_core.csv_outputs import check_csv_replaceable
from stash_core.errors import UsageError
from stash_core.store import connect

SCHEDULE = ["schedule", "--synthetic-jobs", "5", "--policies", "fifo"]
RECOMMEND = ["recommend", "--model", "resnet18", "--batch-size", "32", "--epochs", "1", "--dataset-images",
             "10000", "--budget-hours", "10"]  # fmt: skip


def a_database(path):
    with connect(path) as con:
        con.execute("CREATE TABLE kept (x INTEGER)")
    return path.read_bytes()


def test_only_an_earlier_csv_of_the_kind_or_an_empty_file_may_be_replaced(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "old.csv").write_text("\ufeffpolicy,job_id,gpus,submit_s\nfifo,1,2,0\n")
    for name in ("empty.csv", "old.csv", "missing.csv"):
        check_csv_replaceable(tmp_path / name, "--jobs-csv", "a per-job CSV", "policy,job_id,gpus,")
    (tmp_path / "other.csv").write_text("iteration,loss\n1,2\n")
    with pytest.raises(UsageError, match=r"^--jobs-csv \S+other.csv holds a file that is not a per-job CSV;"):
        check_csv_replaceable(tmp_path / "other.csv", "--jobs-csv", "a per-job CSV", "policy,job_id,gpus,")


def test_a_schedule_keeps_a_database_named_as_its_jobs_csv(tmp_path, capsys):
    victim = tmp_path / "victim.duckdb"
    before = a_database(victim)
    db = str(tmp_path / "s.duckdb")
    status = main([*SCHEDULE, "--jobs-csv", str(victim), "--db", db])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(f"stash: --jobs-csv {victim} holds a file that is not a per-job")
    assert victim.read_bytes() == before and not (tmp_path / "s.duckdb").exists()

    jobs = tmp_path / "jobs.csv"  # a rerun replaces its own CSV
    assert main([*SCHEDULE, "--jobs-csv", str(jobs), "--db", db]) == 0
    assert main([*SCHEDULE, "--jobs-csv", str(jobs), "--db", db]) == 0
    assert jobs.read_text().startswith("policy,job_id,gpus,")


def test_the_python_api_keeps_a_workload_named_as_its_jobs_csv(tmp_path):
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"g": [1, 2, 3, 4, 5]}))
    with pytest.raises(UsageError, match="holds a file that is not a per-job CSV"):
        simulate_schedule(synthetic_jobs=5, policies="fifo", jobs_csv=workload, db=tmp_path / "s.duckdb")
    assert json.loads(workload.read_text()) == {"g": [1, 2, 3, 4, 5]}


def test_recommend_keeps_a_result_file_named_as_its_csv(tmp_path, capsys):
    result = tmp_path / "run.json"
    result.write_text('{"kind": "stash-result", "run_id": "r1"}')
    status = main([*RECOMMEND, "--csv", str(result), "--db", str(tmp_path / "r.duckdb")])
    assert status == 2 and "holds a file that is not a CSV of configurations" in capsys.readouterr().err
    assert result.read_text() == '{"kind": "stash-result", "run_id": "r1"}'
    table = tmp_path / "options.csv"
    assert main([*RECOMMEND, "--csv", str(table), "--db", str(tmp_path / "r.duckdb")]) in (0, 1)
    assert main([*RECOMMEND, "--csv", str(table), "--db", str(tmp_path / "r.duckdb")]) in (0, 1)
    capsys.readouterr()
    assert table.read_text().startswith("config,instance,")


def test_spot_profile_keeps_a_file_named_as_its_loss_csv_before_measuring(tmp_path, capsys):
    victim = tmp_path / "notes.txt"
    victim.write_text("my notes\n")
    status = main(["spot-profile", "--model", "resnet10", "--workers", "1,2,3", "--duration-s", "1",
                   "--workload", str(tmp_path / "w.json"), "--loss-csv", str(victim),
                   "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    assert status == 2 and "--loss-csv" in capsys.readouterr().err and victim.read_text() == "my notes\n"
    assert not (tmp_path / "w.json").exists()


@pytest.mark.parametrize("trace", [".", "/"])
def test_a_trace_that_is_a_folder_without_a_name_is_one_line(tmp_path, capsys, trace):
    status = main(["schedule", "--trace", trace, "--db", str(tmp_path / "s.duckdb")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "directory" in err and "Traceback" not in err


def test_a_csv_in_a_folder_that_does_not_exist_is_refused_and_no_folder_made(tmp_path, capsys):
    """recommend --csv made a mistyped folder (and its parents) where --jobs-csv refused one."""
    missing = tmp_path / "nodir" / "deeper"
    db = ["--db", str(tmp_path / "r.duckdb")]
    assert main([*RECOMMEND, "--csv", str(missing / "x.csv"), *db]) == 2
    assert f"folder {missing} does not exist" in capsys.readouterr().err
    assert main([*SCHEDULE, "--jobs-csv", str(missing / "j.csv"), *db]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nodir").exists()
