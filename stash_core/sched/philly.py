"""Microsoft Philly cluster_job_log (msr-fiddle/philly-traces) into the simulator's columns (formats.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.columns import finish


def philly_frame(log: object) -> pd.DataFrame:
    """One row per job with GPUs and a timed attempt; UsageError naming the job and field of a bad one."""
    if not isinstance(log, list):
        raise UsageError("a Philly cluster_job_log is a JSON list of jobs")
    rows, seen = [], {}
    for number, job in enumerate(log, start=1):
        if not isinstance(job, dict) or "submitted_time" not in job:
            raise UsageError(f"Philly job {number} (by position): give jobid, submitted_time and attempts")
        job_id = _job_id(job.get("jobid"), number)
        if job_id in seen:
            raise UsageError(f"Philly jobid {job_id} is given twice (jobs {seen[job_id]} and {number})")
        seen[job_id] = number
        name = f"Philly job {job_id}"
        gpus, run_s = 0, 0.0
        for attempt in _list(job.get("attempts"), f"{name} attempts"):
            if not isinstance(attempt, dict):
                raise UsageError(f"{name} attempts: each attempt must be an object, got {attempt!r:.60}")
            start, end = _when(attempt.get("start_time"), name), _when(attempt.get("end_time"), name)
            if start is None or end is None or end <= start:
                continue
            run_s += end - start
            gpus = max(gpus, sum(_gpus(machine, name) for machine in _list(attempt.get("detail"),
                                                                             f"{name} detail")))  # fmt: skip
        submit = _when(job.get("submitted_time"), name)
        if submit is None:  # not among the jobs left out (docs/traces.md): refused, as the other fields
            raise UsageError(f"{name}: submitted_time is empty; give YYYY-MM-DD HH:MM:SS")
        if gpus and run_s > 0:
            rows.append({"job_id": job_id, "num_gpu": gpus, "submit_time": submit, "duration": run_s,
                         "user": job.get("user")})  # fmt: skip
    return finish(pd.DataFrame(rows), "Philly")


def _job_id(value: object, number: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise UsageError(f"Philly job {number} (by position): jobid must be text, got {value!r:.60}")
    return str(value).strip()


def _list(value: object, what: str) -> list:
    """A JSON list, or [] for null/absent."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{what} must be a list, got {value!r:.60}")
    return value


def _gpus(machine: object, name: str) -> int:
    """The GPUs one machine of an attempt held: len of its gpus list."""
    if not isinstance(machine, dict):
        raise UsageError(f"{name} detail: each entry must be an object {{ip, gpus}}, got {machine!r:.60}")
    return len(_list(machine.get("gpus"), f"{name} detail gpus"))


def _when(text: object, name: str) -> float | None:
    """Seconds since the epoch of a Philly time string, or None when missing."""
    if text is None or (isinstance(text, str) and text.strip() in ("", "None")):
        return None
    if not isinstance(text, str):
        raise UsageError(f"{name}: times must be text YYYY-MM-DD HH:MM:SS, got {text!r:.60}")
    # A date and time as written, never pandas' words ("now", "today") nor an offset: Philly's times are
    # all local times of one cluster, so an offset among them would shift one job by hours.
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{name}: {text!r:.60} is not a time YYYY-MM-DD HH:MM:SS") from None
    if stamp.tzinfo is not None:
        raise UsageError(f"{name}: {text!r:.60} has a UTC offset; Philly times are given without one")
    return stamp.replace(tzinfo=UTC).timestamp()
