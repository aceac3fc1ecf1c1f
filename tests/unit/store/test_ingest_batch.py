"""A batch of files where some cannot be stored (skip_bad), and one stopped by a signal inside a query."""

from __future__ import annotations

import json
import signal

import duckdb
import pytest

from stash_core import store
from stash_core.cli.main import main
from stash_core.errors import UsageError
from stash_core.exits import run_command
from stash_core.results.file import write_result_atomic
from stash_core.store import ingest as ingest_module
from stash_core.store.ingest_said import NothingStored


def _files(tmp_path, result_doc, serials=(1, 2, 3)):
    paths = []
    for serial in serials:
        path = tmp_path / f"r{serial}.json"
        write_result_atomic(path, result_doc(run_id=f"20261122T100000Z-0000000{serial}"))
        paths.append(path)
    return paths


def test_skip_bad_stores_the_good_files_and_names_each_bad_one(db_path, result_doc, tmp_path) -> None:
    good = _files(tmp_path, result_doc)
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    export_row = tmp_path / "instances.json"  # a table's row of `stash export --format json`
    export_row.write_text(json.dumps({"name": "x", "accelerator": None, "accelerator_count": 0, "vcpus": 2}))
    refused = []
    given = [good[0], broken, good[1], export_row, good[2]]
    outcomes = store.ingest_files(db_path, given, skip_bad=lambda path, why: refused.append((path, why)))
    assert [path for path, _, _ in outcomes] == good
    assert len(store.list_runs(db_path)) == 3
    assert [path for path, _ in refused] == [broken, export_row]
    assert refused[0][1].startswith(f"{broken}: ") and "not valid JSON" in refused[0][1]


def test_skip_bad_leaves_out_a_file_in_conflict_with_a_stored_run(db_path, result_doc, tmp_path) -> None:
    first, second = _files(tmp_path, result_doc, (1, 2))
    store.ingest_files(db_path, [first])
    changed = result_doc(run_id="20261122T100000Z-00000001")
    changed["error"] = "another run's words"
    other = write_result_atomic(tmp_path / "other.json", changed)
    with pytest.raises(UsageError, match="nothing stored: every file is checked before any is stored"):
        store.ingest_files(db_path, [second, other])
    refused = []
    outcomes = store.ingest_files(db_path, [second, other], skip_bad=lambda p, why: refused.append(why))
    assert [path for path, _, _ in outcomes] == [second]
    assert len(refused) == 1 and refused[0].startswith(f"{other}: run 20261122T100000Z-00000001")


def test_a_stop_signal_inside_a_query_still_says_what_was_stored(
    db_path, result_doc, tmp_path, monkeypatch, capsys
) -> None:
    """SIGTERM while DuckDB ran a query surfaced as its "Query interrupted", said as "terminated (SIGTERM)"
    alone though 188 runs of 400 were stored."""
    paths = _files(tmp_path, result_doc)
    real_insert = ingest_module._insert

    def third_is_stopped_inside_duckdb(con, run):
        if run.run_id.endswith("3"):
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
        return real_insert(con, run)

    monkeypatch.setattr(ingest_module, "_insert", third_is_stopped_inside_duckdb)
    answers = iter([None])  # none before the ingest began, SIGTERM since
    monkeypatch.setattr(ingest_module, "received_stop", lambda: next(answers, signal.SIGTERM))
    assert run_command(lambda: store.ingest_files(db_path, paths)) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert err.startswith("stash: 2 of the 3 files were stored before it (") and "perhaps" in err
    assert err.endswith("stash: terminated (SIGTERM)\n")


