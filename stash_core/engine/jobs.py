"""Background `stash profile` runs for the dashboard: start, follow, cancel; state lives on disk. Also the run
registry: a `stash profile` started from a terminal or from Python records itself in the same place
(register_profile), so the Run page and the Overview show it as it progresses, and can tell that the machine
is busy. A job of another kind (a cloud campaign, start_command_job) lives beside them, listed by its kind.

A page reload (or a restart of the dashboard) must not lose a run, so nothing is kept in memory that matters.
Each job has a folder `<database folder>/.stash-jobs/<job_id>/` (finished ones pruned: job_prune.py) holding:

    argv.json    the command, when it was started and by whom ("origin": "dashboard", "cli" or "python")
    pid          "<pid> <create_time>" of the wrapper process, or of the process running the profile itself
                 for a run started from a terminal or from Python (create_time guards against pid reuse)
    stdout.log   the run's output: protocol lines (STASH-PHASE / STASH-PROGRESS / STASH-DONE) and text
    stderr.log   its error output ("stash: ..." on a bad input)
    rc           the exit status, written by the wrapper when the run ends
    cancelled    present when the user cancelled the run

The run is started in a new session under a tiny shell wrapper that records the exit status, so the state is
complete even when the dashboard is gone by then. Cancelling ends the wrapper's process group and every
descendant (the local launcher starts workers in sessions of their own). A profile from Python runs in its
caller, which no cancel may end: `cancelled` is its stop request instead (ProfileRecord).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from stash_core.engine.job_process import (
    CHILDREN,
    create_time,
    exit_code_of,
    orphans,
    ours,
    own_process,
    pid_of,
    read_text,
)
from stash_core.engine.job_prune import new_job_id
from stash_core.engine.job_state import JobState, parse_output, settle_status
from stash_core.engine.profile_child import child_env, profile_command
from stash_core.engine.progress import JsonReporter, Reporter, TeeReporter
from stash_core.errors import UsageError
from stash_core.interrupts import stop_requests
from stash_core.measure import protocol
from stash_core.proc import end_tree
from stash_core.userfiles import DASHBOARD_DIRNAME, private_folder

JOBS_DIRNAME = DASHBOARD_DIRNAME  # shared with the files uploaded to the dashboard (userfiles.py)
CANCEL_GRACE_S = 3.0
CANCEL_CHECK_S = 0.5  # how often a profile from Python looks for the dashboard's stop request
_STDERR_TAIL_LINES = 20
# The wrapper runs the command, then writes its exit status; `exec` is not used so that the shell survives.
_WRAPPER = '"$@"; echo $? > "$STASH_JOB_RC"'


def jobs_dir(db_path: Path | str) -> Path:
    """The folder holding the job folders of a database: `.stash-jobs` next to the database file."""
    return Path(db_path).resolve().parent / JOBS_DIRNAME


def start_profile_job(
    db_path: Path | str,
    profile_args: list[str],
    label: str = "",
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Start the profile of `stash profile` ARGS in the background (the profile child of profile_command,
    with --db DB --progress json); returns the job id.

    The run's working folder is the database's folder, so its result file lands in `<that folder>/results/`;
    paths in `profile_args` should be absolute. UsageError when `profile_args` sets --db or --progress itself
    or the job folder cannot be written.
    """
    return _start_job(db_path, profile_command(db_path, profile_args, python), label, env, "profile")


def start_command_job(
    db_path: Path | str, argv: list[str], label: str, kind: str, files: dict[str, str] | None = None
) -> str:
    """Start `argv` in the background as a job of `kind` (not a profile: the Run page and the Overview do
    not list it), `files` written into its folder first (`{JOB_DIR}` in argv names that folder); the job id.
    Its output is kept as a profile's is; stop_job interrupts it."""
    if kind == "profile":
        raise UsageError("a profile job is started by start_profile_job")
    return _start_job(db_path, argv, label, None, kind, files or {})


