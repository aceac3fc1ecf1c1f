"""Which options meet the budget, their rank by cost, and the time-cost Pareto front."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.recommend.costs import OPTION_COLUMNS, STALL_NAMES


def rank_options(
    rows: list[dict[str, Any]], budget_hours: float | None, max_usd: float | None
) -> pd.DataFrame:
    """The options as a frame with meets_time, meets_cost, feasible, pareto and rank (feasible ones, cheapest
    first), sorted feasible first, then by cost and time."""
    frame = pd.DataFrame(rows, columns=list(OPTION_COLUMNS))
    # a stall no option has a figure of (CPU, disk without a profile) is NaN as the others, not None objects
    stalls = [f"{stall}_s" for stall in STALL_NAMES]
    frame[stalls] = frame[stalls].astype(float)
    if frame.empty:
        for column in ("meets_time", "meets_cost", "feasible", "pareto"):
            frame[column] = frame[column].astype(bool)
        return frame
    frame["meets_time"] = True if budget_hours is None else frame["training_h"] <= budget_hours
    has_cost = frame["training_usd"].notna()
    frame["meets_cost"] = has_cost & (True if max_usd is None else frame["training_usd"] <= max_usd)
    frame["feasible"] = frame["meets_time"] & frame["meets_cost"]
    frame["pareto"] = pareto_mask(frame)
    order = frame[frame["feasible"]].sort_values(["training_usd", "training_h", "config"]).index
    frame["rank"] = pd.array([None] * len(frame), dtype="Int64")
    frame.loc[order, "rank"] = range(1, len(order) + 1)
    return frame.sort_values(
        ["feasible", "training_usd", "training_h"], ascending=[False, True, True], na_position="last"
    ).reset_index(drop=True)


def pareto_mask(frame: pd.DataFrame) -> pd.Series:
    """True for the options with a time and a cost that no other option beats on both."""
    known = (frame["training_usd"].notna() & frame["training_h"].notna()).to_numpy()
    # Times equal to six significant figures are one time: two steps on one host-overhead floor differ in
    # the last bits, and the dearer of them is not a choice (it was marked on the front).
    hours = np.array([float(f"{h:.6g}") for h in frame["training_h"].to_numpy(dtype=float)[known]])
    usd = frame["training_usd"].to_numpy(dtype=float)[known]
    # One sweep by time (a catalog of thousands of instances makes too many pairs to compare each): an
    # option is beaten by a faster one that costs no more, or by an equally fast one that costs less.
    order = np.lexsort((usd, hours))  # by time, then cost
    hours, usd = hours[order], usd[order]
    first = np.r_[True, hours[1:] != hours[:-1]] if len(hours) else np.zeros(0, dtype=bool)
    group = np.cumsum(first) - 1  # which distinct time each option has
    cheapest = usd[first]  # of each time (sorted by cost within it)
    cheapest_faster = np.r_[np.inf, np.minimum.accumulate(cheapest)[:-1]] if len(cheapest) else cheapest
    beaten = (cheapest_faster[group] <= usd) | (cheapest[group] < usd)
    front = np.empty(len(order), dtype=bool)
    front[order] = ~beaten
    mask = np.zeros(len(frame), dtype=bool)
    mask[known] = front
    return pd.Series(mask, index=frame.index)
