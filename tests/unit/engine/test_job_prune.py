"""A new job prunes the finished job folders beyond the newest 50 or older than 7 days (every profile left one
in .stash-jobs/, never removed); a running job, the newest ones and the uploaded model files stay."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from stash_core.engine import job_prune, jobs
from stash_core.engine.job_process import create_time

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def job_folder(folder: Path, started: datetime, pid: int | None = None, suffix: str = "abc123") -> Path:
    """A finished job folder (rc written), or a running one when `pid` is a live process's."""
    job_dir = folder / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{suffix}"
    job_dir.mkdir(parents=True)
    (job_dir / "argv.json").write_text(json.dumps({"argv": [], "origin": "cli"}))
    if pid is None:
        (job_dir / "rc").write_text("0\n")
    else:
        (job_dir / "pid").write_text(f"{pid} {create_time(pid)}\n")
    return job_dir


def test_finished_jobs_older_than_a_week_go_and_a_running_one_stays(tmp_path: Path) -> None:
    folder = tmp_path / ".stash-jobs"
    old = job_folder(folder, NOW - timedelta(days=8))
    recent = job_folder(folder, NOW - timedelta(days=6))
    with subprocess.Popen(["sleep", "60"]) as sleeper:
        try:
            running = job_folder(folder, NOW - timedelta(days=30), pid=sleeper.pid)
            (folder / "models").mkdir()  # the dashboard's uploaded files: not a job
            removed = job_prune.prune_finished_jobs(folder, NOW)
        finally:
            sleeper.kill()
    assert removed == [old.name] and not old.exists()
    assert recent.exists() and running.exists() and (folder / "models").is_dir()


def test_only_the_newest_fifty_finished_jobs_are_kept(tmp_path: Path) -> None:
    folder = tmp_path / ".stash-jobs"
    made = [job_folder(folder, NOW - timedelta(minutes=minutes)) for minutes in range(55)]
    removed = job_prune.prune_finished_jobs(folder, NOW)
    assert sorted(removed) == sorted(job_dir.name for job_dir in made[50:])
    assert all(job_dir.exists() for job_dir in made[:50])


def test_registering_a_profile_prunes_the_old_job_folders(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    old = job_folder(jobs.jobs_dir(db), datetime.now(UTC) - timedelta(days=10))
    with jobs.register_profile(db, ["profile", "--model", "resnet10"]) as record:
        assert record.job_dir is not None and record.job_dir.is_dir()
        assert json.loads((record.job_dir / "argv.json").read_text())["origin"] == "cli"
        assert int((record.job_dir / "pid").read_text().split()[0]) == os.getpid()
    assert not old.exists()


def test_jobs_named_while_the_clock_ran_ahead_neither_hide_a_running_one_nor_stay(tmp_path: Path) -> None:
    """Job ids are wall-clock start times: after a clock that ran 30 days ahead was set back, eight finished
    jobs named then were the newest eight, the running profile was on no page, and no prune removed them."""
    db = tmp_path / "r.duckdb"
    folder = jobs.jobs_dir(db)
    now = datetime.now(UTC)
    ahead = [job_folder(folder, now + timedelta(days=30, minutes=m), suffix=f"a0{m}") for m in range(8)]
    soon = job_folder(folder, now + timedelta(hours=1), suffix="50")  # a clock a little ahead: kept
    with subprocess.Popen(["sleep", "60"]) as sleeper:
        try:
            running = job_folder(folder, now, pid=sleeper.pid, suffix="11fe")
            listed = [state.job_id for state in jobs.list_jobs(db, limit=8)]
        finally:
            sleeper.kill()
    assert len(listed) == 8 and listed[0] == running.name
    removed = job_prune.prune_finished_jobs(folder, now)
    assert sorted(removed) == sorted(job_dir.name for job_dir in ahead) and soon.exists()