def _start_job(db_path: Path | str, argv: list[str], label: str, env: dict[str, str] | None, kind: str,
               files: dict[str, str] | None = None) -> str:  # fmt: skip
    db = Path(db_path).resolve()
    job_dir = private_folder(jobs_dir(db)) / new_job_id(jobs_dir(db))
    argv = [arg.replace("{JOB_DIR}", str(job_dir)) for arg in argv]
    try:
        job_dir.mkdir()
        for name, text in (files or {}).items():
            (job_dir / name).write_text(text)
        _write_meta(job_dir, argv, label, db, "dashboard", kind)
        stdout = open(job_dir / "stdout.log", "wb")  # noqa: SIM115 - handed to the child
        stderr = open(job_dir / "stderr.log", "wb")  # noqa: SIM115
    except OSError as exc:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise UsageError(f"cannot create the job folder {job_dir}: {exc.strerror or exc}") from None
    env = child_env(db, env)
    env["STASH_JOB_RC"] = str(job_dir / "rc")
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", _WRAPPER, "stash-job", *argv],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=str(db.parent),
            env=env,
            start_new_session=True,  # a group of its own: survives the page and can be ended as a whole
        )
    except OSError as exc:
        raise UsageError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    finally:
        stdout.close()
        stderr.close()
    CHILDREN[process.pid] = process
    (job_dir / "pid").write_text(f"{process.pid} {create_time(process.pid) or 0}\n")
    return job_dir.name


class ProfileRecord:
    """The registry entry of a `stash profile` started from a terminal or from Python (register_profile): a
    job folder with origin "cli" or "python", this process's pid, its progress as protocol lines in
    stdout.log, the DONE line and the exit status in rc. Every write is best effort: a folder that cannot be
    written never stops a profile. A profile from Python takes the folder's `cancelled` file as a request to
    stop (the dashboard's Cancel, which sends it no signal)."""

    def __init__(self, job_dir: Path | None, origin: str = "cli") -> None:
        self.job_dir = job_dir
        self.origin = origin
        self._log = None
        self._requests = None
        self._checked_at = 0.0

    def __enter__(self) -> ProfileRecord:
        if self.job_dir is not None:
            try:
                self._log = open(self.job_dir / "stdout.log", "a", encoding="utf-8")  # noqa: SIM115
            except OSError:
                self.job_dir = None
        if self.job_dir is not None and self.origin == "python":
            self._requests = stop_requests(self._cancel_requested)
            self._requests.__enter__()
        return self

    def _cancel_requested(self) -> bool:
        now = time.monotonic()
        if now - self._checked_at < CANCEL_CHECK_S:  # launch loops ask often: the disk is looked at seldom
            return False
        self._checked_at = now
        return (self.job_dir / "cancelled").exists()

    def reporter(self, inner: Reporter) -> Reporter:
        """`inner` (the terminal's progress) plus the log the dashboard reads."""
        return inner if self._log is None else TeeReporter(inner, JsonReporter(self._log))

    def done(self, run_id: str, status: str, result_file: str | None, error: str | None = None,
             stored: bool = True) -> None:  # fmt: skip
        """Record the run id, status, result file and whether the database has it (the DONE line of
        --progress json)."""
        done = {"run_id": run_id, "status": status, "result_file": result_file, "error": error,
                "stored": stored}  # fmt: skip
        self._quietly(lambda: protocol.emit("DONE", done, self._log))

    def __exit__(self, kind, error, traceback) -> None:
        if self._requests is not None:
            self._requests.__exit__(None, None, None)
        if error is None or (isinstance(error, SystemExit) and not error.code):
            code = 0
        elif isinstance(error, KeyboardInterrupt):  # Ctrl-C, or SIGTERM / SIGHUP raised as one
            code = 128 + int(getattr(error, "signum", 2))
        elif isinstance(error, SystemExit):
            code = error.code if isinstance(error.code, int) else 1
        else:
            code = int(getattr(error, "exit_code", 1))
        if self._log is not None:
            if error is not None and not isinstance(error, KeyboardInterrupt | SystemExit):
                self._quietly(lambda: (self.job_dir / "stderr.log").write_text(f"stash: {error}\n"))
            self._quietly(self._log.close)
        if self.job_dir is not None:
            self._quietly(lambda: (self.job_dir / "rc").write_text(f"{code}\n"))

    def _quietly(self, action) -> None:
        if self.job_dir is None:
            return
        try:
            action()
        except (OSError, ValueError):
            pass


