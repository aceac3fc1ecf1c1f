"""Plain Python values from DataFrame cells, the one conversion Stash makes of them (None for a missing
value, numpy scalars unwrapped, timestamps as the caller asks), and a frame as CSV text."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from stash_core.terminal import csv_escaped, formula_safe


def is_missing(value: Any) -> bool:
    """None, pandas' NA or a float NaN (numpy's float64 included)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def plain(value: Any, times: str = "keep", finite: bool = False) -> Any:
    """A DataFrame cell as a plain Python value.

    Args:
        value: the cell.
        times: a pandas Timestamp kept as it is ("keep"), as a datetime.datetime ("datetime") or as ISO 8601
            text ("iso", for JSON).
        finite: an infinity is None too (for a result document, which holds no infinities).

    Returns:
        None for a missing value (None, pandas' NA and NaT, a NaN of any float type); a numpy scalar as its
        Python value; a Timestamp as `times` says; anything else (text, Decimal, date, dict) unchanged.
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        if times == "datetime":
            return value.to_pydatetime()
        return value.isoformat() if times == "iso" else value
    if isinstance(value, np.generic):  # numpy's int64, float32, bool_, datetime64 ...
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or (finite and math.isinf(value))):
        return None
    return value


def plain_row(row: dict[str, Any], times: str = "keep", finite: bool = False) -> dict[str, Any]:
    """A record (e.g. from DataFrame.to_dict(orient="records")) with every cell made plain (see plain)."""
    return {key: plain(value, times, finite) for key, value in row.items()}


def plain_records(frame: pd.DataFrame, times: str = "keep", finite: bool = False) -> list[dict[str, Any]]:
    """A frame's rows, each a dict of plain values (see plain)."""
    return [plain_row(row, times, finite) for row in frame.to_dict(orient="records")]


def csv_text(frame: pd.DataFrame) -> str:
    """`frame` as CSV text (no index) with every text cell csv_escaped (control characters as \\xNN, as `stash
    export --format csv` writes them) and then formula_safe, bytes as 0x-hex, and timestamps beyond Python's
    dates (DuckDB's 'infinity') written as DuckDB writes them: the one way Stash writes a CSV of a table."""
    safe = frame.copy()
    for column in safe.columns:
        series = safe[column]
        if pd.api.types.is_datetime64_any_dtype(series):
            safe[column] = _timestamps_text(series)
        elif series.dtype == object or pd.api.types.is_string_dtype(series):
            safe[column] = series.map(_cell_text)
    # An empty text as "" and a missing value (NULL) as nothing, as `stash export` (DuckDB's COPY) writes
    # them; pandas writes both as nothing (and a lone missing cell as ""). The stand-ins hold a control
    # character, which csv_escaped leaves in no cell.
    text = safe.to_csv(index=False, na_rep=_MISSING)
    return text.replace(_EMPTY_TEXT, '""').replace(_MISSING, "")


_EMPTY_TEXT = "\x1fempty\x1f"
_MISSING = "\x1fmissing\x1f"



def _cell_text(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return _blob_text(value)
    if isinstance(value, np.ndarray | list | tuple | dict):  # a DuckDB list, array or struct: as JSON, every
        return json.dumps(_nested_plain(value), ensure_ascii=True, default=str)  # digit (a repr cut them)
    if isinstance(value, str):  # a terminal escape in an error text stays text when the CSV is printed
        if value == "":
            return _EMPTY_TEXT  # written "" (csv_text), apart from a missing value
        value = csv_escaped(value)
    return formula_safe(value)


def _nested_plain(value: Any) -> Any:
    """A list, array or struct cell with every item plain (see plain; a NaN or infinity is None: null)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(key): _nested_plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_nested_plain(item) for item in value]
    if isinstance(value, Decimal):  # a DECIMAL (DuckDB's type of a literal such as 0.1): a number
        return _nested_plain(float(value))
    if isinstance(value, bytes | bytearray | memoryview):
        return _blob_text(value)  # as a BLOB cell of its own is written
    if isinstance(value, timedelta):
        return str(pd.Timedelta(value))
    return plain(value, times="iso", finite=True)


def _blob_text(value: bytes | bytearray | memoryview) -> str:
    return "0x" + bytes(value).hex()


INT64_MAX = 2**63 - 1


def _timestamps_text(series: pd.Series) -> list[str]:
    """ISO 8601 text of each timestamp; DuckDB's infinities as 'infinity' and '-infinity', NaT as empty."""
    unit = series.array.unit
    ticks = series.array.asi8
    texts = np.datetime_as_string(ticks.astype(f"datetime64[{unit}]"), unit=unit)
    suffix = "+00:00" if getattr(series.dtype, "tz", None) is not None else ""
    out = []
    for tick, text in zip(ticks.tolist(), texts.tolist(), strict=True):
        if tick == INT64_MAX:
            out.append("infinity")
        elif tick == -INT64_MAX:
            out.append("-infinity")
        elif tick == -INT64_MAX - 1:  # NaT
            out.append("")
        else:
            out.append(text.replace("T", " ") + suffix)
    return out
