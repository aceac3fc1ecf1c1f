"""Helios cluster_log.csv (S-Lab-System-Group/HeliosData) into the simulator's columns (formats.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched.columns import finish, numeric_column, shown_value

# A UTC offset or Z at the end of a datetime: 2020-04-01 08:00:00+08:00
_ZONE = r"(?:Z|[+-]\d\d:?\d\d)$"


def helios_frame(log: pd.DataFrame, where: str = "cluster_log.csv") -> pd.DataFrame:
    """GPU jobs with a duration; UsageError naming the line and column of a bad value (data row i is on
    line i + 2, after the header)."""
    missing = [c for c in ("job_id", "gpu_num", "submit_time", "duration") if c not in log.columns]
    if missing:
        raise UsageError(f"a Helios cluster_log.csv needs column(s) {', '.join(missing)}")
    log = log.reset_index(drop=True)
    gpus = numeric_column(log, "gpu_num", where, 2, minimum=0, allow_empty=False)
    duration = numeric_column(log, "duration", where, 2, minimum=0)
    submit_s = submit_seconds(log["submit_time"], where)
    keep = (gpus > 0) & (duration > 0)
    return finish(pd.DataFrame({
        "job_id": log.loc[keep, "job_id"], "num_gpu": gpus[keep], "submit_time": submit_s[keep],
        "duration": duration[keep], "user": log.loc[keep, "user"] if "user" in log.columns else None,
    }), "Helios")  # fmt: skip


def submit_seconds(raw: pd.Series, where: str) -> pd.Series:
    """Seconds of each submit_time: all epoch seconds, or all datetimes (ISO 8601, all with a UTC offset or
    all without); UsageError naming the first line that is neither, or that mixes the two kinds."""
    if pd.to_numeric(raw, errors="coerce").notna().all():
        return numeric_column(raw.to_frame("submit_time"), "submit_time", where, 2, allow_empty=False)
    text = raw.astype(str).str.strip()
    empty = raw.isna() | (text == "")
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise UsageError(f"{where} line {row + 2}, column submit_time: is empty")
    zoned = text.str.contains(_ZONE, regex=True).to_numpy()
    if zoned.any() and not zoned.all():
        odd = int(np.flatnonzero(~zoned if zoned.sum() > len(zoned) / 2 else zoned)[0])
        other = int(np.flatnonzero(zoned if odd in np.flatnonzero(~zoned) else ~zoned)[0])
        raise UsageError(
            f"{where} line {odd + 2}, column submit_time: {text[odd]!r} mixes time zones with line "
            f"{other + 2} ({text[other]!r}): give every time with a UTC offset or none"
        )
    stamps = pd.to_datetime(text, errors="coerce", format="ISO8601", utc=bool(zoned.all()))
    if stamps.isna().any():
        row = int(np.flatnonzero(stamps.isna().to_numpy())[0])
        raise UsageError(
            f"{where} line {row + 2}, column submit_time: {shown_value(raw[row])} is not a datetime "
            "(YYYY-MM-DD HH:MM:SS) nor epoch seconds"
        )
    return (stamps - stamps.min()).dt.total_seconds()
