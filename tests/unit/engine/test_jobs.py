"""Background profile jobs: progress read back from disk, failures as one line, cancel ends every process.

A stand-in for the Python interpreter (a shell script that speaks the `stash profile --progress json`
protocol) keeps these tests fast; one test runs a real, small profile end to end.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stash_core.engine import jobs
from stash_core.engine.job_state import measuring_processes
from stash_core.engine.progress import Reporter
from stash_core.errors import UsageError

FAKE_PROFILE = r"""#!/bin/sh
# Stands in for `python -m stash_core.api.child ...`: speaks the progress protocol according to $FAKE_MODE.
echo "$@" > "$FAKE_ARGS"
phase() { echo "STASH-PHASE $1"; }
case "$FAKE_MODE" in
  ok)
    phase '{"event": "message", "text": "preparing 64 synthetic JPEG images"}'
    phase '{"event": "started", "index": 0, "total": 2, "name": "R0", "description": "1 worker"}'
    echo 'STASH-PROGRESS {"phase": "R0", "iterations": 10, "relative_ci": 0.1, "fraction_done": 0.5}'
    phase '{"event": "finished", "name": "R0", "status": "completed", "mean_s": 0.2, "ci95_s": 0.01}'
    phase '{"event": "started", "index": 1, "total": 2, "name": "R1", "description": "2 workers"}'
    while [ ! -e "$FAKE_GO" ]; do sleep 0.05; done
    echo 'STASH-PROGRESS {"phase": "R1", "iterations": 20, "kept": 18, "fraction_done": 1.0}'
    phase '{"event": "finished", "name": "R1", "status": "completed", "mean_s": 0.3, "ci95_s": 0.02}'
    echo 'STASH-DONE {"run_id": "20261122T104100Z-3f2a9c1b", "status": "completed", "error": null}'
    echo 'iteration 0.300 s'
    exit 0 ;;
  silent-ok)
    phase '{"event": "started", "index": 0, "total": 1, "name": "R0", "description": "1 worker"}'
    echo 'some output'
    exit 0 ;;
  bad-input)
    echo 'stash: --batch-size: must be a positive integer, got 0' >&2
    exit 2 ;;
  crash)
    phase '{"event": "started", "index": 0, "total": 1, "name": "R0", "description": "1 worker"}'
    echo 'Traceback (most recent call last):' >&2
    echo 'stash: phase R0 failed: worker 0 exited with code 1' >&2
    exit 1 ;;
  hang)
    phase '{"event": "started", "index": 0, "total": 1, "name": "R0", "description": "1 worker"}'
    setsid sleep 300 &
    echo $! > "$FAKE_PIDS"
    sleep 300 &
    echo $! >> "$FAKE_PIDS"
    wait ;;
