"""Plain Python values from DataFrame cells: None for a missing value, numpy scalars unwrapped."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from stash_core.terminal import formula_safe


def is_missing(value: Any) -> bool:
    """None, pandas' NA or a float NaN (numpy's float64 included)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def plain(value: Any) -> Any:
    """None for None, pandas' NA and NaN; a numpy scalar as its Python value; anything else unchanged."""
    if is_missing(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """A record (e.g. from DataFrame.to_dict(orient="records")) with every cell made plain."""
    return {key: plain(value) for key, value in row.items()}


def csv_text(frame: pd.DataFrame) -> str:
    """`frame` as CSV text (no index) with every text cell formula_safe: the one way Stash writes a CSV of
    a table."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = safe[column].map(formula_safe)
    return safe.to_csv(index=False)
