"""`stash show` and `stash whatif` of a run id: a database that does not exist is said to be missing (a
mistyped --db), not as a run that is not there. `stash runs` writes a missing value as the others do."""

from __future__ import annotations

import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.cli.main import main


@pytest.mark.parametrize("command", [["show", "9a6e"], ["whatif", "9a6e"]])
def test_a_run_asked_of_a_database_that_does_not_exist_names_the_database(tmp_path, capsys, command) -> None:
    missing = tmp_path / "nonexist.duckdb"
    assert main([*command, "--db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no database {missing} (check --db or $STASH_DB)" in err and len(err.splitlines()) == 1
    assert not missing.exists()


def test_runs_writes_a_missing_value_as_a_dash(tmp_path, capsys) -> None:
    db = tmp_path / "r.duckdb"
    doc = result_doc(run_id="20261122T110600Z-2904421d", instance=None)
    doc["breakdown"]["epoch_s"] = None  # no epoch: a synthetic-data run
    for stall in doc["breakdown"]["stalls"].values():
        stall["epoch_s"] = None
    store.ingest_result(db, doc)
    assert main(["runs", "--db", str(db)]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    values = row.split()
    values[1:3] = [" ".join(values[1:3])]  # started_at: a date and a time
    cells = dict(zip(header.split(), values, strict=True))
    assert cells["instance"] == "-" and cells["epoch_s"] == "-" and "None" not in row


def test_show_under_an_ascii_locale_writes_what_it_cannot_encode_as_an_escape(tmp_path) -> None:
    """LC_ALL=C with UTF-8 mode off: stdout is ASCII, and the breakdown's ± was a UnicodeEncodeError
    traceback; the command now ends normally, the character written as \\xb1."""
    import os
    import subprocess
    import sys

    from support import REPO

    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc(run_id="20261122T110600Z-2904421d"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C", "PYTHONUTF8": "0"}
    env.pop("PYTHONIOENCODING", None)
    done = subprocess.run(
        [sys.executable, "-m", "stash_core", "show", "2904421d", "--db", str(db)],
        capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert b"\\xb1" in done.stdout and done.stdout.isascii()
