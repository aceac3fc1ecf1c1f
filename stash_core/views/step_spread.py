"""The spread of a configuration's whole iteration, drawn at the end of its stall bar: a measured one's 95%
interval, a predicted one's stated error (its compute's and its communication's, added: costs.step_error)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from stash_core.units import finite_float
from stash_core.views.compare_spread import relative_spread


def step_bounds(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """(low, high) seconds of a row's iteration, by the spread Compare draws (compare_spread.relative_spread);
    (None, None) where it has no spread to draw."""
    iteration_s, spread = finite_float(row.get("iteration_s")), relative_spread(row)
    if iteration_s is None or spread is None:
        return None, None
    half_s = spread * iteration_s
    return max(0.0, iteration_s - half_s), iteration_s + half_s


def with_step_bounds(long: pd.DataFrame, options: pd.DataFrame, key: str = "run_label") -> pd.DataFrame:
    """`long` (a stall frame, one row per part of each option's bar) with step_low and step_high on each
    option's last part (NaN on the others): the chart draws one line per bar, across its end, beside the
    parts' own intervals (error_low, error_high), which stay."""
    bounds = {row["config"]: step_bounds(row) for row in options.to_dict(orient="records")}
    ends = ~long[key].duplicated(keep="last")
    pairs = [bounds.get(label, (None, None)) if end else (None, None)
             for label, end in zip(long[key], ends, strict=True)]  # fmt: skip
    low = [math.nan if pair[0] is None else pair[0] for pair in pairs]
    high = [math.nan if pair[1] is None else pair[1] for pair in pairs]
    return long.assign(step_low=low, step_high=high)

