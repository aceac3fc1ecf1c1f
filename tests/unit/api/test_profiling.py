"""stash_core.profile() is `stash profile`: one tiny profile through each (real launches, a real DuckDB file)
stores the same kind of rows; a bad input is refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from support import REPO, stash_main

import stash_core as stash
from stash_core import store
from stash_core.api.profile_flow import ProfileRun
from stash_core.api.profiling import _raise_early_end
from stash_core.engine import jobs
from stash_core.errors import MeasurementError

TINY = {"model": "resnet10", "batch_size": 8, "input_shape": (3, 32, 32), "workers": 2,
        "max_phase_seconds": 4, "launches": 1}  # fmt: skip
TINY_ARGV = ["--model", "resnet10", "--batch-size", "8", "--input-shape", "3,32,32", "--workers", "2",
             "--max-phase-seconds", "4", "--launches", "1"]  # fmt: skip
SAME_IN_BOTH = ["status", "model", "model_kind", "batch_size", "workers_per_node", "nodes", "device",
                "backend", "reference_phase", "dataset", "iterations_per_epoch"]  # fmt: skip


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> tuple[stash.Result, Path, Path]:
    """The same tiny profile from Python and from the command line, each into a database (and folder) of its
    own: its result files and its registry beside it."""
    api_db = tmp_path_factory.mktemp("api") / "api.duckdb"
    cli_db = tmp_path_factory.mktemp("cli") / "cli.duckdb"
    result = stash.profile(**TINY, db=api_db, progress="none")
    done = stash_main("profile", *TINY_ARGV, "--db", str(cli_db), cwd=cli_db.parent)
    assert done.returncode == 0, done.stderr
    return result, api_db, cli_db


@pytest.mark.launches
@pytest.mark.slow
def test_the_api_stores_the_rows_the_command_stores(profiled):
    result, api_db, cli_db = profiled
    from_api, from_cli = stash.runs(api_db), stash.runs(cli_db)
    assert len(from_api) == len(from_cli) == 1
    pd.testing.assert_series_equal(from_api.dtypes, from_cli.dtypes)  # the same columns, the same types
    assert from_api.iloc[0][SAME_IN_BOTH].to_dict() == from_cli.iloc[0][SAME_IN_BOTH].to_dict()
    api_stalls = stash.breakdown(result.run_id, api_db)
    cli_stalls = stash.breakdown(from_cli.iloc[0]["run_id"], cli_db)
    # The same stalls measured (a noisy one may be clamped to zero in one run and not the other).
    assert list(api_stalls["stall"]) == list(cli_stalls["stall"])
    assert list(api_stalls["status"] != "not_measured") == list(cli_stalls["status"] != "not_measured")
    api_spec, cli_spec = (store.get_run(db, run)["spec"] for db, run in
                          ((api_db, result.run_id), (cli_db, from_cli.iloc[0]["run_id"])))  # fmt: skip
    assert api_spec == cli_spec  # the same options made the same spec


@pytest.mark.launches
@pytest.mark.slow
def test_the_result_is_its_file_and_its_stored_run(profiled):
    result, api_db, _ = profiled
    assert result.status == "completed" and result.error is None and result.iteration_s > 0
    assert result.db == api_db and result.result_file == api_db.parent / "results" / f"{result.run_id}.json"
    assert stash.load_result(result.result_file).to_dict() == json.loads(result.result_file.read_text())
    stored = stash.breakdown(result.run_id, api_db)
    pd.testing.assert_frame_equal(result.to_frame(), stored, check_dtype=False)
    assert result.spec["workers_per_node"] == 2 and result.spec["input_shape"] == [3, 32, 32]


@pytest.mark.launches
@pytest.mark.slow
def test_the_dashboard_follows_a_profile_from_python(profiled):
    result, api_db, _ = profiled
    (job,) = jobs.list_jobs(api_db)
    assert job.origin == "python" and job.status == "completed" and job.run_id == result.run_id
    assert job.argv[:2] == ["stash", "profile"] and "--model=resnet10" in job.argv


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**TINY, "workers": 0}, "profile: argument workers: "),
        ({**TINY, "batch_sise": 8}, "unknown option 'batch_sise'"),
        ({**TINY, "progress": "loud"}, "argument progress: invalid choice: 'loud'"),
        ({key: value for key, value in TINY.items() if key != "batch_size"}, "batch_size is required"),
    ],
    ids=["workers", "unknown", "progress", "no-batch"],
)
def test_a_bad_input_is_refused_before_anything_runs(options, message, tmp_path):
    with pytest.raises(stash.UsageError, match=message):
        stash.profile(**options, db=tmp_path / "x.duckdb")
    assert list(tmp_path.iterdir()) == []  # no database, no result file, no job folder


@pytest.mark.parametrize("from_environment", [False, True], ids=["db", "STASH_DB"])
def test_a_database_refused_is_named_once_by_where_it_came_from(from_environment, tmp_path, monkeypatch):
    folder = tmp_path / "a folder"
    folder.mkdir()
    monkeypatch.delenv("STASH_DB", raising=False)
    if from_environment:
        monkeypatch.setenv("STASH_DB", str(folder))
    with pytest.raises(stash.UsageError) as refused:
        stash.profile(**TINY, **({} if from_environment else {"db": folder}))
    named = "$STASH_DB" if from_environment else "db"  # never "database x: database x is ..."
    assert str(refused.value) == f"{named}: database {folder} is a directory, not a DuckDB file"
    assert list(tmp_path.iterdir()) == [folder] and not any(folder.iterdir())


def test_a_database_the_caller_holds_open_is_refused_before_anything_runs(tmp_path):
    import duckdb

    db = tmp_path / "nb.duckdb"
    example = REPO / "examples" / "results" / "resnet10-b8-2workers-vm-2vcpu.json"
    store.ingest_result(db, json.loads(example.read_text()))
    mine = duckdb.connect(str(db), read_only=True)  # a notebook's, as docs/database.md shows
    try:
        with pytest.raises(stash.UsageError, match=r"^db: database .* is open in this process"):
            stash.profile(**TINY, db=db)
    finally:
        mine.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["nb.duckdb"]  # no result file, no job folder


@pytest.mark.parametrize(
    ("call", "message"),
    [(lambda db: stash.profile_script("train.py", script_args=["--steps", "5"], db=db),
      "profile_script: give script_args as the arguments after the script"),
     (lambda db: stash.profile_script(db=db), "script: a value is required, got None"),
     # profile()'s own checks were worded as profile()'s
     (lambda db: stash.profile_script("train.py", bogus=1, db=db),
      "^profile_script: unknown option 'bogus'"),
     (lambda db: stash.profile_script(script="train.py", bogus=1, db=db),
      "^profile_script: unknown option 'bogus'"),  # script= is the script, as the first argument is
     (lambda db: stash.profile_script("a.py", script="b.py", db=db),
      "^profile_script: give the script once, as its first argument or as script="),
     (lambda db: stash.profile(None, 3, db=db), "profile: too many positional arguments"),
     # str(None) was the script: a file named "None" in the working folder would have been profiled
     (lambda db: stash.profile_script(None, db=db), "script: a value is required, got None"),
     (lambda db: stash.profile_script(123, db=db), "script: expected a path, got 123"),
     # each argument was made text: a list or None went to the script as "['--epochs', '1']" or "None"
     (lambda db: stash.profile_script("train.py", ["--epochs", "1"], db=db), "script_args must be text"),
     (lambda db: stash.profile_script("train.py", "--epochs", None, db=db), "script_args must be text")],
    ids=["script-args", "no-script", "unknown", "unknown-by-keyword", "script-twice", "extra", "none",
         "number", "list-argument", "none-argument"],
)  # fmt: skip
def test_a_wrong_argument_is_a_usage_error_not_a_type_error(call, message, tmp_path):
    with pytest.raises(stash.UsageError, match=message):
        call(tmp_path / "x.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_a_path_among_a_scripts_arguments_is_its_text(tmp_path, monkeypatch):
    from pathlib import Path

    from stash_core.api import profiling

    given = {}
    monkeypatch.setattr(profiling, "profile", lambda **options: given.update(options))
    stash.profile_script("train.py", "--data", Path("/data/set"), db=tmp_path / "x.duckdb")
    assert given["script_args"] == ["--data", "/data/set"]


def test_a_failed_profile_raises_with_where_it_is_saved_and_a_lost_copy_warns(tmp_path):
    out, db = tmp_path / "r1.json", tmp_path / "x.duckdb"
    error = MeasurementError("R1 died")
    failed = ProfileRun({"run_id": "r1", "status": "failed"}, out, db, True, False, error)
    with pytest.raises(MeasurementError, match="R1 died") as raised:
        _raise_early_end(failed)
    assert raised.value.__notes__ == [f"saved the failed run r1 to {out} and {db}"]
    problem = "cannot write result file: disk full; run r2 is stored in x.duckdb"
    kept = ProfileRun({"run_id": "r2", "status": "completed"}, None, db, True, False, problem=problem)
    with pytest.warns(RuntimeWarning, match="run r2 is stored in x.duckdb"):
        _raise_early_end(kept)


@pytest.mark.launches
def test_the_result_file_has_the_declared_shape(profiled):
    from stash_core.results.document import Breakdown, Phase, ResultDocument, Stall

    doc = json.loads(profiled[0].result_file.read_text())
    assert set(doc) <= set(ResultDocument.__annotations__), set(doc) - set(ResultDocument.__annotations__)
    for phase in doc["phases"]:
        assert set(phase) <= set(Phase.__annotations__), set(phase) - set(Phase.__annotations__)
    assert set(doc["breakdown"]) <= set(Breakdown.__annotations__)
    for stall in doc["breakdown"]["stalls"].values():
        assert set(stall) <= set(Stall.__annotations__), set(stall) - set(Stall.__annotations__)


@pytest.mark.parametrize("lost", ["database", "file"])
def test_the_result_names_a_database_only_when_it_holds_the_run(lost, tmp_path, monkeypatch):
    from stash_core.api import profile_flow
    from stash_core.errors import UsageError

    example = json.loads((REPO / "examples" / "results" / "resnet10-b8-2workers-vm-2vcpu.json").read_text())
    monkeypatch.setattr(profile_flow, "run_profile", lambda *args: example)

    def refused(*args, **kwargs):
        raise UsageError(f"cannot write {lost}")

    if lost == "database":  # a database locked by another program, say
        monkeypatch.setattr(profile_flow.store, "ingest_result", refused)
    else:
        monkeypatch.setattr(profile_flow, "write_result_atomic", refused)
    db = tmp_path / "x.duckdb"
    with pytest.warns(RuntimeWarning, match=f"cannot write {lost}") as warned:
        result = stash.profile(**TINY, db=db, progress="none")
    assert warned[0].filename == __file__  # the caller's line, not one of Stash's
    assert result.save_problem is not None
    assert result.db == (None if lost == "database" else db)
    (job,) = jobs.list_jobs(db)
    assert job.stored == (lost == "file")


@pytest.mark.parametrize("progress", ["none", "json"])
def test_progress_none_prints_nothing_not_even_the_new_database_note(progress, tmp_path, monkeypatch, capfd):
    from stash_core.api import profile_flow

    example = json.loads((REPO / "examples" / "results" / "resnet10-b8-2workers-vm-2vcpu.json").read_text())
    monkeypatch.setattr(profile_flow, "run_profile", lambda *args: example)
    result = stash.profile(**TINY, db=tmp_path / "new.duckdb", progress=progress)
    assert result.db == tmp_path / "new.duckdb"
    err = capfd.readouterr().err
    assert ("starts a new database" in err) == (progress != "none"), err


def test_a_refused_data_set_leaves_nothing_behind(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    db = tmp_path / "new" / "stash.duckdb"  # a folder that does not exist yet
    with pytest.raises(stash.UsageError, match="has no class folders"):
        stash.profile(**TINY, dataset=empty, db=db, progress="none")
    assert not db.parent.exists()  # no database folder, no job folder in it
    db.parent.mkdir()
    with pytest.raises(stash.UsageError, match="has no class folders"):
        stash.profile(**TINY, dataset=empty, db=db, progress="none")
    assert list(db.parent.iterdir()) == []  # a folder that was there stays, empty as it was
