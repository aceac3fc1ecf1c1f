"""Several runs of one job as one row: the mean of each figure and the 95% interval of that mean."""

from __future__ import annotations

import math

import pandas as pd

from stash_core.analysis.stats import runs_mean_ci95


def mean_of(runs: pd.DataFrame, column: str) -> float:
    """The runs' mean of a numeric column; NaN for a column an old database's stall_breakdown lacks, or
    with no figure."""
    values = _numbers(runs, column)
    return sum(values) / len(values) if values else math.nan


def mean_ci95_of(runs: pd.DataFrame, column: str) -> float:
    """The 95% interval of the runs' mean of `column` (a figure in seconds, `<name>_s`), from the runs'
    spread and each run's own interval (`<name>_ci95_s`): stats.runs_mean_ci95."""
    values, cis = _numbers(runs, column), _numbers(runs, column.removesuffix("_s") + "_ci95_s")
    return runs_mean_ci95(values, cis) if values or cis else math.nan


def _numbers(runs: pd.DataFrame, column: str) -> list[float]:
    if column not in runs.columns:
        return []
    return pd.to_numeric(runs[column], errors="coerce").dropna().tolist()