esac
"""


@pytest.fixture()
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "fake-python"
    path.write_text(FAKE_PROFILE)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _start(db: Path, fake: Path, mode: str, tmp_path: Path) -> str:
    env = {
        "FAKE_MODE": mode,
        "FAKE_ARGS": str(tmp_path / "args.txt"),
        "FAKE_GO": str(tmp_path / "go"),
        "FAKE_PIDS": str(tmp_path / "pids.txt"),
    }
    args = ["--model", "resnet18", "--batch-size", "8"]
    return jobs.start_profile_job(db, args, label="test", python=str(fake), env=env)


def _wait(condition, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def test_progress_is_read_from_the_job_folder_and_the_run_completes(
    tmp_path: Path, fake_python: Path
) -> None:
    db = tmp_path / "results.duckdb"
    job_id = _start(db, fake_python, "ok", tmp_path)
    assert (jobs.jobs_dir(db) / job_id / "argv.json").is_file()
    _wait(lambda: len(jobs.read_job(db, job_id).phases) == 2)
    state = jobs.read_job(db, job_id)
    assert state.status == "running"
    assert [p.name for p in state.phases] == ["R0", "R1"]
    assert state.phases[0].status == "completed" and state.phases[1].status == "running"
    assert state.messages == ["preparing 64 synthetic JPEG images"]
    assert 0.5 <= state.fraction_done < 1.0
    # The command got the dashboard's --db and --progress json after the form's arguments.
    args = (tmp_path / "args.txt").read_text().split()
    # the profile child, not the `stash` command
    assert args[:4] == ["-P", "-m", "stash_core.api.child", "--model"]
    assert args[-4:] == ["--db", str(db.resolve()), "--progress", "json"]

    (tmp_path / "go").touch()
    state = jobs.wait_for_job(db, job_id, timeout_s=20)
    assert state.status == "completed"
    assert state.exit_code == 0
    assert state.run_id == "20261122T104100Z-3f2a9c1b"
    assert state.fraction_done == 1.0
    assert state.output_tail[-1] == "iteration 0.300 s"
    assert [job.job_id for job in jobs.list_jobs(db)] == [job_id]


def test_a_profile_that_exits_0_without_saying_what_it_saved_has_not_finished(tmp_path, fake_python):
    db = tmp_path / "results.duckdb"
    state = jobs.wait_for_job(db, _start(db, fake_python, "silent-ok", tmp_path), timeout_s=20)
    assert state.exit_code == 0 and state.run_id is None
    assert state.status == "failed"  # was "completed": the page said "Finished" above "The run failed"
    assert "exit status 0" in state.error and "no run" in state.error


def test_state_survives_a_restart_of_the_dashboard(tmp_path: Path, fake_python: Path, monkeypatch) -> None:
    db = tmp_path / "results.duckdb"
    job_id = _start(db, fake_python, "ok", tmp_path)
    _wait(lambda: len(jobs.read_job(db, job_id).phases) == 2)
    # A new dashboard process knows nothing of the child it did not start.
    from stash_core.engine import job_process

    monkeypatch.setattr(job_process, "CHILDREN", {})
    assert jobs.read_job(db, job_id).status == "running"
    (tmp_path / "go").touch()
    _wait(lambda: (jobs.jobs_dir(db) / job_id / "rc").exists())
    assert jobs.wait_for_job(db, job_id, timeout_s=20).status == "completed"


def test_bad_input_fails_with_the_commands_own_one_line_message(tmp_path: Path, fake_python: Path) -> None:
    db = tmp_path / "results.duckdb"
    state = jobs.wait_for_job(db, _start(db, fake_python, "bad-input", tmp_path), timeout_s=20)
    assert state.status == "failed"
    assert state.exit_code == 2
    assert state.error == "--batch-size: must be a positive integer, got 0"


def test_a_failed_run_reports_its_reason_not_the_traceback(tmp_path: Path, fake_python: Path) -> None:
    db = tmp_path / "results.duckdb"
    state = jobs.wait_for_job(db, _start(db, fake_python, "crash", tmp_path), timeout_s=20)
    assert state.status == "failed"
    assert state.error == "phase R0 failed: worker 0 exited with code 1"
    assert state.phases[0].status == "interrupted"


def test_cancel_ends_every_process_of_the_run(tmp_path: Path, fake_python: Path) -> None:
    db = tmp_path / "results.duckdb"
    job_id = _start(db, fake_python, "hang", tmp_path)
    pids_file = tmp_path / "pids.txt"
    _wait(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2)
    wrapper_pid = jobs.read_job(db, job_id).pid
    started = [wrapper_pid, *(int(pid) for pid in pids_file.read_text().split())]
    assert all(_alive(pid) for pid in started)
    # One of them sits in a session of its own, as the local launcher's workers do (once `setsid` has run: its
    # pid is written as soon as it is forked, and on a busy machine the call can come a moment later).
    _wait(lambda: os.getsid(started[1]) != os.getsid(wrapper_pid))

    assert jobs.cancel_job(db, job_id, grace_s=2.0) is True
    _wait(lambda: not any(_alive(pid) for pid in started), timeout_s=10)
    state = jobs.read_job(db, job_id)
    assert state.status == "cancelled"
    assert state.finished
    assert jobs.cancel_job(db, job_id) is False  # nothing left to cancel


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_dashboard_owned_flags_and_unknown_jobs_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    with pytest.raises(UsageError, match="--db"):
        jobs.start_profile_job(db, ["--model", "resnet18", "--db", "other.duckdb"])
    with pytest.raises(UsageError, match="no job"):
        jobs.read_job(db, "20990101T000000Z-abcdef")
    with pytest.raises(UsageError, match="no job"):
        jobs.read_job(db, "../../etc")
    (tmp_path / ".stash-jobs").mkdir()
    for odd in ("x" * 300, "2" * 256):  # from the Run page's address: "File name too long" was raised
        with pytest.raises(UsageError, match="no job") as refused:
            jobs.read_job(db, odd)
        assert len(str(refused.value)) < 200
    assert jobs.list_jobs(db) == []


@pytest.mark.launches
@pytest.mark.slow
def test_a_real_small_profile_runs_in_the_background_and_is_stored(tmp_path: Path) -> None:
    from stash_core import store

    db = tmp_path / "results.duckdb"
    model = Path(__file__).resolve().parents[3] / "examples" / "models" / "tiny_cnn.py"
    args = ["--model", f"{model}:make", "--input-shape", "3,32,32", "--batch-size", "8", "--workers", "1",
            "--stalls", "compute", "--iterations", "10", "--max-phase-seconds", "60",
            "--instance", "test-box"]  # fmt: skip
    job_id = jobs.start_profile_job(db, args, python=sys.executable)
    state = jobs.wait_for_job(db, job_id, timeout_s=240)
    assert state.status == "completed", (state.error, state.stderr_tail)
    assert [p.name for p in state.phases] == ["R0"] and state.phases[0].status == "completed"
    assert state.run_id and (tmp_path / state.result_file).is_file()  # results/ next to the database
    run = store.get_run(db, state.run_id)
    assert run is not None and run["instance"] == "test-box"


# ---------------------------------------------------------------------------------------------------------
# The run registry: `stash profile` started from a terminal


class _Plan:
    def __init__(self, name: str, description: str) -> None:
        self.name, self.description = name, description

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "workers": 1, "nodes": 1}


class _Collect(Reporter):
    def __init__(self) -> None:
        self.events: list[str] = []

    def phase_started(self, plan, index: int, total: int) -> None:
        self.events.append(f"started {plan.name}")

    def message(self, text: str) -> None:
        self.events.append(text)


def test_a_profile_started_from_a_terminal_shows_as_it_progresses(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db = tmp_path / "results.duckdb"
    terminal = _Collect()
    with jobs.register_profile(db, ["stash", "profile", "--model", "tiny"], label="tiny · batch 8") as record:
        reporter = record.reporter(terminal)
        reporter.message("preparing 64 synthetic JPEG images")
        reporter.phase_started(_Plan("R0", "1 worker"), 0, 2)
        reporter.progress({"phase": "R0", "iterations": 10, "kept": 8, "max_iterations": 100,
                           "target_relative_ci": 0.02, "relative_ci": 0.04})  # fmt: skip
        [state] = jobs.list_jobs(db)  # what the Run page and the Overview read, meanwhile
        assert (state.origin, state.status, state.label) == ("cli", "running", "tiny · batch 8")
        assert [phase.name for phase in state.phases] == ["R0"] and state.phases[0].fraction_done == 0.25
        assert state.pid == os.getpid() and not state.finished
        record.done("20261122T104100Z-3f2a9c1b", "completed", "results/20261122T104100Z-3f2a9c1b.json")
    assert terminal.events == ["preparing 64 synthetic JPEG images", "started R0"]  # the bar still gets all
    state = jobs.read_job(db, state.job_id)
    assert (state.status, state.exit_code, state.run_id) == ("completed", 0, "20261122T104100Z-3f2a9c1b")


def test_a_failed_or_interrupted_terminal_profile_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db = tmp_path / "results.duckdb"
    with pytest.raises(UsageError), jobs.register_profile(db, ["stash", "profile"]):
        raise UsageError("--batch-size: must be a positive integer, got 0")
    with pytest.raises(KeyboardInterrupt), jobs.register_profile(db, ["stash", "profile"]):
        raise KeyboardInterrupt
    failed, interrupted = sorted(jobs.list_jobs(db), key=lambda job: job.exit_code)
    assert (failed.status, failed.exit_code) == ("failed", 2)
    assert failed.error == "--batch-size: must be a positive integer, got 0"
    assert (interrupted.status, interrupted.exit_code) == ("interrupted", 130)


def test_a_terminal_profile_killed_outright_reads_as_lost(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db = tmp_path / "results.duckdb"
    code = (
        "import sys, time; from stash_core.engine import jobs\n"
        "with jobs.register_profile(sys.argv[1], ['stash', 'profile']):\n"
        "    print('registered', flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "registered"
        [state] = jobs.list_jobs(db)
        assert state.origin == "cli" and state.status == "starting" and state.pid == child.pid
    finally:
        child.kill()
        child.wait()
    assert jobs.read_job(db, state.job_id).status == "lost"


def test_a_run_the_dashboard_started_is_not_registered_twice(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STASH_JOB_RC", str(tmp_path / "rc"))
    db = tmp_path / "results.duckdb"
    terminal = _Collect()
    with jobs.register_profile(db, ["stash", "profile"]) as record:
        assert record.reporter(terminal) is terminal
        record.done("run", "completed", None)
    assert jobs.list_jobs(db) == []


def test_measurements_on_this_machine_are_found_registered_or_not() -> None:
    # Any `stash profile` (here a stand-in whose command line reads like one) counts, wherever it stores.
    sleeper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            "/opt/venv/bin/stash",
            "profile",
            "--model",
            "x",
        ]
    )
    try:
        _wait(lambda: any(p["pid"] == sleeper.pid for p in measuring_processes()))
        found = next(p for p in measuring_processes() if p["pid"] == sleeper.pid)
        assert "stash profile --model x" in found["command"]
        assert all(p["pid"] != sleeper.pid for p in measuring_processes({sleeper.pid}))  # a known job
    finally:
        sleeper.kill()
        sleeper.wait()
    assert all(p["pid"] != sleeper.pid for p in measuring_processes())


def test_a_killed_wrapper_leaves_a_running_job_that_cancel_ends(tmp_path: Path, fake_python: Path) -> None:
    """`kill -9` of the pid the job folder names (the wrapper) left the profile running while the job read
    "lost", with no Cancel to stop it."""
    db = tmp_path / "results.duckdb"
    job_id = _start(db, fake_python, "hang", tmp_path)
    pids_file = tmp_path / "pids.txt"
    _wait(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2)
    wrapper_pid = jobs.read_job(db, job_id).pid
    left = [int(pid) for pid in pids_file.read_text().split()]
    os.kill(wrapper_pid, 9)
    _wait(lambda: not _alive(wrapper_pid))
    assert jobs.read_job(db, job_id).status == "running"
    assert jobs.cancel_job(db, job_id, grace_s=2.0) is True
    _wait(lambda: not any(_alive(pid) for pid in left), timeout_s=10)
    assert jobs.read_job(db, job_id).status == "cancelled"


@pytest.fixture()
def sleeper():
    """A process of this user's that no job of the test may end (each test checks it is untouched)."""
    process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def _job_folder(db: Path, name: str, meta: object, pid_text: str = "", rc: str | None = None) -> Path:
    import json

    folder = jobs.jobs_dir(db) / name
    folder.mkdir(parents=True)
    (folder / "argv.json").write_text(json.dumps(meta))
    (folder / "pid").write_text(pid_text)
    if rc is not None:
        (folder / "rc").write_text(rc)
    return folder