def register_profile(
    db_path: Path | str, argv: list[str], label: str = "", origin: str = "cli"
) -> ProfileRecord:
    """Register a profile run in this process next to its database (see ProfileRecord): `stash profile` in a
    terminal (origin "cli") or `stash_core.profile()` (origin "python").

    A run the dashboard started (it set STASH_JOB_RC) has its job folder already: nothing is registered."""
    if os.environ.get("STASH_JOB_RC"):
        return ProfileRecord(None)
    db = Path(db_path).resolve()
    job_dir = jobs_dir(db) / new_job_id(jobs_dir(db))
    try:
        private_folder(job_dir.parent)  # another user's jobs folder: the profile goes on, unregistered
        job_dir.mkdir()
        _write_meta(job_dir, list(argv), label, db, origin)
        (job_dir / "pid").write_text(f"{os.getpid()} {create_time(os.getpid()) or 0}\n")
    except (OSError, UsageError):
        shutil.rmtree(job_dir, ignore_errors=True)  # a full disk: no half-made job folder left behind
        return ProfileRecord(None)
    return ProfileRecord(job_dir, origin)


def read_job(db_path: Path | str, job_id: str) -> JobState:
    """The current state of one job, parsed from its folder; UsageError when there is no such job."""
    job_dir = jobs_dir(db_path) / job_id
    if not _valid_job_id(job_id) or not (job_dir / "argv.json").is_file() or not ours(job_dir):
        raise UsageError(f"no job {job_id[:MAX_JOB_ID_CHARS]!r} of yours in {jobs_dir(db_path)}")
    try:
        state = _read_state(job_dir)
    except _UNREADABLE as error:
        raise UsageError(f"job {job_id} cannot be read ({job_dir}): {error}") from None
    if state.db_path not in (None, str(Path(db_path).resolve())):  # databases of one folder share its jobs
        raise UsageError(f"job {job_id} is of the database {state.db_path}, not of {db_path}")
    return state


def list_jobs(db_path: Path | str, limit: int = 20, kind: str = "profile") -> list[JobState]:
    """The newest `limit` jobs of `kind` of a database, newest first (an unreadable job folder is skipped)."""
    folder = jobs_dir(db_path)
    if not folder.is_dir():
        return []
    found = [path for path in folder.iterdir() if (path / "argv.json").is_file() and ours(path)]
    names = sorted((path.name for path in found), reverse=True)
    # A job still running comes first whatever its name: ids are start times on the wall clock, and after a
    # clock that ran ahead was set back, the finished jobs named then hid a running one from the pages.
    unfinished = [name for name in names if not (folder / name / "rc").exists()]
    read = {name: state for name in unfinished if (state := _state_of(folder / name, db_path, kind))}
    states = [state for state in read.values() if state.status in ("starting", "running")]
    first = {state.job_id for state in states}
    for name in (name for name in names if name not in first):
        if len(states) >= limit:
            break
        if state := read[name] if name in read else _state_of(folder / name, db_path, kind):
            states.append(state)
    return states


def _state_of(job_dir: Path, db_path: Path | str, kind: str) -> JobState | None:
    """The job's state where it is a job of `kind` of this database (databases of one folder share its folder
    of jobs), else None; None too for an unreadable job folder."""
    try:
        state = _read_state(job_dir)
    except _UNREADABLE:
        return None
    return state if state.kind == kind and state.db_path in (None, str(Path(db_path).resolve())) else None


def stop_job(db_path: Path | str, job_id: str) -> bool:
    """Interrupt a running job as Ctrl-C would (SIGINT to its command, not to the wrapper, which then records
    the exit status), without waiting: a campaign tears its clusters down before it ends. True when it was
    running; it then reads as "cancelled" once it has ended."""
    state = read_job(db_path, job_id)
    wrapper = None if state.finished else own_process(state.job_dir)
    if wrapper is None:
        return False
    (state.job_dir / "cancelled").write_text(datetime.now(UTC).isoformat() + "\n")
    try:
        for child in wrapper.children():
            child.send_signal(signal.SIGINT)
    except psutil.Error:
        return False
    return True


