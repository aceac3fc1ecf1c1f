"""A profile run from Python (stash_core.profile()) runs inside its caller: the dashboard's Cancel asks it to
stop instead of signalling the process, which is a notebook or a script that must go on. Real processes."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from support import processes_carrying

from stash_core.engine import jobs
from stash_core.engine.job_state import JobState

CALLER = """
import sys, time
from stash_core.engine import jobs
from stash_core.launch.local import run_local
launch = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)", sys.argv[2]]
try:
    with jobs.register_profile(sys.argv[1], ["stash", "profile"], origin="python"):
        run_local(launch, lambda line: print(line.strip(), flush=True), 300)
except KeyboardInterrupt as stop:
    print(f"raised {type(stop).__name__}: {stop}", flush=True)
print("the caller goes on", flush=True)
"""


def test_cancel_stops_only_the_profile_of_a_python_caller(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db, token = tmp_path / "results.duckdb", f"stash-test-{uuid.uuid4().hex}"
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, str(db), token], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert caller.stdout.readline().strip() == "up"  # the launch runs
        [state] = jobs.list_jobs(db)
        assert (state.origin, state.started_from, state.pid) == ("python", "Python", caller.pid)
        assert jobs.cancel_job(db, state.job_id)
        rest = caller.communicate(timeout=60)[0].splitlines()
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    # the caller raised what an interrupt raises, went on and ended by itself; its launch was ended
    assert rest == ["raised Cancelled: cancelled from the dashboard", "the caller goes on"]
    assert caller.returncode == 0 and processes_carrying(token) == []
    assert jobs.read_job(db, state.job_id).status == "cancelled"


def test_the_run_page_says_where_a_profile_was_started() -> None:
    words = [JobState(job_id="j", job_dir=Path("."), argv=[], started_at=None, pid=None, status="running",
                      origin=origin).started_from for origin in ("dashboard", "cli", "python")]  # fmt: skip
    assert words == ["the dashboard", "a terminal", "Python"]
    notes = [JobState(job_id="j", job_dir=Path("."), argv=[], started_at=None, pid=None, status="running",
                      origin=origin).started_elsewhere
             for origin in ("dashboard", "cli", "python")]  # fmt: skip
    assert notes == ["", " (started from a terminal)", " (started from Python)"]


def test_a_cancel_that_comes_after_the_last_launch_leaves_a_run_that_ended_well_as_it_ended(
    tmp_path: Path, monkeypatch
) -> None:
    """No launch is left to look at the request: the run ends well (exit 0), not said to be cancelled."""
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db = tmp_path / "results.duckdb"
    with jobs.register_profile(db, ["stash", "profile"], origin="python"):
        [state] = jobs.list_jobs(db)
        assert jobs.cancel_job(db, state.job_id)  # after the last launch: nothing raises
    ended = jobs.read_job(db, state.job_id)
    assert ended.exit_code == 0 and ended.status != "cancelled"
