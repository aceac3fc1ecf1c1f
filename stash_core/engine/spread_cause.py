"""Why a run's interval is wide, from what its launches measured: other load, launches that disagree (a
first launch apart, a drift, spread from launch to launch, a speed that shifts inside launches), or
iterations that vary within launches that agree."""

from __future__ import annotations

import math

from stash_core.analysis.stats import pool_rounds

CAP_REASONS = ("max_time", "max_iterations")
SCRIPT_ENDED = "script_ended"  # a profiled script's own loop ran out (measure/script_stop.py)

# Other processes busy on this many cores on average during a run's launches (or on this many in one launch)
# are other load worth naming as the cause of a spread.
OTHER_LOAD_MEAN_CORES = 0.25
OTHER_LOAD_PEAK_CORES = 0.5


def quiet_load(records: list[dict]) -> str:
    """The other load measured during the records' pooled launches, in words, where it was measured in every
    one and stayed below the thresholds that make it a cause; '' otherwise."""
    launches = [launch for record in records for launch in record.get("launches") or [] if launch["pooled"]]
    loads = [launch.get("other_cores") for launch in launches]
    if not loads or None in loads:
        return ""
    mean_cores = sum(loads) / len(loads)
    if mean_cores >= OTHER_LOAD_MEAN_CORES or max(loads) >= OTHER_LOAD_PEAK_CORES:
        return ""
    return f"other processes kept {mean_cores:.2f} cores busy on average (up to {max(loads):.2f})"


def spread_cause(records: list[dict], threads_per_worker: int | None = None) -> str:
    """What the runs' launches say about why their interval is wide: measured other load, launches that
    disagree without it (a first launch apart, a drift, or spread from launch to launch), or iterations
    that vary within launches that agree. Under other load, workers of several threads each (a CPU
    profile's `threads_per_worker`) are told of fewer: their threads wait on each other's cores, which
    the load holds (one worker of 2 threads on 2 cores read ±167% where 1 thread read ±3%)."""
    launches = [launch for record in records for launch in record.get("launches") or [] if launch["pooled"]]
    if any(launch.get("stop_reason") == SCRIPT_ENDED for launch in launches):
        return "the script ended by itself before its launches reached the target (see the warning on it)"
    loads = [launch["other_cores"] for launch in launches if launch.get("other_cores") is not None]
    mean_load = sum(loads) / len(loads) if loads else None
    load_text = (f"other processes kept {mean_load:.2f} cores busy on average during its launches (up to "
                 f"{max(loads):.2f})") if loads else "other load could not be measured there"  # fmt: skip
    # the run whose launches are furthest apart first: the one to name (R0 came first, however close)
    disagree = sorted((record for record in records if launches_disagree(record)), key=_apart, reverse=True)
    if loads and (mean_load >= OTHER_LOAD_MEAN_CORES or max(loads) >= OTHER_LOAD_PEAK_CORES):
        # a first launch far from the rest under a load that stayed alike is named too: the load alone
        # does not explain it
        shape = launch_spread_finding(_pooled_means(disagree[0])) if disagree else ""
        first = shape.removeprefix("its first launch")
        also = f"; also {disagree[0]['name']}'s first launch{first}" if first != shape else ""
        threaded = threads_per_worker is not None and threads_per_worker > 1
        fewer = (f", as would fewer threads per worker (--threads-per-worker 1, now {threads_per_worker}), "
                 "which leave that load its own core") if threaded else ""  # fmt: skip
        return f"other load on the machine: {load_text}; a quieter machine would narrow it{fewer}{also}"
    if not disagree:
        # the load measured below the thresholds is said as what it rules out, not as a cause
        quiet = f"no other load to blame: {load_text}" if loads else load_text
        caps = sorted({launch["stop_reason"] for launch in launches} & set(CAP_REASONS))
        if caps:
            cap = "iteration" if caps == ["max_iterations"] else "time"
            return f"its launches stopped at the {cap} cap with their iterations still varying ({quiet})"
        return f"its iterations vary within launches that agree ({quiet}): longer launches narrow it"
    record = disagree[0]
    finding = launch_spread_finding(_pooled_means(record))
    lag1 = within_launch_lag1(record)
    if lag1 is not None and lag1 >= LEVEL_SHIFT_LAG1:
        finding = (f"the machine's speed shifts within its launches too: its iterations' lag-1 autocorrelation "
                   f"is {lag1:.2f}, as on a CPU shared with other machines or throttled; {finding}")  # fmt: skip
    subject = f"{record['name']}'s launches"
    if record.get("paired_blocks"):  # R0 and R1 timed in alternating blocks of one launch (engine/paired.py)
        subject = f"the paired launches of R0 and R1 ({record['name']}'s blocks in them)"
    # other load rules itself out only where it was measured (it is not on an emulated cluster's nodes)
    load = f", and not from other load ({load_text})" if loads else f"; {load_text}"
    return f"{subject} disagree more than their iterations do ({finding}){load}"


