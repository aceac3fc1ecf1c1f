"""`stash show` and `stash whatif` of a run id: a database that does not exist is said to be missing (a
mistyped --db), not as a run that is not there."""

from __future__ import annotations

import pytest

from stash_core.cli.main import main


@pytest.mark.parametrize("command", [["show", "9a6e"], ["whatif", "9a6e"]])
def test_a_run_asked_of_a_database_that_does_not_exist_names_the_database(tmp_path, capsys, command) -> None:
    missing = tmp_path / "nonexist.duckdb"
    assert main([*command, "--db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no database {missing} (check --db or $STASH_DB)" in err and len(err.splitlines()) == 1
    assert not missing.exists()
