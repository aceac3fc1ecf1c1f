"""Where a profile's result file lands: `results/` next to the database it is stored in (not the folder the
command ran from), and the output says where both are; a new database is said to be new. The database is
named by $STASH_DB in one profile and by --db in the next: two profiles for the module, each started by
calling main() here. What is checked is where a measured run is saved, not the measuring: both replay one real
launch (tests/conftest.py's `measured_launch`, whose worker was a real process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import ONE_RUN, replay_launches, stash_main

pytestmark = pytest.mark.launches  # measured_launch starts real measuring processes

QUICK = [*ONE_RUN, "--progress", "none"]  # what measured_launch measured


@pytest.fixture(scope="module")
def two_profiles(
    tmp_path_factory, measured_launch
) -> tuple[
    Path, Path, Path, subprocess.CompletedProcess, list[Path], subprocess.CompletedProcess, list[Path]
]:
    """A profile run from one folder with $STASH_DB naming a new database elsewhere, then one with --db."""
    tmp = tmp_path_factory.mktemp("result-place")
    elsewhere, home = tmp / "script-folder", tmp / "chosen"
    elsewhere.mkdir()
    home.mkdir()
    db = home / "my.duckdb"
    with pytest.MonkeyPatch.context() as patch:
        replay_launches(patch, measured_launch)
        first = stash_main("profile", *QUICK, cwd=elsewhere, env_extra={"STASH_DB": str(db)})
        after_first = list((home / "results").glob("*.json"))
        replay_launches(patch, measured_launch)
        second = stash_main("profile", *QUICK, "--db", str(db), cwd=elsewhere)
    after_second = sorted((home / "results").glob("*.json"), key=lambda path: path.stat().st_mtime)
    return elsewhere, home, db, first, after_first, second, after_second


def test_without_db_the_database_and_its_results_are_those_of_stash_db(two_profiles) -> None:
    elsewhere, _, db, done, files, _, _ = two_profiles
    assert done.returncode == 0, done.stderr
    assert db.exists() and len(files) == 1
    assert not (elsewhere / "results").exists() and not (elsewhere / "results.duckdb").exists()
    assert f"saved to {files[0]} and {db}" in done.stdout
    assert f"note: {db} is a new database" in done.stdout
    assert done.stdout.index(f"note: {db} does not exist yet") < done.stdout.index("saved to")  # at the start


def test_the_result_file_goes_next_to_the_database_and_the_output_says_where(two_profiles) -> None:
    elsewhere, _, db, _, _, again, files = two_profiles
    assert again.returncode == 0, again.stderr
    assert "is a new database" not in again.stdout
    assert len(files) == 2 and not (elsewhere / "results").exists()
    assert f"saved to {files[-1]} and {db}" in again.stdout
