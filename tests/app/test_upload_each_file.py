"""The Upload page judges every file on its own: a bad file is refused with its reason and never takes the
Store button away from the good ones."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from result_docs import result_doc, run_count
from streamlit.testing.v1 import AppTest
from support import REPO, shown

from stash_core import store, views
from stash_core.errors import UsageError

GOOD_ID = "20261122T080000Z-eeee0006"
BAD_ID = "20261122T090000Z-ffff0007"


def _open_upload() -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.run()
    app.switch_page("pages/upload.py").run()
    return app


def _good() -> bytes:
    doc = result_doc("mobilenet_v2", run_id=GOOD_ID, instance="big-vm", samples=True, telemetry=True, seed=6)
    return json.dumps(doc).encode()


def _overflowing() -> bytes:
    """A well-formed result whose iteration count no storage type holds (it used to break the whole check)."""
    doc = result_doc("resnet18", run_id=BAD_ID, samples=True, telemetry=True, seed=7)
    doc["phases"][0]["iterations"] = 2**70
    return json.dumps(doc).encode()


def _stored_ids(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {row[0] for row in con.execute("SELECT run_id FROM runs").fetchall()}


def _upload(app: AppTest, files: list[tuple[str, bytes]]) -> None:
    app.file_uploader[0].set_value([(name, data, "application/json") for name, data in files]).run()


def test_a_bad_file_beside_a_good_one_leaves_the_store_button(populated_db: Path) -> None:
    app = _open_upload()
    _upload(app, [("good.json", _good()), ("overflow.json", _overflowing()), ("deep.json", b"[" * 100_000)])
    assert not app.exception
    errors = [e.value for e in app.error]
    assert len(errors) == 2, errors
    assert any("overflow.json" in e and "refused" in e and BAD_ID in e for e in errors)
    assert any("deep.json" in e and "refused" in e for e in errors)
    assert any("good.json" in s.value for s in app.success)
    button = app.button(key="upload-store")
    assert button.label == "Store 1 new run(s) in the database" and not button.disabled
    assert run_count(populated_db) == 5

    button.click().run()
    assert not app.exception
    assert run_count(populated_db) == 6
    assert GOOD_ID in _stored_ids(populated_db) and BAD_ID not in _stored_ids(populated_db)
    said = "Stored 1 run(s) from 1 file(s); 2 refused file(s) were left out."
    assert any(said in s.value for s in app.success)


def test_a_preview_that_cannot_be_drawn_keeps_the_store_button(
    populated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("no chart today")

    monkeypatch.setattr(views.breakdown, "stall_long_frame", broken)
    app = _open_upload()
    _upload(app, [("good.json", _good())])
    assert not app.exception
    assert any("preview could not be drawn" in w.value for w in app.warning)
    app.button(key="upload-store").click().run()
    assert GOOD_ID in _stored_ids(populated_db)


def test_a_run_the_database_refuses_at_store_time_leaves_the_others_stored(
    populated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = result_doc("resnet18", run_id=BAD_ID, samples=True, telemetry=True, seed=7)
    ingest = store.ingest_result

    def refusing(db_path, doc, source_file=None):  # the database changed between the check and Store
        if Path(db_path) == populated_db and doc["run_id"] == BAD_ID:
            raise UsageError(f"run {BAD_ID} is stored with other content")
        return ingest(db_path, doc, source_file)

    monkeypatch.setattr(store, "ingest_result", refusing)
    app = _open_upload()
    _upload(app, [("other.json", json.dumps(other).encode()), ("good.json", _good())])
    app.button(key="upload-store").click().run()
    assert not app.exception
    assert _stored_ids(populated_db) >= {GOOD_ID} and BAD_ID not in _stored_ids(populated_db)
    errors = [e.value for e in app.error]
    assert any("other.json" in e and "stored with other content" in e for e in errors), errors


def test_two_files_of_one_run_with_other_content_are_told_apart_at_the_check(populated_db: Path) -> None:
    first = result_doc("resnet18", run_id=BAD_ID, seed=7)
    second = {
        **first,
        "spec": {**first["spec"], "batch_size": 32 if first["spec"]["batch_size"] != 32 else 16},
    }
    app = _open_upload()
    _upload(app, [("a.json", json.dumps(first).encode()), ("b.json", json.dumps(second).encode())])
    assert not app.exception
    refused = [shown(e.value) for e in app.error]
    assert any("b.json" in e and BAD_ID in e for e in refused), refused  # not both "can be stored"
    assert any("a.json" in shown(s.value) for s in app.success)


def test_a_store_the_database_refuses_whole_says_no_stored_count(
    populated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refusing(db_path, doc, source_file=None):
        raise UsageError("cannot create database: it is a file, not a folder")

    app = _open_upload()
    _upload(app, [("good.json", _good())])
    monkeypatch.setattr(store, "ingest_result", refusing)
    app.button(key="upload-store").click().run()
    assert not app.exception
    assert not app.success, [s.value for s in app.success]  # no "Stored 0 run(s)" beside the reason
    assert any("not a folder" in shown(e.value) for e in app.error)


def test_a_runs_table_alone_is_refused_with_one_message_and_nothing_stored(
    populated_db: Path, tmp_path: Path
) -> None:
    paths = {p.stem: p for p in store.export(populated_db, "csv", tmp_path / "export")}
    app = _open_upload()
    _upload(app, [("runs.csv", paths["runs"].read_bytes())])
    assert not app.exception
    errors = [e.value for e in app.error]
    assert len(errors) == 1 and "runs.csv" in errors[0] and "needs its phases and stalls" in errors[0], errors
    assert not [b for b in app.button if b.key == "upload-store"]
    assert any("Nothing here can be stored." in c.value for c in app.caption)


def test_an_exports_tables_stored_together_are_counted_as_the_files_they_are(
    populated_db: Path, tmp_path: Path
) -> None:
    """An export's runs, phases, stalls and iterations tables were counted as one file: 'from 1 file(s)'."""
    paths = {p.stem: p for p in store.export(populated_db, "csv", tmp_path / "export")}
    tables = ("runs", "phases", "stalls", "iterations")
    populated_db.unlink()  # the same runs into a database without them
    app = _open_upload()
    _upload(app, [(f"{name}.csv", paths[name].read_bytes()) for name in tables])
    assert not app.exception, app.exception
    app.button(key="upload-store").click().run()
    assert not app.exception
    said = [s.value for s in app.success]
    assert any("Stored 5 run(s) from 4 file(s) in a new database, " in line for line in said), said



