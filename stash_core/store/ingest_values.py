"""Checked values for ingest: document values as the types of the store's columns, and the per-iteration
samples and telemetry of a phase as Arrow tables (DuckDB scans them faster than pandas frames, and a None of
the document is marked as null explicitly). Every bad value is a one-line UsageError naming it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from stash_core.errors import UsageError
from stash_core.results.phase_series import SAMPLE_KEYS
from stash_core.terminal import without_surrogates
from stash_core.units import json_safe

_SAMPLE_FLOAT_KEYS = ("iteration_s", "data_s", "forward_s", "backward_s", "optimizer_s")
INT32_MAX = 2**31 - 1  # INTEGER columns
INT64_MAX = 2**63 - 1  # BIGINT columns


def text(value: Any) -> str | None:
    """A VARCHAR column's value: text as UTF-8 holds it (a file name's other bytes as \\xNN), else JSON."""
    if value is None:
        return None
    return without_surrogates(value) if isinstance(value, str) else json.dumps(json_safe(value))


def integer(value: Any, what: str, high: int = INT32_MAX) -> int | None:
    """A whole number from 0 to `high` (INT32_MAX: an INTEGER column, INT64_MAX: a BIGINT); NaN is None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"result file: {what} must be an integer, got {value!r}")
    if isinstance(value, float) and value != value:  # NaN stands for "unknown"
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise UsageError(f"result file: {what} must be an integer, got {value!r}")
    if not 0 <= value <= high:
        raise UsageError(f"result file: {what} must be an integer from 0 to {high:,}, got {value}")
    return value


# Beyond any figure a profile measures (seconds, shares, bytes a second): a larger one is a broken file, and
# its sums (a breakdown's remainder, a share) would overflow to an infinity that no JSON export can hold.
LARGEST_NUMBER = 1e15


def number(value: Any, what: str) -> float | None:
    """A finite float of magnitude at most LARGEST_NUMBER; NaN (unknown) is None; an infinity is refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"result file: {what} must be a number, got {value!r}")
    try:
        result = float(value)
    except OverflowError:
        raise UsageError(f"result file: {what} is a number too large to store") from None
    if np.isinf(result) or abs(result) > LARGEST_NUMBER:
        raise UsageError(f"result file: {what} is a number too large to store ({value!r})"[:200])
    return None if np.isnan(result) else result


def utc_text(value: str | None) -> str | None:
    """ISO time in UTC; a time without offset is taken as UTC. (validate_result checked it parses.)"""
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def check_time(value: Any, what: str) -> None:
    if value is None:
        return
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise UsageError(f"result file: {what} started_at is not an ISO 8601 time ({value!r})") from None


def json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(json_safe(value), allow_nan=False)


def typed_frame(rows: list[dict[str, Any]], dtypes: dict[str, str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(dtypes))
    if not rows:
        return frame
    return frame.astype({column: dtype for column, dtype in dtypes.items() if dtype != "str"})


def iteration_table(phase: dict[str, Any]) -> pa.Table | None:
    """The phase's kept iterations (means over the ranks), or None when it recorded no samples."""
    samples = phase.get("samples") or {}
    present = {key: values for key, values in samples.items() if key in SAMPLE_KEYS and values}
    if not present:
        return None
    count = len(next(iter(present.values())))  # validate_result checked that the lists agree in length
    name = phase["name"]
    columns: dict[str, pa.Array] = {"iteration": pa.array(np.arange(count, dtype=np.int32))}
    for key in _SAMPLE_FLOAT_KEYS:
        columns[key] = _nullable(_float_array(present.get(key), count, f"phase {name} samples.{key}"))
    columns["slowest_rank"] = _rank_array(present.get("slowest_rank"), count, name)
    return pa.table(columns)


def telemetry_table(phase: dict[str, Any]) -> pa.Table | None:
    """The phase's telemetry in long format (t_s, metric, value), or None when it has none."""
    telemetry = phase.get("telemetry") or {}
    times = telemetry.get("t_s") or []
    metrics = telemetry.get("metrics") or {}
    if not times or not metrics:
        return None
    name = phase["name"]
    times_s = _float_array(times, len(times), f"phase {name} telemetry.t_s")
    values = [
        _float_array(series, len(times), f"phase {name} telemetry {metric}")
        for metric, series in metrics.items()
    ]
    metric_index = np.repeat(np.arange(len(metrics), dtype=np.int32), len(times))
    return pa.table(
        {
            "t_s": _nullable(np.tile(times_s, len(metrics))),
            "metric": pa.DictionaryArray.from_arrays(pa.array(metric_index), pa.array(list(metrics))),
            "value": _nullable(np.concatenate(values)),
        }
    )


def _rank_array(ranks: list[Any] | None, count: int, phase: str) -> pa.Array:
    if not ranks:
        return pa.nulls(count, type=pa.int32())
    try:
        values = np.asarray(ranks, dtype=np.float64)  # None becomes NaN (null)
    except (TypeError, ValueError, OverflowError):
        values = None
    if values is not None and (values.ndim != 1 or len(values) != count):
        raise UsageError(
            f"result file: phase {phase} samples.slowest_rank must be a flat list of {count} ranks"
        )
    known = None if values is None else values[~np.isnan(values)]
    if known is None or np.any(known != np.floor(known)) or np.any(known < 0) or np.any(known > 2**31 - 1):
        raise UsageError(f"result file: phase {phase} samples.slowest_rank must hold ranks: whole numbers "
                         f"from 0 to {2**31 - 1:,}")  # fmt: skip
    return _nullable(values).cast(pa.int32())


def _nullable(values: np.ndarray) -> pa.Array:
    return pa.array(values, from_pandas=True)  # from_pandas: NaN becomes null


def _float_array(values: list[Any] | None, count: int, what: str) -> np.ndarray:
    if not values:
        return np.full(count, np.nan)
    try:
        array = np.asarray(values, dtype=np.float64)  # None becomes NaN, stored as NULL
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"result file: {what} holds non-numeric values") from None
    if array.ndim != 1 or len(array) != count:
        raise UsageError(f"result file: {what} must be a flat list of {count} numbers")
    if np.isinf(array).any():
        raise UsageError(f"result file: {what} holds a number too large to store")
    return array
