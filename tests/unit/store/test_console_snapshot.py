"""Console queries read a snapshot of the database: a long query never keeps a writer out, and the folders of
callers that were killed are removed by the next query."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from support import REPO

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store import connection
from stash_core.store.console import run_readonly_query
from stash_core.store.console_files import FOLDER_PREFIX, OWNER_FILE, remove_stale_folders

ENDLESS = "SELECT count(*) FROM range(1000000000000) a, range(1000) b"
EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))


def _console_workers() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "console_worker" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            pass
    return found


def test_an_ingest_succeeds_within_2_s_while_a_60_s_console_query_runs(tmp_path, monkeypatch):
    db = tmp_path / "results.duckdb"
    store.ingest_files(db, [EXAMPLES[0]])
    outcome: dict[str, BaseException] = {}

    def query() -> None:
        try:
            run_readonly_query(db, ENDLESS, timeout_s=60.0)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=query, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not _console_workers() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3.0)  # the worker has opened its database and is counting
    assert thread.is_alive() and _console_workers()
    # A writer that waited for the console would give up after these 2 s with "locked by another process".
    monkeypatch.setattr(connection, "LOCK_TIMEOUT_S", 2.0)
    started = time.monotonic()
    stored = store.ingest_files(db, [EXAMPLES[1]])
    print(f"ingest during a console query: {time.monotonic() - started:.2f} s")
    assert [inserted for _, _, inserted in stored] == [True]
    assert thread.is_alive()  # the query was still running all along
    for worker in _console_workers():
        worker.kill()
    thread.join(timeout=30)
    assert isinstance(outcome.get("error"), UsageError)  # ended early: "the console's process ended"
    assert run_readonly_query(db, "SELECT count(*) AS n FROM runs").frame["n"].tolist() == [2]


def test_a_query_leaves_no_snapshot_and_no_folder_behind(tmp_path, tmp_path_factory, monkeypatch):
    # a temporary directory of the test's own: a query of another test process at the same time makes its
    # folder in the shared one
    scratch = tmp_path_factory.mktemp("scratch")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    db = tmp_path / "results.duckdb"
    store.ingest_files(db, EXAMPLES[:2])
    assert len(run_readonly_query(db, "SELECT run_id FROM runs").frame) == 2
    assert list(scratch.glob(FOLDER_PREFIX + "*")) == []
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith("-waiting")) == [
        "results.duckdb"
    ]


def _owner_pid(folder: Path) -> int | None:
    try:
        return int((folder / OWNER_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def test_the_folder_of_a_killed_caller_is_removed_by_the_next_query(tmp_path):
    db = tmp_path / "results.duckdb"
    store.ingest_files(db, [EXAMPLES[0]])
    code = (
        "import sys; from stash_core.store.console import run_readonly_query\n"
        f"run_readonly_query({str(db)!r}, {ENDLESS!r}, timeout_s=60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = set(Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"))
    caller = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 60
    made: set[Path] = set()
    while time.monotonic() < deadline and not made:
        # the caller's own folder: another process's query (a test beside this one) may make one meanwhile
        folders = Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*")
        made = {folder for folder in folders if _owner_pid(folder) == caller.pid}
        made -= before
        time.sleep(0.1)
    assert made, "the caller made no console folder"
    time.sleep(1.0)
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    assert all(folder.exists() for folder in made)  # SIGKILL gives no chance to clean up
    remove_stale_folders()
    assert not any(folder.exists() for folder in made)


def test_a_folder_of_a_live_owner_is_kept(tmp_path):
    folder = tmp_path / (FOLDER_PREFIX + "live")
    folder.mkdir()
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {psutil.Process().create_time()}\n")
    dead = tmp_path / (FOLDER_PREFIX + "dead")
    dead.mkdir()
    (dead / OWNER_FILE).write_text("999999999 1.0\n")
    assert remove_stale_folders(tmp_path) == 1
    assert folder.exists() and not dead.exists()


@pytest.mark.parametrize("content", [b"", b"garbage that is no database at all"])
def test_a_bad_database_is_refused_before_a_snapshot(tmp_path, content):
    db = tmp_path / "results.duckdb"
    db.write_bytes(content)
    with pytest.raises(UsageError):
        run_readonly_query(db, "SELECT 1")
