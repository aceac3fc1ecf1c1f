"""Public cluster traces read into the simulator's columns (job_id, num_gpu, submit_time, duration, ...).

  tiresias  CSV with a header: job_id, num_gpu, submit_time (s), duration (s) or iterations + iteration_s,
            optional model_name, network_slowdown, grad_bytes, estimate_s (trace.py)
  philly    Microsoft Philly cluster_job_log (msr-fiddle/philly-traces): a JSON list of jobs with jobid,
            user, vc, status, submitted_time ("%Y-%m-%d %H:%M:%S") and attempts[] of start_time, end_time
            and detail[] of {ip, gpus[]}. GPUs = the most any attempt held (sum of len(gpus) over its
            detail); duration = the sum of its attempts' run times; jobs without a timed attempt or GPUs
            are left out; a missing or repeated jobid, or a field of the wrong type, is refused (philly.py)
  pai2020   Alibaba PAI 2020 (alibaba/clusterdata cluster-trace-gpu-v2020): pai_job_table.csv (no header:
            job_name, inst_id, user, status, start_time, end_time) with pai_task_table.csv beside it (no
            header: job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem,
            plan_gpu, gpu_type). Times are seconds. submit = the job's start_time; duration = its tasks'
            last end - first start; GPUs = ceil(sum over tasks of inst_num x plan_gpu / 100) (plan_gpu is
            percent of one GPU); jobs without GPUs or times are left out; every cell as written (a job NA
            is a job); a value that is text, not finite or negative (inst_num, plan_gpu), an empty
            job_name or a task ending before it starts is refused with its file, line and column (pai.py)
  helios    Helios cluster_log.csv (S-Lab-System-Group/HeliosData), header job_id, user, vc, gpu_num,
            cpu_num, node_num, state, submit_time, start_time, end_time (datetimes), duration (s), queue;
            submit_time is ISO 8601 (all with a UTC offset or none) or epoch seconds; CPU-only jobs
            (gpu_num 0) and jobs without a duration are left out; a bad value is refused (helios.py)
None of Philly, PAI or Helios names models. Their jobs get a network sensitivity drawn, reproducibly from the
job id, from Blox's placement penalties (speed 0.9, 0.8, 0.6 or 0.7 when spread, each a quarter of the
jobs): slowdown source "drawn (blox)". Submit times are shifted so the first job arrives at 0.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.columns import read_header_csv
from stash_core.sched.detect import MAX_TRACE_BYTES
from stash_core.sched.helios import helios_frame
from stash_core.sched.pai import read_pai
from stash_core.sched.philly import philly_frame
from stash_core.sched.trace import TraceJob, jobs_from_frame
from stash_core.sched_names import TRACE_FORMATS
from stash_core.userfiles import read_user_json, read_user_text

FORMATS = TRACE_FORMATS


def load_trace(path: Path, db_path: Path | None = None, fmt: str = "tiresias") -> list[TraceJob]:
    """Jobs of a trace file, with their network sensitivity; UsageError naming the problem otherwise."""
    return load_trace_counted(path, db_path, fmt)[0]


def load_trace_counted(path: Path, db_path: Path | None, fmt: str) -> tuple[list[TraceJob], int]:
    """load_trace's jobs, and how many jobs of the file were left out (no GPUs or no run time)."""
    frame = read_trace_frame(path, fmt)
    return jobs_from_frame(frame, db_path, str(path)), int(frame.attrs.get("left_out", 0))


def _text(path: Path) -> io.StringIO:
    """A trace's text (a regular file of at most MAX_TRACE_BYTES, BOM dropped) for pandas to parse."""
    return io.StringIO(read_user_text(path, "trace", MAX_TRACE_BYTES))


def read_trace_frame(path: Path, fmt: str) -> pd.DataFrame:
    """The trace at `path` in the simulator's columns; UsageError naming the problem otherwise."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown trace format {fmt!r}: choose {', '.join(FORMATS)}")
    try:
        if fmt == "tiresias":
            try:
                frame = read_header_csv(_text(path), str(path))
            except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
                raise UsageError(f"trace {path} is not a CSV file: {_parse_words(exc)}") from None
            # Where a slowdown came from is Stash's to say (trace, measured, drawn), never the file's.
            return frame.drop(columns=["slowdown_source"], errors="ignore")
        if fmt == "philly":
            return philly_frame(read_user_json(path, "philly trace", MAX_TRACE_BYTES), str(path))
        if fmt == "pai2020":
            return read_pai(Path(path))
        return helios_frame(read_header_csv(_text(path), str(path)), str(path))
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"trace {path} is not a {fmt} trace: {_parse_words(exc)}") from None


# pandas' words for a row of another width than the header's
_WIDTH_RE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _parse_words(exc: Exception) -> str:
    """Why a file could not be read as a table, in one line of plain words."""
    text = (str(exc).splitlines() or [type(exc).__name__])[0]
    width = _WIDTH_RE.search(text)
    if width:
        return f"line {width[2]} has {width[3]} fields where the header has {width[1]}"
    return text
