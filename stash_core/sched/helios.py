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
    }), "Helios", where, listed=len(log))  # fmt: skip


def submit_seconds(raw: pd.Series, where: str) -> pd.Series:
    """Seconds of each submit_time: all epoch seconds, or all datetimes (ISO 8601, all with a UTC offset or
    all without); UsageError naming the first line that is neither, or that mixes the two kinds."""
    epoch = pd.to_numeric(raw, errors="coerce").notna().to_numpy()
    if epoch.all():
        return numeric_column(raw.to_frame("submit_time"), "submit_time", where, 2, allow_empty=False)
    text = raw.astype(str).str.strip()
    empty = raw.isna() | (text == "")
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise UsageError(f"{where} line {row + 2}, column submit_time: is empty")
    if epoch.any():
        _refuse_mixed_forms(text, epoch, where)
    zoned = text.str.contains(_ZONE, regex=True).to_numpy()
    if zoned.any() and not zoned.all():
        odd = int(np.flatnonzero(~zoned if zoned.sum() > len(zoned) / 2 else zoned)[0])
        other = int(np.flatnonzero(zoned if odd in np.flatnonzero(~zoned) else ~zoned)[0])
        raise UsageError(
            f"{where} line {odd + 2}, column submit_time: {text[odd]!r} mixes time zones with line "
            f"{other + 2} ({text[other]!r}): give every time with a UTC offset or none"
        )
    stamps = pd.to_datetime(text, errors="coerce", format="ISO8601", utc=bool(zoned.all()))
    if stamps.isna().any():  # a cell that is neither form (among epoch seconds: not one of those)
        bad = stamps.isna().to_numpy()
        row = int(np.flatnonzero(bad & ~epoch if (bad & ~epoch).any() else bad)[0])
        raise UsageError(
            f"{where} line {row + 2}, column submit_time: {shown_value(raw[row])} is not a datetime "
            "(YYYY-MM-DD HH:MM:SS) nor epoch seconds"
        )
    return (stamps - stamps.min()).dt.total_seconds()


def _refuse_mixed_forms(text: pd.Series, epoch: np.ndarray, where: str) -> None:
    """Some submit_times epoch seconds (`epoch`), others datetimes: UsageError naming a line of the fewer
    form and one of the other. Cells that are neither are left to the datetime check."""
    dated = (~epoch & pd.to_datetime(text, errors="coerce", format="ISO8601", utc=True).notna()).to_numpy()
    if not dated.any():
        return
    odd, other = (epoch, dated) if epoch.sum() <= dated.sum() else (dated, epoch)
    first, second = int(np.flatnonzero(odd)[0]), int(np.flatnonzero(other)[0])
    forms = {True: "epoch seconds", False: "a datetime"}
    raise UsageError(
        f"{where} line {first + 2}, column submit_time: {text[first]!r} is {forms[bool(epoch[first])]} "
        f"but line {second + 2} ({text[second]!r}) is {forms[bool(epoch[second])]}: the file mixes the two "
        "forms; give every submit_time as a datetime or every one as epoch seconds"
    )
