"""Public cluster traces read into the simulator's columns (job_id, num_gpu, submit_time, duration, ...).

  tiresias  CSV with a header: job_id, num_gpu, submit_time (s), duration (s) or iterations + iteration_s,
            optional model_name, network_slowdown, grad_bytes, estimate_s (trace.py)
  philly    Microsoft Philly cluster_job_log (msr-fiddle/philly-traces): a JSON list of jobs with jobid,
            user, vc, status, submitted_time ("%Y-%m-%d %H:%M:%S") and attempts[] of start_time, end_time
            and detail[] of {ip, gpus[]}. GPUs = the most any attempt held (sum of len(gpus) over its
            detail); duration = the sum of its attempts' run times; jobs without a timed attempt or GPUs
            are left out
  pai2020   Alibaba PAI 2020 (alibaba/clusterdata cluster-trace-gpu-v2020): pai_job_table.csv (no header:
            job_name, inst_id, user, status, start_time, end_time) with pai_task_table.csv beside it (no
            header: job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem,
            plan_gpu, gpu_type). Times are seconds. submit = the job's start_time; duration = its tasks'
            last end - first start; GPUs = ceil(sum over tasks of inst_num x plan_gpu / 100) (plan_gpu is
            percent of one GPU); jobs without GPUs or times are left out
  helios    Helios cluster_log.csv (S-Lab-System-Group/HeliosData), header job_id, user, vc, gpu_num,
            cpu_num, node_num, state, submit_time, start_time, end_time (datetimes), duration (s), queue;
            CPU-only jobs (gpu_num 0) and jobs without a duration are left out
None of Philly, PAI or Helios names models. Their jobs get a network sensitivity drawn, reproducibly from the
job id, from Blox's placement penalties (speed 0.9, 0.8, 0.6 or 0.7 when spread, each a quarter of the
jobs): slowdown source "drawn (blox)". Submit times are shifted so the first job arrives at 0.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import pandas as pd

from stash_core.decide.sched.trace import BLOX_SPEED, Job, jobs_from_frame
from stash_core.errors import UsageError

FORMATS = ("tiresias", "philly", "pai2020", "helios")
PAI_JOB_COLUMNS = ["job_name", "inst_id", "user", "status", "start_time", "end_time"]
PAI_TASK_COLUMNS = ["job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu",
                    "plan_mem", "plan_gpu", "gpu_type"]  # fmt: skip


def load_trace(path: Path, db_path: Path | None = None, fmt: str = "tiresias") -> list[Job]:
    """Jobs of a trace file, with their network sensitivity; UsageError naming the problem otherwise."""
    return jobs_from_frame(read_trace_frame(path, fmt), db_path, str(path))


def read_trace_frame(path: Path, fmt: str) -> pd.DataFrame:
    """The trace at `path` in the simulator's columns; UsageError naming the problem otherwise."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown trace format {fmt!r}: choose {', '.join(FORMATS)}")
    try:
        if fmt == "tiresias":
            try:
                return pd.read_csv(path)
            except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
                raise UsageError(f"trace {path} is not a CSV file: {str(exc).splitlines()[0]}") from None
        if fmt == "philly":
            return philly_frame(json.loads(Path(path).read_text()))
        if fmt == "pai2020":
            task_path = Path(path).with_name(Path(path).name.replace("job_table", "task_table"))
            if task_path == Path(path) or not task_path.exists():
                raise UsageError(f"{path}: the PAI task table is read from pai_task_table.csv beside it")
            jobs = pd.read_csv(path, header=None, names=PAI_JOB_COLUMNS)
            return pai_frame(jobs, pd.read_csv(task_path, header=None, names=PAI_TASK_COLUMNS))
        return helios_frame(pd.read_csv(path))
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"trace {path} is not a {fmt} trace: {str(exc).splitlines()[0]}") from None