def _apart(record: dict) -> float:
    """How far apart a run's pooled launches are: their range over their mean."""
    means = _pooled_means(record)
    average = sum(means) / len(means) if means else 0.0
    return (max(means) - min(means)) / average if average > 0 else 0.0


def _pooled_means(record: dict) -> list[float]:
    return [launch["mean_s"] for launch in record.get("launches") or [] if launch["pooled"]]


def launches_disagree(record: dict) -> bool:
    """Whether a run's launches disagree more than their iterations do (one launch never does)."""
    if record.get("paired_blocks"):
        # pooled over blocks, which have no interval of their own (within is 0): ask the launches themselves
        launches = [launch for launch in record.get("launches") or [] if launch.get("pooled")]
        if len(launches) < 2:
            return False
        pooled = pool_rounds([launch["mean_s"] for launch in launches],
                             [launch.get("ci95_s") or 0.0 for launch in launches])  # fmt: skip
        return (pooled.between_ci95 or 0.0) > pooled.within_ci95
    pooled = record.get("pooled") or {}
    return (pooled.get("between_ci95") or 0.0) > (pooled.get("within_ci95") or 0.0)


# Iterations this correlated with the one before (within a launch) move in levels, not about one level.
LEVEL_SHIFT_LAG1 = 0.5


def within_launch_lag1(record: dict) -> float | None:
    """The mean lag-1 autocorrelation of the iteration times within a run's pooled launches: near 0 when they
    scatter about one level, near 1 when the level itself shifts inside a launch. None when unknown."""
    samples = (record.get("samples") or {}).get("iteration_s") or []
    found, at = [], 0
    for launch in [launch for launch in record.get("launches") or [] if launch.get("pooled")]:
        series = samples[at : at + launch["iterations"]]
        at += launch["iterations"]
        mean_s = sum(series) / len(series) if len(series) >= 4 else 0.0
        var = sum((x - mean_s) ** 2 for x in series)
        if len(series) >= 4 and var > (1e-9 * mean_s) ** 2 * len(series):  # not rounding alone
            pairs = zip(series, series[1:], strict=False)  # each iteration with the one after it
            found.append(sum((a - mean_s) * (b - mean_s) for a, b in pairs) / var)
    return sum(found) / len(found) if found else None


def slope(values: list[float]) -> float:
    """The least-squares slope of values against their index (at least two values): the drift per launch."""
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, sum(values) / n
    sxx = sum((i - x_mean) ** 2 for i in range(n))
    return sum((i - x_mean) * (v - y_mean) for i, v in enumerate(values)) / sxx


def launch_spread_finding(means: list[float]) -> str:
    """The shape of the spread of a run's launch means: a first launch apart from the rest, a drift over the
    profile, or launch-to-launch spread."""
    if len(means) < 3:
        return f"{len(means)} launches"
    rest = means[1:]
    rest_mean = sum(rest) / len(rest)
    rest_sd = math.sqrt(sum((m - rest_mean) ** 2 for m in rest) / max(len(rest) - 1, 1))
    first = means[0] / rest_mean - 1
    if abs(means[0] - rest_mean) > 3 * rest_sd:
        return f"its first launch was {first:+.0%} off the others (a warm-up left in it, or the machine's speed then)"
    n = len(means)
    y_mean = sum(means) / n
    drift = slope(means)
    spread = math.sqrt(sum((m - y_mean) ** 2 for m in means) / (n - 1)) / y_mean
    if abs(drift) * (n - 1) > 2 * spread * y_mean:
        return f"they drift by {drift / y_mean:+.1%} a launch over the profile (clocks, caches)"
    return f"they vary by {spread:.0%} from one to the next"
