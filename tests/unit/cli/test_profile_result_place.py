"""Where a profile's result file lands: `results/` next to the database it is stored in (not the folder the
command ran from), and the output says where both are; a new database is said to be new."""

from __future__ import annotations

from pathlib import Path

from support import SMALL, stash

QUICK = [*SMALL, "--workers", "1", "--stalls", "compute", "--iterations", "5", "--progress", "none"]


def test_the_result_file_goes_next_to_the_database_and_the_output_says_where(tmp_path: Path) -> None:
    elsewhere, home = tmp_path / "script-folder", tmp_path / "dashboard"
    elsewhere.mkdir()
    home.mkdir()
    db = home / "results.duckdb"
    done = stash("profile", *QUICK, "--db", str(db), cwd=elsewhere, timeout=300)
    assert done.returncode == 0, done.stderr
    files = list((home / "results").glob("*.json"))
    assert len(files) == 1 and not (elsewhere / "results").exists()
    assert f"saved to {files[0]} and {db}" in done.stdout
    assert f"note: {db} is a new database" in done.stdout
    again = stash("profile", *QUICK, "--db", str(db), cwd=elsewhere, timeout=300)
    assert again.returncode == 0 and "is a new database" not in again.stdout
    assert len(list((home / "results").glob("*.json"))) == 2


def test_without_db_the_database_and_its_results_are_those_of_stash_db(tmp_path: Path) -> None:
    db = tmp_path / "chosen" / "my.duckdb"
    db.parent.mkdir()
    done = stash("profile", *QUICK, cwd=tmp_path, env_extra={"STASH_DB": str(db)}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert db.exists() and len(list((db.parent / "results").glob("*.json"))) == 1
    assert not (tmp_path / "results").exists() and not (tmp_path / "results.duckdb").exists()
