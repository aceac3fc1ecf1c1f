"""Microsoft Philly cluster_job_log (msr-fiddle/philly-traces) into the simulator's columns (formats.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.columns import finish


def philly_frame(log: object, where: str = "cluster_job_log") -> pd.DataFrame:
    """One row per job with GPUs and a timed attempt; UsageError naming the file (`where`), the job and the
    field of a bad one, values shown as JSON writes them (null, not Python's None)."""
    if not isinstance(log, list):
        raise UsageError(f"{where}: a Philly cluster_job_log is a JSON list of jobs")
    rows, seen = [], {}
    for number, job in enumerate(log, start=1):
        if not isinstance(job, dict) or "submitted_time" not in job:
            raise UsageError(
                f"{where}: Philly job {number} (by position): give jobid, submitted_time and attempts"
            )
        job_id = _job_id(job.get("jobid"), f"{where}: Philly job {number} (by position)")
        if job_id in seen:
            raise UsageError(
                f"{where}: Philly jobid {_id(job_id)} is given twice (jobs {seen[job_id]} and {number})"
            )
        seen[job_id] = number
        name = f"{where}: Philly job {_id(job_id)}"
        gpus, run_s = 0, 0.0
        for attempt in _list(job.get("attempts"), f"{name} attempts"):
            if not isinstance(attempt, dict):
                raise UsageError(f"{name} attempts: each attempt must be an object, got {_shown(attempt)}")
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
    return finish(pd.DataFrame(rows), "Philly", where, listed=len(log))


def _shown(value: object) -> str:
    """A value of the file in a message: as JSON writes it (null, true, "text"), cut at 60 characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _id(job_id: str) -> str:
    """A job id in a message: as written where it is short printable text, else as JSON writes it."""
    return job_id if job_id.isprintable() and len(job_id) <= 60 else _shown(job_id)


def _job_id(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise UsageError(f"{where}: jobid must be text, got {_shown(value)}")
    return str(value).strip()


def _list(value: object, what: str) -> list:
    """A JSON list, or [] for null/absent."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{what} must be a list, got {_shown(value)}")
    return value


def _gpus(machine: object, name: str) -> int:
    """The GPUs one machine of an attempt held: len of its gpus list."""
    if not isinstance(machine, dict):
        raise UsageError(f"{name} detail: each entry must be an object {{ip, gpus}}, got {_shown(machine)}")
    return len(_list(machine.get("gpus"), f"{name} detail gpus"))


def _when(text: object, name: str) -> float | None:
    """Seconds since the epoch of a Philly time string, or None when missing."""
    if text is None or (isinstance(text, str) and text.strip() in ("", "None")):
        return None
    if not isinstance(text, str):
        raise UsageError(f"{name}: times must be text YYYY-MM-DD HH:MM:SS, got {_shown(text)}")
    # A date and time as written, never pandas' words ("now", "today") nor an offset: Philly's times are
    # all local times of one cluster, so an offset among them would shift one job by hours.
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{name}: {_shown(text)} is not a time YYYY-MM-DD HH:MM:SS") from None
    if stamp.tzinfo is not None:
        raise UsageError(f"{name}: {_shown(text)} has a UTC offset; Philly times are given without one")
    return stamp.replace(tzinfo=UTC).timestamp()
