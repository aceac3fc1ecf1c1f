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
    # A written nan is a number that is not finite, as inf is (pandas reads both as floats).
    nan_text = (raw.astype(str).str.strip().str.lower().str.lstrip("+-") == "nan").to_numpy() & ~empty
    number = values.notna().to_numpy() | nan_text
    finite = np.isfinite(values.fillna(0.0).to_numpy()) & ~nan_text
    problems = [(~number & ~empty, "is not a number"), (number & ~finite, "is not a finite number")]
    if minimum is not None:
        problems.append((number & (values.fillna(minimum).to_numpy() < minimum), f"is below {minimum:g}"))
    if not allow_empty:
        problems.append((empty, "is empty"))
    for rows, reason in problems:
        if rows.any():
            row = int(np.flatnonzero(rows)[0])
            shown = "" if reason == "is empty" else f" {shown_value(_number_as_written(raw[row]))}"
            raise UsageError(f"{where} line {first_line + row}, column {column}:{shown} {reason}")
    return values.set_axis(frame.index)


def _number_as_written(value: object) -> object:
    """A cell read as text that holds a number: as the number (shown as written), else the text."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def shown_value(value: object) -> str:
    """A cell as given: text quoted, numbers as written (inf, -inf, 2.5)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f"{float(value):.15g}"
    return repr(value)


def read_header_csv(text: io.StringIO, where: str) -> pd.DataFrame:
    """A trace CSV with a header: column names as format detection reads them (spaces around them dropped,
    lower case; one named twice refused), every cell as its text (an id `007` stays `007`, a `true` is not a
    number) and only an empty cell missing; rows longer than the header refused."""
    header = next(csv.reader([text.readline()]), [])
    text.seek(0)
    names = [cell.strip().lower() for cell in header]
    seen: set[str] = set()
    for name in names:
        if name and name in seen:
            raise UsageError(f"{where}: the header names the column {name!r} twice; keep one")
        seen.add(name)
    frame = pd.read_csv(text, dtype=str, keep_default_na=False, na_values=[""])
    refuse_extra_fields(frame, where, len(frame.columns))
    if len(names) != len(frame.columns):  # a header pandas read otherwise (a quoted line break): its names
        names = [str(column).strip().lower() for column in frame.columns]
    return frame.set_axis([name or column for name, column in zip(names, frame.columns, strict=True)], axis=1)


def refuse_extra_fields(frame: pd.DataFrame, where: str, expected: int) -> None:
    """pandas takes the leading fields of rows longer than the header as an index: refuse instead."""
    if not isinstance(frame.index, pd.RangeIndex):
        extra = frame.index.nlevels
        raise UsageError(
            f"{where}: the rows have {expected + extra} fields, expected {expected} (the header's columns)"
        )


def finish(
    frame: pd.DataFrame, what: str, where: str | None = None, listed: int | None = None
) -> pd.DataFrame:
    """Arrivals from 0, and a network sensitivity drawn from the job id for these model-less traces; a
    trace without such jobs refused, naming its file `where`. Of the `listed` jobs, those left out (no GPUs or
    no run time) are counted in attrs["left_out"]."""
    if frame.empty:
        named = f"{where}: " if where else ""
        raise UsageError(f"{named}the {what} trace has no job with GPUs and a run time")
    frame = frame.assign(submit_time=frame["submit_time"] - frame["submit_time"].min()).reset_index(drop=True)
    speeds = list(BLOX_SPEED.values())
    drawn = [speeds[zlib.crc32(str(job_id).encode()) % len(speeds)] for job_id in frame["job_id"]]
    frame = frame.assign(network_slowdown=[1.0 / speed for speed in drawn], slowdown_source="drawn (blox)")
    frame.attrs["left_out"] = 0 if listed is None else listed - len(frame)
    return frame