def test_stash_ingest_skip_bad_exits_1_naming_the_files_not_stored(result_doc, tmp_path, capsys) -> None:
    good = _files(tmp_path, result_doc, (1, 2))
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    db = tmp_path / "new" / "r.duckdb"
    assert main(["ingest", str(good[0]), str(broken), str(good[1]), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "so the 2 others were not stored either (--skip-bad stores them and names those it cannot)" in err
    assert not db.exists()
    assert main(["ingest", "--skip-bad", str(good[0]), str(broken), str(good[1]), "--db", str(db)]) == 1
    out, err = capsys.readouterr()
    assert out.count("stored  ") == 2 and f"note: {db} did not exist: it is a new database" in out
    assert err.startswith(f"stash: not stored: {broken}: ")
    assert err.endswith("stash: 1 of the 3 files not stored (named above)\n")
    assert main(["ingest", str(good[0]), "--db", str(db)]) == 0
    assert "new database" not in capsys.readouterr().out  # it exists now


def test_skip_bad_leaves_out_the_later_of_two_files_giving_one_run_other_content(
    db_path, result_doc, tmp_path, capsys
) -> None:
    """--skip-bad still refused the whole batch, and told to add --skip-bad."""
    first, second = _files(tmp_path, result_doc, (1, 2))
    changed = result_doc(run_id="20261122T100000Z-00000001")
    changed["error"] = "another run's words"
    twin = write_result_atomic(tmp_path / "twin.json", changed)
    refused = []
    outcomes = store.ingest_files(db_path, [first, twin, second], skip_bad=lambda p, why: refused.append(why))
    assert [path for path, _, _ in outcomes] == [first, second]
    assert len(refused) == 1 and refused[0].startswith(f"{twin}: run 20261122T100000Z-00000001 is also in")
    db = tmp_path / "other.duckdb"
    assert main(["ingest", "--skip-bad", str(first), str(twin), "--db", str(db)]) == 1
    assert "--skip-bad stores them" not in capsys.readouterr().err


def test_a_failure_after_a_stop_handled_earlier_is_not_said_as_that_stop(
    db_path, result_doc, tmp_path, monkeypatch
) -> None:
    """A stop this process handled before the ingest began (an API user's) turned a later full disk into
    "terminated"."""
    from stash_core.errors import StashError

    paths = _files(tmp_path, result_doc)
    real_insert = ingest_module._insert

    def third_fails(con, run):
        if run.run_id.endswith("3"):
            raise StashError("cannot store run x: the disk holding the database is full")
        return real_insert(con, run)

    monkeypatch.setattr(ingest_module, "_insert", third_fails)
    monkeypatch.setattr(ingest_module, "received_stop", lambda: signal.SIGTERM)  # from before this ingest
    said = "the disk holding the database is full; 2 of the 3 files were stored"
    with pytest.raises(StashError, match=said):
        store.ingest_files(db_path, paths)


def test_stash_ingest_names_every_bad_file_not_only_the_first(result_doc, tmp_path, capsys) -> None:
    """A folder with two bad files named only the first: the user met the second one rerun later."""
    good = _files(tmp_path, result_doc, (1,))
    broken, truncated = tmp_path / "broken.json", tmp_path / "truncated.json"
    broken.write_text("{ not json")
    truncated.write_text('{"run_id": "r')
    db = tmp_path / "r.duckdb"
    assert main(["ingest", str(broken), str(good[0]), str(truncated), "--db", str(db)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3  # each bad file in the order given, then what it meant
    assert lines[0].startswith(f"stash: cannot be stored: {broken}: not valid JSON")
    assert lines[1].startswith(f"stash: cannot be stored: {truncated}: not valid JSON")
    assert lines[2] == ("stash: 2 of the 3 files cannot be stored (named above): nothing stored (--skip-bad "
                        "stores the others)")  # fmt: skip
    assert not db.exists()
    assert main(["ingest", str(broken), str(truncated), "--db", str(db)]) == 2  # no others to store
    assert capsys.readouterr().err.splitlines()[-1] == ("stash: 2 of the 2 files cannot be stored (named "
                                                        "above): nothing stored")  # fmt: skip
    with pytest.raises(NothingStored, match="; 1 more file[(]s[)] cannot be stored either") as refused:
        store.ingest_files(db, [broken, truncated])
    assert [why.split(":")[0] for why in refused.value.reasons] == [str(broken), str(truncated)]
