"""A full file system loses no measurement: one line says what could not be written, where the run is kept
and how to store it later; never a traceback. The file system is a small tmpfs filled to the brim (root).

What is checked is the saving of a measured run, not the measuring: a real launch is measured once
(tests/conftest.py's `measured_launch`) and each `stash profile` below replays that launch's outcome (the
engine's run_phase) and goes through everything after it as a measured profile does: breakdown, result file,
database."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from result_docs import result_doc
from support import ONE_RUN, REPO, fill, mounted_tmpfs, one_line_error, replay_launches, stash_main

from stash_core.api.profile_flow import save_result

pytestmark = pytest.mark.launches  # measured_launch starts real measuring processes

TMPFS_SIZE = "16m"


@pytest.fixture
def tmpfs(tmp_path):
    """A directory on a small tmpfs; unmounted afterwards, whatever the test did."""
    with mounted_tmpfs(tmp_path / "full", TMPFS_SIZE) as target:
        yield target


@pytest.fixture
def full_disk(tmpfs):
    """A directory on a tmpfs with no space left."""
    fill(tmpfs)
    return tmpfs


PROFILE = [*ONE_RUN, "--max-phase-seconds", "10", "--progress", "none"]  # what measured_launch measured


def profile(*args: str, tmp: Path, launches: list[dict], monkeypatch, fills: Path | None = None):
    """`stash profile` (main() in this process) whose launch gives the measured outcome again; with `fills`,
    that folder's disk fills while it measures (a disk full from the start is refused before measuring)."""
    replay_launches(monkeypatch, launches)
    if fills is not None:
        from stash_core.engine import profiler

        replayed = profiler.run_phase

        def filling(*args, **kwargs):
            fill(fills)
            return replayed(*args, **kwargs)

        monkeypatch.setattr(profiler, "run_phase", filling)
    return stash_main("profile", *PROFILE, *args, env_extra={"STASH_CACHE_DIR": str(tmp / "cache")}, cwd=tmp)


def test_a_disk_full_from_the_start_is_refused_before_anything_is_measured(
    full_disk, tmp_path, measured_launch, monkeypatch
):
    result = profile("--db", str(full_disk / "r.duckdb"), tmp=tmp_path, launches=[], monkeypatch=monkeypatch)
    assert result.returncode == 1  # the machine's state, not the input's; no launch was replayed: none asked
    assert "MiB free: a profile's result and its rows need at least 8 MiB" in one_line_error(result)
    assert [path.name for path in full_disk.iterdir()] == ["filler"]


def test_a_database_on_a_full_disk_keeps_the_run_in_its_file_with_how_to_store_it(
    tmpfs, tmp_path, measured_launch, monkeypatch
):
    full_disk = tmpfs
    out, db = tmp_path / "run.json", full_disk / "r.duckdb"
    result = profile("--out", str(out), "--db", str(db), tmp=tmp_path, launches=measured_launch,
                     monkeypatch=monkeypatch, fills=full_disk)  # fmt: skip
    assert result.returncode == 1
    line = one_line_error(result)
    doc = json.loads(out.read_text())
    assert doc["status"] == "completed" and doc["run_id"] in line
    assert str(out) in line and f"stash ingest {out}" in line and "No space left" in line
    assert "compute" in result.stdout  # the breakdown is still shown
    assert not db.exists()  # no empty database left behind on the full disk
    # Once there is room, the ingest the message names stores it.
    (full_disk / "filler").unlink()
    again = stash_main("ingest", str(out), "--db", str(db))
    assert again.returncode == 0, again.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT run_id, status FROM runs").fetchall() == [(doc["run_id"], "completed")]


def test_a_result_file_on_a_full_disk_is_named_and_the_run_stored_in_the_database(
    tmpfs, tmp_path, measured_launch, monkeypatch
):
    full_disk = tmpfs
    out, db = full_disk / "run.json", tmp_path / "r.duckdb"
    result = profile("--out", str(out), "--db", str(db), tmp=tmp_path, launches=measured_launch,
                     monkeypatch=monkeypatch, fills=full_disk)  # fmt: skip
    assert result.returncode == 1
    line = one_line_error(result)
    assert f"cannot write result file {out}" in line and "No space left" in line and str(db) in line
    assert not out.exists() and not [path for path in full_disk.iterdir() if path.name != "filler"]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("completed",)]


def test_nothing_writable_says_the_run_could_not_be_saved(full_disk):
    doc = result_doc("resnet18", run_id="lost-run", samples=True, telemetry=True)
    out_path, interrupted, problem, in_database = save_result(
        doc, full_disk / "run.json", False, full_disk / "r.duckdb"
    )
    assert out_path is None and interrupted == [] and not in_database
    assert problem.startswith("run lost-run could not be saved: cannot write result file")
    assert "\n" not in problem and str(full_disk / "r.duckdb") in problem


def test_a_database_with_room_for_the_file_only_is_left_as_it_was(full_disk, tmp_path):
    # The database exists and has its schema; the disk fills up before a run is stored: the insert fails,
    # the transaction leaves the database as it was, and the file keeps the run.
    db = full_disk / "r.duckdb"
    (full_disk / "filler").unlink()
    examples = sorted((REPO / "examples" / "results").glob("*.json"))
    assert stash_main("ingest", *map(str, examples), "--db", str(db)).returncode == 0
    fill(full_disk)
    doc = result_doc("resnet18", run_id="late-run", samples=True, telemetry=True)
    out_path, _, problem, in_database = save_result(doc, tmp_path / "run.json", False, db)
    assert not in_database
    assert out_path == tmp_path / "run.json" and json.loads(out_path.read_text())["run_id"] == "late-run"
    assert problem is not None and f"stash ingest {out_path}" in problem and "\n" not in problem
    (full_disk / "filler").unlink()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE run_id = 'late-run'").fetchone()[0] == 0


def test_ingest_on_a_full_disk_says_the_disk_is_full_and_fails_as_the_machine_did(full_disk):
    db = full_disk / "r.duckdb"
    (full_disk / "filler").unlink()
    examples = sorted((REPO / "examples" / "results").glob("*.json"))
    assert stash_main("ingest", str(examples[0]), "--db", str(db)).returncode == 0
    fill(full_disk)
    result = stash_main("ingest", *map(str, examples[1:]), "--db", str(db))
    assert result.returncode == 1  # the machine's failure, not a bad input (2)
    line = one_line_error(result)
    assert "the disk holding the database is full (No space left on device)" in line
    assert "free some space and run the same command again" in line and "rollback" not in line


def test_a_result_file_in_a_virtual_file_system_is_refused_as_such_not_as_a_full_disk(
    tmp_path, measured_launch, monkeypatch
):
    """`--out /proc/x.json` said "the disk holding /proc has 0.0 MiB free"."""
    result = profile("--db", str(tmp_path / "r.duckdb"), "--out", "/proc/x.json", tmp=tmp_path, launches=[],
                     monkeypatch=monkeypatch)  # fmt: skip
    assert result.returncode == 2 and "MiB free" not in result.stderr
    assert "/proc is a virtual file system (no disk holds files there)" in one_line_error(result)