def _leave_and_return(app: AppTest) -> None:
    app.switch_page("pages/overview.py").run()
    app.switch_page("pages/upload.py").run()


def test_files_dropped_stay_checked_after_a_visit_to_another_page_until_removed_or_stored(
    populated_db: Path,
) -> None:
    app = _open_upload()
    _upload(app, [("good.json", _good())])
    _leave_and_return(app)  # the uploader comes back empty: the page checks the files it had
    assert not app.exception
    assert any("Still checked from before you left this page: good.json" in c.value for c in app.caption)
    assert any("good.json" in s.value for s in app.success)
    assert not app.button(key="upload-store").disabled
    app.button(key="upload-store").click().run()
    assert GOOD_ID in _stored_ids(populated_db)
    _leave_and_return(app)  # stored: nothing left to check
    assert not app.exception and any("Drop files above" in info.value for info in app.info)
    # files removed by the user are not brought back either
    _upload(app, [("good.json", _good())])
    app.file_uploader[0].set_value([]).run()
    _leave_and_return(app)
    assert not any("Still checked" in c.value for c in app.caption)


def test_a_database_that_cannot_be_opened_is_said_before_any_file_is_dropped(tmp_path, monkeypatch):
    """Every other page said "cannot open database ... corrupt"; Upload offered its uploader as if the file
    were fine, and said so only once files were dropped."""
    db = tmp_path / "garbage.duckdb"
    db.write_bytes(b"this is not a database at all")
    monkeypatch.setenv("STASH_DB", str(db))
    app = _open_upload()
    assert not app.exception
    assert any("is corrupt or not a DuckDB database" in error.value for error in app.error), app.error
    assert not app.get("file_uploader") and db.read_bytes() == b"this is not a database at all"
