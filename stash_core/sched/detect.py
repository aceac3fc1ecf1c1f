"""Which trace format a file is in, from what it holds: its first character and its header's columns.

  philly    JSON (starts with [ or {)
  tiresias  a CSV header with job_id, num_gpu and submit_time
  helios    a CSV header with job_id, gpu_num, submit_time and duration
  pai2020   no header: the first line holds 6 fields whose last two are numbers (pai_job_table.csv)
A file that fits none, or more than one, is refused with the list of formats (give --trace-format); a binary
file (a NUL byte in its head) is refused as such.
"""

from __future__ import annotations

import csv
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.sched_names import TRACE_FORMATS
from stash_core.userfiles import read_user_bytes

FORMATS = TRACE_FORMATS
SNIFF_BYTES = 64 * 1024  # enough for any header line of these formats
MAX_TRACE_BYTES = 2 * 1024**3  # Philly's cluster_job_log is about 0.5 GB; a FIFO or /dev/zero never ends


def detect_format(path: Path) -> str:
    """The format of the trace at `path`; UsageError if its content says none or several."""
    # The one reader of user files: a FIFO or a device is refused by name, a missing file said so.
    raw = read_user_bytes(path, "trace", MAX_TRACE_BYTES, head_bytes=SNIFF_BYTES)
    if b"\0" in raw:  # a database or an archive, whatever its first byte happens to be (never a text trace)
        raise UsageError(
            f"cannot tell the format of trace {path}: it is binary (a NUL byte at {raw.index(0)})"
        )
    head = raw.decode("utf-8", errors="replace")
    if not head.strip("\ufeff \t\r\n"):
        raise UsageError(f"trace {path} is empty")
    fits = formats_of(head)
    if len(fits) == 1:
        return fits[0]
    what = "fits " + " and ".join(fits) if fits else "fits none of them"
    raise UsageError(
        f"cannot tell the format of trace {path} from its columns ({what}): give --trace-format, one of "
        f"{', '.join(FORMATS)}"
    )


def formats_of(head: str) -> list[str]:
    """Every format the start of a file fits."""
    text = head.lstrip("\ufeff \t\r\n")
    if not text:
        return []
    if text[0] in "[{":
        return ["philly"]
    line = text.splitlines()[0]
    fields = [field.strip().lower() for field in next(csv.reader([line]), [])]
    names = set(fields)
    fits = []
    if {"job_id", "num_gpu", "submit_time"} <= names:
        fits.append("tiresias")
    if {"job_id", "gpu_num", "submit_time", "duration"} <= names:
        fits.append("helios")
    if len(fields) == 6 and all(_number(value) for value in fields[4:]):
        fits.append("pai2020")
    return fits


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
