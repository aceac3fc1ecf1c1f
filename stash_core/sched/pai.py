"""Alibaba PAI 2020 (cluster-trace-gpu-v2020) job and task tables into the simulator's columns."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.columns import finish, numeric_column, shown_value
from stash_core.userfiles import read_user_text

MAX_JOB_GPUS = 10**6  # far beyond any cluster; a larger count is a broken row
MAX_PAI_BYTES = 4 * 1024 * 1024 * 1024  # the task table of the 2020 trace is about 1 GB

PAI_JOB_COLUMNS = ["job_name", "inst_id", "user", "status", "start_time", "end_time"]
PAI_TASK_COLUMNS = ["job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu",
                    "plan_mem", "plan_gpu", "gpu_type"]  # fmt: skip


def task_table_of(job_path: Path) -> Path:
    """Where the task table of a PAI job table is read from: beside it, `job_table` named `task_table` (a
    path with no name, `.` or `/`, has no such table: itself)."""
    if not Path(job_path).name:
        return Path(job_path)
    return Path(job_path).with_name(Path(job_path).name.replace("job_table", "task_table"))


def read_pai(job_path: Path) -> pd.DataFrame:
    """pai_job_table.csv with pai_task_table.csv beside it."""
    task_path = task_table_of(job_path)
    if task_path == Path(job_path) or not task_path.exists():
        raise UsageError(f"{job_path}: the PAI task table is read from pai_task_table.csv beside it")
    return pai_frame(_table(job_path, PAI_JOB_COLUMNS), _table(task_path, PAI_TASK_COLUMNS),
                     str(job_path), str(task_path))  # fmt: skip


def _table(path: Path, columns: list[str]) -> pd.DataFrame:
    # The reader of user files: a regular file of bounded size, its byte-order mark dropped. Every cell as
    # written (a job named NA or null is a job), only an empty cell missing.
    text = io.StringIO(read_user_text(path, "trace", MAX_PAI_BYTES))
    table = pd.read_csv(text, header=None, dtype=str, keep_default_na=False, na_values=[""])
    if table.shape[1] != len(columns):
        raise UsageError(
            f"{path}: {table.shape[1]} columns, expected {len(columns)} ({', '.join(columns)}), no header"
        )
    return table.set_axis(columns, axis=1)


def pai_frame(jobs: pd.DataFrame, tasks: pd.DataFrame, job_file: str = "pai_job_table.csv",
              task_file: str = "pai_task_table.csv") -> pd.DataFrame:  # fmt: skip
    """Tables without header, as read by read_pai; UsageError naming file, line and column of a bad value."""
    _refuse_empty(jobs, "job_name", job_file)
    _refuse_empty(tasks, "job_name", task_file)
    tasks = tasks.assign(
        gpus=numeric_column(tasks, "inst_num", task_file, 1, minimum=0)
        * numeric_column(tasks, "plan_gpu", task_file, 1, minimum=0),
        start=numeric_column(tasks, "start_time", task_file, 1),
        end=numeric_column(tasks, "end_time", task_file, 1),
    )
    _refuse_end_before_start(tasks, task_file)
    per_job = tasks.groupby("job_name").agg(gpus=("gpus", "sum"), start=("start", "min"), end=("end", "max"))
    jobs = jobs.assign(submit=numeric_column(jobs, "start_time", job_file, 1))
    numeric_column(jobs, "end_time", job_file, 1)
    frame = jobs.join(per_job, on="job_name", how="inner")
    frame = frame[(frame["gpus"] > 0) & (frame["end"] > frame["start"]) & frame["submit"].notna()]
    too_many = frame[~(frame["gpus"] <= MAX_JOB_GPUS * 100)]  # inst_num x plan_gpu of 1e300 each: inf
    if len(too_many):
        raise UsageError(f"{task_file}: job {too_many['job_name'].iloc[0]!s:.60} asks for more than "
                         f"{MAX_JOB_GPUS:,} GPUs (inst_num x plan_gpu / 100)")  # fmt: skip
    return finish(pd.DataFrame({
        "job_id": frame["job_name"].astype(str),
        "num_gpu": [math.ceil(g / 100 - 1e-9) for g in frame["gpus"]],
        "submit_time": frame["submit"], "duration": frame["end"] - frame["start"], "user": frame["user"],
    }), "PAI", job_file, listed=len(jobs))  # fmt: skip


def _refuse_empty(table: pd.DataFrame, column: str, where: str) -> None:
    """A row without its job's name belongs to no job: refused, naming its line (row i is on line i + 1)."""
    empty = table[column].isna().to_numpy() | (table[column].astype(str).str.strip() == "").to_numpy()
    if empty.any():
        raise UsageError(f"{where} line {int(np.flatnonzero(empty)[0]) + 1}, column {column}: is empty")


def _refuse_end_before_start(tasks: pd.DataFrame, where: str) -> None:
    """A task that ends before it starts is a broken row, not a task without times: refused with its line."""
    backwards = (tasks["end"] < tasks["start"]).to_numpy()
    if backwards.any():
        row = int(np.flatnonzero(backwards)[0])
        raise UsageError(
            f"{where} line {row + 1}, column end_time: {shown_value(tasks['end'].iloc[row])} is before the "
            f"task's start_time {shown_value(tasks['start'].iloc[row])}"
        )