def philly_frame(log: object) -> pd.DataFrame:
    if not isinstance(log, list):
        raise UsageError("a Philly cluster_job_log is a JSON list of jobs")
    rows = []
    for job in log:
        if not isinstance(job, dict) or "submitted_time" not in job:
            raise UsageError("Philly jobs need jobid, submitted_time and attempts")
        gpus, run_s = 0, 0.0
        for attempt in job.get("attempts") or []:
            start, end = _when(attempt.get("start_time")), _when(attempt.get("end_time"))
            if start is None or end is None or end <= start:
                continue
            run_s += end - start
            gpus = max(gpus, sum(len(machine.get("gpus") or []) for machine in attempt.get("detail") or []))
        submit = _when(job.get("submitted_time"))
        if gpus and run_s > 0 and submit is not None:
            rows.append({"job_id": str(job.get("jobid")), "num_gpu": gpus, "submit_time": submit,
                         "duration": run_s, "user": job.get("user")})  # fmt: skip
    return _finish(pd.DataFrame(rows), "Philly")


def pai_frame(jobs: pd.DataFrame, tasks: pd.DataFrame) -> pd.DataFrame:
    tasks = tasks.assign(
        gpus=pd.to_numeric(tasks["inst_num"], errors="coerce")
        * pd.to_numeric(tasks["plan_gpu"], errors="coerce"),
        start=pd.to_numeric(tasks["start_time"], errors="coerce"),
        end=pd.to_numeric(tasks["end_time"], errors="coerce"),
    )
    per_job = tasks.groupby("job_name").agg(gpus=("gpus", "sum"), start=("start", "min"), end=("end", "max"))
    jobs = jobs.assign(submit=pd.to_numeric(jobs["start_time"], errors="coerce"))
    frame = jobs.join(per_job, on="job_name", how="inner")
    frame = frame[(frame["gpus"] > 0) & (frame["end"] > frame["start"]) & frame["submit"].notna()]
    return _finish(pd.DataFrame({
        "job_id": frame["job_name"].astype(str),
        "num_gpu": [math.ceil(g / 100 - 1e-9) for g in frame["gpus"]],
        "submit_time": frame["submit"], "duration": frame["end"] - frame["start"], "user": frame["user"],
    }), "PAI")  # fmt: skip


def helios_frame(log: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("job_id", "gpu_num", "submit_time", "duration") if c not in log.columns]
    if missing:
        raise UsageError(f"a Helios cluster_log.csv needs column(s) {', '.join(missing)}")
    submit = pd.to_datetime(log["submit_time"], errors="coerce")
    gpus = pd.to_numeric(log["gpu_num"], errors="coerce")
    duration = pd.to_numeric(log["duration"], errors="coerce")
    keep = (gpus > 0) & (duration > 0) & submit.notna()
    return _finish(pd.DataFrame({
        "job_id": log.loc[keep, "job_id"].astype(str), "num_gpu": gpus[keep].astype(int),
        "submit_time": (submit[keep] - submit[keep].min()).dt.total_seconds(), "duration": duration[keep],
        "user": log.loc[keep, "user"] if "user" in log.columns else None,
    }), "Helios")  # fmt: skip


def _finish(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """Arrivals from 0, and a network sensitivity drawn from the job id for these model-less traces."""
    if frame.empty:
        raise UsageError(f"the {what} trace has no job with GPUs and a run time")
    frame = frame.assign(submit_time=frame["submit_time"] - frame["submit_time"].min()).reset_index(drop=True)
    speeds = list(BLOX_SPEED.values())
    drawn = [speeds[zlib.crc32(str(job_id).encode()) % len(speeds)] for job_id in frame["job_id"]]
    return frame.assign(network_slowdown=[1.0 / speed for speed in drawn], slowdown_source="drawn (blox)")


def _when(text: object) -> float | None:
    """Seconds since the epoch of a Philly time string, or None when missing."""
    if not isinstance(text, str) or not text.strip() or text.strip() == "None":
        return None
    stamp = pd.Timestamp(text)
    return None if pd.isna(stamp) else stamp.timestamp()