def test_job_folders_of_another_database_or_made_by_hand_are_read_safely(tmp_path: Path, sleeper) -> None:
    db, other = tmp_path / "c.duckdb", tmp_path / "d2.duckdb"
    meta = {"argv": [], "label": "", "origin": "cli", "kind": "profile", "started_at": "2026-11-30T08:00:00"}
    _job_folder(db, "20261130T080000Z-aaaaaa", {**meta, "db_path": str(other.resolve())}, rc="0")
    _job_folder(db, "20261130T080001Z-bbbbbb", [1, 2])  # valid JSON, no object: the pages crashed on it
    _job_folder(db, "20261130T080002Z-cccccc", {**meta, "started_at": "yesterday"})
    # a bare pid with no creation time is not the job: Cancel signalled whatever process had that pid
    _job_folder(db, "20261130T080003Z-dddddd", {**meta, "db_path": str(db.resolve()),
                                                 "origin": "dashboard"}, f"{sleeper.pid}\n")  # fmt: skip
    assert [job.job_id for job in jobs.list_jobs(db)] == ["20261130T080003Z-dddddd"]
    assert [job.job_id for job in jobs.list_jobs(other)] == ["20261130T080000Z-aaaaaa"]
    for job_id in ("20261130T080001Z-bbbbbb", "20261130T080002Z-cccccc"):
        with pytest.raises(UsageError, match=f"job {job_id} cannot be read"):
            jobs.read_job(db, job_id)
    assert jobs.read_job(db, "20261130T080003Z-dddddd").status == "lost"
    assert jobs.cancel_job(db, "20261130T080003Z-dddddd") is False
    assert sleeper.poll() is None  # untouched


