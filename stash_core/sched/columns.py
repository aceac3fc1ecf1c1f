"""Checks shared by the readers of public traces: numbers in a column, located by file line, and the
arrivals and drawn network sensitivity every model-less trace gets."""

from __future__ import annotations

import csv
import io

import zlib

import numpy as np
import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.trace import BLOX_SPEED


def numeric_column(
    frame: pd.DataFrame, column: str, where: str, first_line: int, minimum: float | None = None,
    allow_empty: bool = True,
) -> pd.Series:  # fmt: skip
    """`column` as floats (NaN where empty, if allowed); UsageError naming `where`, the file line (data row i
    is on line first_line + i) and the column of the first value that is text, not finite, or below
    `minimum`."""
    raw = frame[column].reset_index(drop=True)
    values = pd.to_numeric(raw, errors="coerce")
    empty = (raw.isna() | (raw.astype(str).str.strip() == "")).to_numpy()
    number = values.notna().to_numpy()
    finite = np.isfinite(values.fillna(0.0).to_numpy())
    problems = [(~number & ~empty, "is not a number"), (number & ~finite, "is not a finite number")]
    if minimum is not None:
        problems.append((number & (values.fillna(minimum).to_numpy() < minimum), f"is below {minimum:g}"))
    if not allow_empty:
        problems.append((empty, "is empty"))
    for rows, reason in problems:
        if rows.any():
            row = int(np.flatnonzero(rows)[0])
            shown = "" if reason == "is empty" else f" {shown_value(raw[row])}"
            raise UsageError(f"{where} line {first_line + row}, column {column}:{shown} {reason}")
    return values.set_axis(frame.index)


def shown_value(value: object) -> str:
    """A cell as given: text quoted, numbers as written (inf, -inf, 2.5)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f"{float(value):.15g}"
    return repr(value)


def refuse_duplicate_columns(text: io.StringIO, where: str) -> io.StringIO:
    """A header that names a column twice is refused (pandas would keep the first as it is and rename the
    second "name.1", so one of them would be read silently); the text is returned rewound."""
    header = next(csv.reader([text.readline()]), [])
    text.seek(0)
    seen: set[str] = set()
    for name in (cell.strip() for cell in header):
        if name and name in seen:
            raise UsageError(f"{where}: the header names the column {name!r} twice; keep one")
        seen.add(name)
    return text


def refuse_extra_fields(frame: pd.DataFrame, where: str, expected: int) -> None:
    """pandas takes the leading fields of rows longer than the header as an index: refuse instead."""
    if not isinstance(frame.index, pd.RangeIndex):
        extra = frame.index.nlevels
        raise UsageError(
            f"{where}: the rows have {expected + extra} fields, expected {expected} (the header's columns)"
        )


def finish(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """Arrivals from 0, and a network sensitivity drawn from the job id for these model-less traces."""
    if frame.empty:
        raise UsageError(f"the {what} trace has no job with GPUs and a run time")
    frame = frame.assign(submit_time=frame["submit_time"] - frame["submit_time"].min()).reset_index(drop=True)
    speeds = list(BLOX_SPEED.values())
    drawn = [speeds[zlib.crc32(str(job_id).encode()) % len(speeds)] for job_id in frame["job_id"]]
    return frame.assign(network_slowdown=[1.0 / speed for speed in drawn], slowdown_source="drawn (blox)")
