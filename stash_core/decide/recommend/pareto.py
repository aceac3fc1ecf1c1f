"""Which options meet the budget, their rank by cost, and the time-cost Pareto front."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.recommend.costs import OPTION_COLUMNS


def rank_options(
    rows: list[dict[str, Any]], budget_hours: float | None, max_usd: float | None
) -> pd.DataFrame:
    """The options as a frame with meets_time, meets_cost, feasible, pareto and rank (feasible ones, cheapest
    first), sorted feasible first, then by cost and time."""
    frame = pd.DataFrame(rows, columns=list(OPTION_COLUMNS))
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
    hours = frame["training_h"].to_numpy(dtype=float)[known]
    usd = frame["training_usd"].to_numpy(dtype=float)[known]
    # dominated[i]: some j no worse on both and better on one (all pairs at once: a few hundred options)
    no_worse = (hours[None, :] <= hours[:, None]) & (usd[None, :] <= usd[:, None])
    better = (hours[None, :] < hours[:, None]) | (usd[None, :] < usd[:, None])
    mask = np.zeros(len(frame), dtype=bool)
    mask[known] = ~(no_worse & better).any(axis=1)
    return pd.Series(mask, index=frame.index)
