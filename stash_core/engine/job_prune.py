"""New job ids, and the pruning of old job folders that comes with each: every profile (from the dashboard,
a terminal or Python) leaves a folder in `.stash-jobs/` next to its database (jobs.py), which would
otherwise grow by one a run for ever. When a job starts, the finished job folders beyond the newest
KEEP_JOBS, or older than KEEP_DAYS, are removed; a running one never is. What the folder held stays in the
database and the result file: only the Run page's and the Overview's view of that run's progress goes.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from stash_core.engine.job_process import orphans, ours, own_process

KEEP_JOBS = 50
KEEP_DAYS = 7
# A job folder's name: its start time (UTC) and a random suffix. Other folders there (the dashboard's
# uploaded model files, models/) are never touched.
JOB_ID = re.compile(r"(\d{8}T\d{6}Z)-[0-9a-f]+")


def new_job_id(folder: Path, now: datetime | None = None) -> str:
    """A new job's id in `folder` (a database's .stash-jobs), after pruning the folder's finished jobs."""
    now = now or datetime.now(UTC)
    prune_finished_jobs(folder, now)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def prune_finished_jobs(folder: Path, now: datetime) -> list[str]:
    """Remove the finished job folders of `folder` beyond the newest KEEP_JOBS or started more than KEEP_DAYS
    before `now`; the ids removed. Best effort: a folder that cannot be read or removed is left."""
    try:
        jobs = sorted((path for path in folder.iterdir() if JOB_ID.fullmatch(path.name)), reverse=True)
    except OSError:
        return []
    oldest_kept = now - timedelta(days=KEEP_DAYS)
    removed = []
    for newer, job_dir in enumerate(jobs):
        started = datetime.strptime(JOB_ID.fullmatch(job_dir.name).group(1), "%Y%m%dT%H%M%SZ")
        started = started.replace(tzinfo=UTC)
        # named more than a day ahead of now: named while the clock ran ahead, its start unknown, and kept
        # by rank it would stay among the newest for good
        if newer < KEEP_JOBS and oldest_kept <= started <= now + timedelta(days=1):
            continue
        if not ours(job_dir) or _running(job_dir):  # another user's folder is theirs to remove
            continue
        shutil.rmtree(job_dir, ignore_errors=True)
        removed.append(job_dir.name)
    return removed


def _running(job_dir: Path) -> bool:
    """Whether the job's process, or what its killed wrapper started, still runs."""
    try:
        origin = json.loads((job_dir / "argv.json").read_text()).get("origin") or "dashboard"
    except (OSError, ValueError, AttributeError):
        origin = "dashboard"  # unread: the one whose orphans are looked for too
    return own_process(job_dir) is not None or bool(orphans(job_dir, origin))