def test_a_run_killed_outright_is_failed_not_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    meta = {"argv": [], "label": "", "origin": "cli", "kind": "profile", "db_path": str(db.resolve()),
            "started_at": "2026-11-30T08:00:00"}  # fmt: skip
    _job_folder(db, "20261130T080000Z-aaaaaa", meta, rc="137\n")
    _job_folder(db, "20261130T080001Z-bbbbbb", meta, rc="130\n")
    assert jobs.read_job(db, "20261130T080000Z-aaaaaa").status == "failed"  # SIGKILL: nothing was saved
    assert jobs.read_job(db, "20261130T080001Z-bbbbbb").status == "interrupted"


def test_a_run_the_database_could_not_take_says_so_not_stored(tmp_path: Path, monkeypatch) -> None:
    """A locked database: the run was in its result file only, and the Run page said it was stored."""
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db = tmp_path / "results.duckdb"
    with jobs.register_profile(db, ["stash", "profile"]) as record:
        problem = "could not store run: locked"
        record.done("20261130T083140Z-59f7270e", "completed", "/x/r.json", problem, False)
    (job,) = jobs.list_jobs(db)
    assert (job.run_status, job.stored, job.error) == ("completed", False, "could not store run: locked")


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user needs root")
def test_a_job_folder_another_user_made_is_never_read_signalled_or_removed(tmp_path: Path, sleeper) -> None:
    """In a folder others may write in, a `.stash-jobs` entry made by another user named a pid and creation
    time of ours: the Run page showed it running, disabled Start, and its Cancel killed that process."""
    from datetime import UTC, datetime

    from stash_core.engine.job_prune import prune_finished_jobs

    db = tmp_path / "shared" / "c.duckdb"
    meta = {"argv": [], "label": "resnet50", "origin": "dashboard", "kind": "profile",
            "started_at": "2020-11-30T08:00:00", "db_path": str(db.resolve())}  # fmt: skip
    created = psutil.Process(sleeper.pid).create_time()
    folder = _job_folder(db, "20201130T080000Z-abcdef", meta, f"{sleeper.pid} {created}\n")
    nobody = 65534
    for path in (folder, *folder.iterdir()):
        os.chown(path, nobody, nobody)
    assert jobs.list_jobs(db) == []
    with pytest.raises(UsageError, match="no job '20201130T080000Z-abcdef' of yours"):
        jobs.read_job(db, "20201130T080000Z-abcdef")
    assert prune_finished_jobs(jobs.jobs_dir(db), datetime.now(UTC)) == [] and folder.is_dir()
    assert sleeper.poll() is None  # untouched