def cancel_job(db_path: Path | str, job_id: str, grace_s: float = CANCEL_GRACE_S) -> bool:
    """End a running job and every process it started: TERM, then KILL after `grace_s`. A profile from
    Python is asked to stop instead: it ends its own launches, saves what it measured and raises. True when
    something was running; the job then reads as "cancelled" (once it has ended)."""
    state = read_job(db_path, job_id)
    if state.finished or state.pid is None:
        return False
    (state.job_dir / "cancelled").write_text(datetime.now(UTC).isoformat() + "\n")
    if state.origin == "python":  # never a signal: it would end the notebook or script that runs it
        return own_process(state.job_dir) is not None
    wrapper = own_process(state.job_dir)
    if wrapper is None:
        left = orphans(state.job_dir, state.origin)
        for process in left:  # the wrapper was killed: what it started goes on, and is ended here
            end_tree(process.pid, grace_s)
        return bool(left)
    end_tree(wrapper.pid, grace_s)
    child = CHILDREN.pop(wrapper.pid, None)
    if child is not None:
        try:
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    return True


# What a job folder edited by hand or cut short raises when read: the job is skipped or said unreadable.
_UNREADABLE = (OSError, ValueError, TypeError, AttributeError, KeyError)


def _read_state(job_dir: Path) -> JobState:
    meta = json.loads((job_dir / "argv.json").read_text())
    if not isinstance(meta, dict):
        raise ValueError("argv.json holds no object")
    started = meta.get("started_at")
    state = JobState(
        job_id=job_dir.name,
        job_dir=job_dir,
        argv=list(meta.get("argv") or []),
        started_at=datetime.fromisoformat(started) if started else None,
        pid=pid_of(job_dir),
        status="starting",
        label=meta.get("label") or "",
        origin=meta.get("origin") or "dashboard",
        kind=meta.get("kind") or "profile",
        db_path=meta.get("db_path"),
    )
    # Read the exit status before the output, so that output written just before the end is not missed.
    wrapper = own_process(job_dir)
    orphaned = wrapper is None and bool(orphans(job_dir, state.origin))
    running = wrapper is not None or orphaned
    # a killed wrapper's own status is not the job's: the processes it started run on
    exit_code = None if orphaned else exit_code_of(job_dir, state.pid)
    parse_output(state, read_text(job_dir / "stdout.log"))
    state.stderr_tail = [line for line in read_text(job_dir / "stderr.log").splitlines() if line.strip()][
        -_STDERR_TAIL_LINES:
    ]
    state.exit_code = exit_code
    settle_status(state, running, (job_dir / "cancelled").exists())
    return state


def _write_meta(
    job_dir: Path, argv: list[str], label: str, db: Path, origin: str, kind: str = "profile"
) -> None:
    meta = {"argv": argv, "label": label, "db_path": str(db), "origin": origin, "kind": kind,
            "started_at": datetime.now(UTC).isoformat()}  # fmt: skip
    _write_json(job_dir / "argv.json", meta)


MAX_JOB_ID_CHARS = 64  # new_job_id's are 23; a longer one (from an address) is no job, not a file name to try


def _valid_job_id(job_id: str) -> bool:
    return 0 < len(job_id) <= MAX_JOB_ID_CHARS and all(
        c.isascii() and (c.isalnum() or c in "-_") for c in job_id
    )


def _write_json(path: Path, value: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(value, indent=1))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no argv.tmp
        raise


def wait_for_job(db_path: Path | str, job_id: str, timeout_s: float, poll_s: float = 0.2) -> JobState:
    """Poll until the job has finished or `timeout_s` passed; returns the last state read."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = read_job(db_path, job_id)
        if state.finished or time.monotonic() >= deadline:
            return state
        time.sleep(poll_s)
