"""Which options meet the budget, their rank by cost, and the time-cost Pareto front."""

from __future__ import annotations

from typing import Any

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
    known = frame["training_usd"].notna() & frame["training_h"].notna()
    mask = pd.Series(False, index=frame.index)
    points = frame.loc[known, ["training_h", "training_usd"]]
    for index, (hours, usd) in points.iterrows():
        dominated = (
            (points["training_h"] <= hours)
            & (points["training_usd"] <= usd)
            & ((points["training_h"] < hours) | (points["training_usd"] < usd))
        ).any()
        mask[index] = not dominated
    return mask
