"""Which processes are a job's: its wrapper (by pid and creation time, never a pid alone), what the wrapper
started when it was killed, and the exit status the wrapper recorded (or its own, for a child of this
process). The job folder's files are described in jobs.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil

from stash_core.userfiles import private_enough

# Popen objects of runs started by this process, so that finished children are reaped (no zombies) and
# their exit status is known even before the wrapper has written it.
CHILDREN: dict[int, subprocess.Popen] = {}


def exit_code_of(job_dir: Path, pid: int | None) -> int | None:
    """The exit status the wrapper wrote, else the killed wrapper's own (a child of this process), or None."""
    if pid is not None and pid in CHILDREN:
        CHILDREN[pid].poll()  # reaps a finished child of this process
    text = read_text(job_dir / "rc").strip()
    if text:
        try:
            return int(text)
        except ValueError:
            return None
    child = CHILDREN.get(pid) if pid is not None else None
    if child is not None and child.returncode is not None:
        # The wrapper itself was killed before it could write the status.
        return child.returncode if child.returncode >= 0 else 128 - child.returncode
    return None


def pid_of(job_dir: Path) -> int | None:
    found = _pid_file(job_dir)
    return found[0] if found else None


def _pid_file(job_dir: Path) -> tuple[int, float] | None:
    """The pid file's pid and creation time (0.0 where it has none), or None."""
    parts = read_text(job_dir / "pid").split()
    try:
        return (int(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0) if parts else None
    except ValueError:
        return None


def ours(job_dir: Path) -> bool:
    """Whether this user made the job folder and its pid file. A database in a folder others may write in
    (/tmp) shares its `.stash-jobs` with them: a folder another user made there names whatever pid it likes,
    and is never read as one of this user's jobs, signalled or removed."""
    uid = os.getuid()
    try:
        if job_dir.lstat().st_uid != uid or not private_enough(job_dir.parent.lstat()):
            return False  # in a jobs folder others may write in, a folder of ours may be swapped for theirs
        pid_file = job_dir / "pid"
        return not pid_file.exists() or pid_file.lstat().st_uid == uid
    except OSError:
        return False


def own_process(job_dir: Path) -> psutil.Process | None:
    """The job's live wrapper process; None when it has ended (or its pid now belongs to another process), or
    when the folder is not this user's (ours)."""
    if not ours(job_dir):
        return None
    found = _pid_file(job_dir)
    if found is None:
        return None
    pid, created = found
    if pid in CHILDREN and CHILDREN[pid].poll() is not None:
        return None
    if not created > 0:  # without its creation time a pid may be anyone's now: never signalled as the job
        return None
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - created) > 1.0:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def orphans(job_dir: Path, origin: str) -> list[psutil.Process]:
    """The processes left in a dashboard job's process group once its wrapper is gone (a `kill -9` of the
    pid the job folder names; the caller has found no wrapper): the profile goes on in them. None for a job
    that has its exit status."""
    pid = pid_of(job_dir)
    if origin != "dashboard" or pid is None or (job_dir / "rc").exists() or not ours(job_dir):
        return []
    rc_file = str(job_dir / "rc")
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            # the job's own (a group id can be reused): its environment names this job's status file
            if (
                os.getpgid(process.pid) == pid
                and process.status() != psutil.STATUS_ZOMBIE
                and process.environ().get("STASH_JOB_RC") == rc_file
            ):
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def read_text(path: Path) -> str:
    """A job file's text ("" when it is not there yet or cannot be read)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