def test_a_jobs_folder_of_another_user_is_refused_and_never_signalled(tmp_path: Path, sleeper, monkeypatch):
    """A `.stash-jobs` another user made could hold their job folders, their model files under our names,
    or have ours swapped for theirs: it is neither used nor trusted (another user: this one's uid changed)."""
    from stash_core.engine import job_process
    from stash_core.userfiles import save_model_file

    db = tmp_path / "shared" / "c.duckdb"
    meta = {"argv": [], "label": "x", "origin": "dashboard", "kind": "profile",
            "started_at": "2026-11-30T08:00:00", "db_path": str(db.resolve())}  # fmt: skip
    created = psutil.Process(sleeper.pid).create_time()
    _job_folder(db, "20261130T080000Z-abcdef", meta, f"{sleeper.pid} {created}\n")
    assert [job.job_id for job in jobs.list_jobs(db)] == ["20261130T080000Z-abcdef"]  # ours
    monkeypatch.setattr(job_process.os, "getuid", lambda: os.geteuid() + 1)
    assert jobs.list_jobs(db) == []
    with pytest.raises(UsageError, match="belongs to another user"):
        jobs.start_profile_job(db, ["--model", "resnet18", "--batch-size", "8"], python="/bin/true")
    with pytest.raises(UsageError, match="belongs to another user"):
        save_model_file(db, "m.py", b"def make():\n    return None\n")
    with pytest.raises(UsageError, match="no job '20261130T080000Z-abcdef' of yours"):
        jobs.cancel_job(db, "20261130T080000Z-abcdef")
    assert sleeper.poll() is None  # untouched


