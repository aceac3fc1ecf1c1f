"""A phase's series, checked before a result file is stored: its per-iteration samples (numbers, no negative
time, one length, their mean the phase's) and its telemetry (one value per time, none negative, a share at
most 100%). A file edited by hand would otherwise be stored with series no run measured."""

from __future__ import annotations

import math
from typing import Any

from stash_core.errors import UsageError
from stash_core.results.values import check_identifier, check_numbers
from stash_core.units import finite_float

SAMPLE_KEYS = ("iteration_s", "data_s", "forward_s", "backward_s", "optimizer_s", "slowest_rank")
# The samples' mean over what they are made of, the launches' means weighted by their iterations (the
# phase's mean weighs each launch the same, and a slow launch stopped early has few iterations): twice or
# half is an edit, not rounding or pooling.
MEAN_RATIO_LIMIT = 2.0
# Above any machine's memory in bytes, any rate in MB/s or power in watts: such a value was not measured.
TELEMETRY_CEILING = 1e18


def check_samples(name: str, samples: dict[str, Any], phase_mean: Any, launches: Any = None) -> None:
    """UsageError unless the samples are flat lists of numbers of one length, with no negative time, whose
    iteration times average what they are made of (within MEAN_RATIO_LIMIT): the launches' means weighted by
    their iterations, or without launches the phase's mean."""
    lengths = {}
    for key, values in samples.items():
        if not isinstance(values, list):
            raise UsageError(f"result file: phase {name} samples.{key} must be a list")
        if key in SAMPLE_KEYS and values:
            lengths[key] = len(values)
            check_numbers(f"phase {name} samples.{key}", values)
            if key != "slowest_rank" and any(isinstance(v, int | float) and v < 0 for v in values):
                raise UsageError(f"result file: phase {name} samples.{key} holds a negative time")
    if len(set(lengths.values())) > 1:
        counts = ", ".join(f"{key}={count}" for key, count in lengths.items())
        raise UsageError(f"result file: phase {name} sample lists differ in length ({counts})")
    times = [t for v in samples.get("iteration_s") or [] if (t := finite_float(v)) is not None]
    expected_s, made_of = _launches_mean_s(launches), "its launches' means weighted by their iterations"
    if expected_s is None:
        expected_s, made_of = finite_float(phase_mean), "the phase's mean"
    if times and expected_s is not None and expected_s > 0:
        mean_s = math.fsum(times) / len(times)
        if not 1 / MEAN_RATIO_LIMIT <= mean_s / expected_s <= MEAN_RATIO_LIMIT:
            raise UsageError(
                f"result file: phase {name} samples.iteration_s average {mean_s:.6g} s, far from "
                f"{made_of}, {expected_s:.6g} s, though they are the same iterations"
            )


def _launches_mean_s(launches: Any) -> float | None:
    """The pooled launches' means weighted by their iterations (a launch of a round left out of the figures
    gave no samples either); None without such launches, or where their figures make no mean (a file's
    hostile numbers: the phase's mean is then the measure)."""
    pairs = [(launch.get("mean_s"), launch.get("iterations")) for launch in launches or []
             if isinstance(launch, dict) and launch.get("pooled", True)]  # fmt: skip
    pairs = [(finite_float(mean_s), finite_float(count)) for mean_s, count in pairs]
    pairs = [(mean_s, count) for mean_s, count in pairs if mean_s is not None and count and count > 0]
    try:
        weighted_s = math.fsum(mean_s * count for mean_s, count in pairs) / math.fsum(c for _, c in pairs)
    except (OverflowError, ZeroDivisionError):
        return None
    return weighted_s if math.isfinite(weighted_s) and weighted_s > 0 else None


def check_telemetry(name: str, telemetry: dict[str, Any]) -> None:
    """UsageError unless the telemetry has one number per time for each metric, none negative or past
    TELEMETRY_CEILING, and a share (a metric named *_pct) at most 100."""
    times = telemetry.get("t_s") or []
    if not isinstance(times, list):
        raise UsageError(f"result file: phase {name} telemetry.t_s must be a list")
    metrics = telemetry.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise UsageError(f"result file: phase {name} telemetry.metrics must be an object")
    check_numbers(f"phase {name} telemetry.t_s", times)
    for metric, values in metrics.items():
        if not isinstance(values, list) or len(values) != len(times):
            raise UsageError(
                f"result file: phase {name} telemetry metric {metric} does not have one value per t_s "
                f"({len(times)} times)"
            )
        check_identifier(f"phase {name} telemetry metric name", metric)
        check_numbers(f"phase {name} telemetry metric {metric}", values)
        most = 100.0 if metric.endswith("_pct") else TELEMETRY_CEILING
        wrong = next((v for v in values if finite_float(v) is not None and not 0 <= v <= most), None)
        if wrong is not None:
            raise UsageError(
                f"result file: phase {name} telemetry metric {metric} holds {wrong!r}; a measured value lies "
                f"between 0 and {most:g}"
            )
