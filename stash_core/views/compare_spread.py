"""The uncertainty of the Compare page's derived figures: an epoch, a throughput and a cost are the iteration
time scaled, so each carries the iteration's relative spread (a measured row's 95% interval, a predicted row's
stated error: compute's and communication's added)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from stash_core.decide.recommend.costs import step_error
from stash_core.units import finite_float, relative_ci95


def relative_spread(row: dict[str, Any]) -> float | None:
    """The row's iteration time's relative half-width: its 95% interval where measured, its stated error
    where predicted; None where neither is known."""
    if row.get("source") == "predicted":
        return step_error(row)
    return relative_ci95(row)


def told_apart(first: pd.Series, second: pd.Series) -> bool | None:
    """Whether two configurations' throughputs differ beyond their 95% intervals (each throughput's relative
    interval is its iteration time's); None where either interval is unknown."""
    spreads = []
    for row in (first, second):
        spread = relative_spread(row)
        if spread is None:
            return None
        spreads.append(float(row["samples_per_s"]) * spread)
    difference = abs(float(first["samples_per_s"]) - float(second["samples_per_s"]))
    return bool(difference > math.hypot(*spreads))


def with_spread(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """`frame` with `spread` (relative_spread) and, for each column, `<column>_low` and `<column>_high`: the
    figure at the iteration's spread (a time or cost grows with the iteration; NaN where it is not known).
    A throughput's bounds (samples per second, per GPU, per dollar) are the inverse's: 1 / (1 ± spread); where
    the iteration's interval reaches 0 its high bound has none (infinite: a chart draws it past its bars)."""
    spreads = [relative_spread(row) for row in frame.to_dict(orient="records")]
    out = frame.assign(spread=[math.nan if s is None else s for s in spreads])
    for column in columns:
        values = pd.to_numeric(out[column], errors="coerce")
        if column.startswith("samples_per_"):
            low = values / (1 + out["spread"])
            high = (values / (1 - out["spread"]).clip(lower=1e-9)).where(~(out["spread"] >= 1), math.inf)
        else:
            # floored at 1% of the figure: 0 has no place on a log axis, and its rule was dropped there
            low, high = values * (1 - out["spread"]).clip(lower=0.01), values * (1 + out["spread"])
        out[f"{column}_low"], out[f"{column}_high"] = low, high
    return out


OPEN_END = 1.5  # a bound with no end is drawn to half again the largest figure, past every bar


def drawn_ends(data: pd.DataFrame, column: str) -> pd.DataFrame:
    """`data` as a chart draws `column`'s intervals: a high bound with no end (infinite) at OPEN_END times
    the largest figure, past every bar (a chart's data holds no infinity)."""
    if f"{column}_high" not in data or data.empty:
        return data
    ends = data[f"{column}_high"].replace(math.inf, float(data[column].max()) * OPEN_END)
    return data.assign(**{f"{column}_high": ends})


NARROW_SPREAD = 0.2  # within it a throughput's interval is near enough to ± its figure times the spread


def throughput_interval(samples_per_s: float, spread: float | None) -> tuple[float, float] | None:
    """(low, high) of a throughput whose iteration time has relative half-width `spread`: its inverse's bounds
    (high infinite where the iteration's interval reaches 0); None where the spread is unknown."""
    if spread is None or spread != spread:
        return None
    return samples_per_s / (1 + spread), (samples_per_s / (1 - spread) if spread < 1 else math.inf)


def with_interval(text: str, half_width_text: str | None) -> str:
    """'216.2 ± 21.3' (the half-width's text beside the figure's), or the figure alone."""
    return f"{text} ± {half_width_text}" if half_width_text and text not in ("", "–", "-") else text


def not_told_apart(frame: pd.DataFrame, column: str, higher_is_better: bool) -> str:
    """"; 3 more within its ±38% expected error: not told apart" for the predicted rows of `frame` whose
    `column` lies within the best row's stated error of the best's, else "": predictions that equal or nearly
    equal each other were named as one winner."""
    values = pd.to_numeric(frame[column], errors="coerce")
    best = values.max() if higher_is_better else values.min()
    spreads = with_spread(frame, ())["spread"]
    spread = finite_float(spreads[values == best].max()) or 0.0
    reach = best / (1 + spread) if higher_is_better else best * (1 + spread)
    close = int(((values >= reach) if higher_is_better else (values <= reach)).sum()) - 1
    if close < 1:
        return ""
    if not spread:
        return f"; {close} more at the same figure"
    return f"; {close} more within its ±{spread:.0%} expected error: not told apart"