def test_an_older_jobs_folder_others_may_write_in_is_made_private(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    jobs.jobs_dir(db).mkdir(mode=0o777)
    jobs.jobs_dir(db).chmod(0o777)
    record = jobs.register_profile(db, ["stash", "profile"])
    assert record.job_dir is not None and oct(jobs.jobs_dir(db).stat().st_mode & 0o777) == "0o700"


def test_a_model_file_is_kept_with_the_contents_its_name_says(tmp_path: Path) -> None:
    from stash_core.userfiles import save_model_file

    db = tmp_path / "c.duckdb"
    source = b"def make():\n    return None\n"
    path = save_model_file(db, "m.py", source)
    assert oct(path.parent.parent.stat().st_mode & 0o777) == "0o700"  # a new jobs folder is private
    path.write_bytes(b"import os\nos.system('echo planted')\n")
    assert save_model_file(db, "m.py", source).read_bytes() == source


def test_a_signal_after_the_run_stored_itself_whole_leaves_it_completed(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C just after the run was saved and stored completed: the database said completed, the Run page
    "interrupted: the run was ended by a signal"."""
    monkeypatch.delenv("STASH_JOB_RC", raising=False)
    db = tmp_path / "results.duckdb"
    with pytest.raises(KeyboardInterrupt), jobs.register_profile(db, ["stash", "profile"]) as record:
        record.done("20261130T083140Z-59f7270e", "completed", "/x/r.json")
        raise KeyboardInterrupt
    (job,) = jobs.list_jobs(db)
    assert (job.exit_code, job.run_status, job.status, job.error) == (130, "completed", "completed", None)


def test_a_job_of_another_database_in_the_folder_is_not_read_as_this_ones(tmp_path: Path) -> None:
    """Two databases of one folder share its jobs: the Run page showed the other's job, "finished and stored",
    and "refresh in a moment" for a run this database never gets."""
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    meta = {"argv": [], "label": "x", "origin": "dashboard", "kind": "profile",
            "started_at": "2026-11-30T08:00:00", "db_path": str(two.resolve())}  # fmt: skip
    _job_folder(two, "20261130T080000Z-abcdef", meta, "", rc="0")
    assert jobs.read_job(two, "20261130T080000Z-abcdef").job_id == "20261130T080000Z-abcdef"
    with pytest.raises(UsageError, match=f"is of the database {two.resolve()}, not of {one}"):
        jobs.read_job(one, "20261130T080000Z-abcdef")


def test_a_jobs_folder_that_is_a_file_is_said_to_be_one(tmp_path: Path) -> None:
    """It said the file "belongs to another user (uid 0)", uid 0 being the user who ran the page."""
    from stash_core.userfiles import folder_problem

    (tmp_path / ".stash-jobs").write_text("x")
    said = folder_problem(tmp_path / ".stash-jobs")
    assert said.startswith(f"{tmp_path / '.stash-jobs'} is a file, not a folder: its jobs are not shown")
