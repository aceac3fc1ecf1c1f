"""A run's telemetry on one time axis, as its runs happened: the chart's rows and the bands behind them.

A profile launches every run once per round, the rounds alternating R0 R1 R3 R2, R2 R3 R1 R0, ... Result
files since launches kept every launch's telemetry give each sample's `t_s` on the profile's clock (seconds
since its first launch started), so a run's samples come in several stretches with the other runs' between
them. Older files (and their stored rows) hold each run's samples on its own clock, from its start: those
runs are laid end to end by wall time, as they were drawn before, since nothing says when they ran.
R0 and R1 timed in one launch (paired, in alternating blocks) store that launch's samples under each: the
chart draws them once, as one run "R0+R1".
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from stash_core.units import finite_float

DEFAULT_INTERVAL_S = 0.5  # measure/telemetry.py's sampling interval, for rows stored without theirs
# A run whose first sample falls within this many intervals of zero started its telemetry at zero: on the
# profile's clock only the first launch does (every later one starts after a launch of at least 2 s of
# iterations and its start-up), on a run's own clock every run does.
STARTS_AT_ZERO_INTERVALS = 4
SPAN_COLUMNS = ["phase", "stretch", "description", "start_s", "end_s"]


def telemetry_frame(telemetry: pd.DataFrame, phases: list[dict[str, Any]]) -> pd.DataFrame:
    """Telemetry rows (phase, metric, t_s, value) for the chart, with

    - run_t_s: when the sample was taken, in seconds since the profile started (as measured on the
      profile's clock; for older rows, the runs laid end to end by wall time),
    - stretch: which uninterrupted stretch of its run's samples the row belongs to, from 1 (a launch, or two
      launches of the same run back to back where one round ends with it and the next begins with it),
    - segment: "<phase> <stretch>", one line per metric and stretch (a line never bridges other runs),
    - group: which chart (CPU %, Disk MB/s, ...); byte counts become GB for a readable axis.
    """
    frame = telemetry.copy()
    if frame.empty:
        for column, dtype in (("run_t_s", "float64"), ("stretch", "int64"), ("segment", "object"),
                              ("group", "object")):  # fmt: skip
            frame[column] = pd.Series(dtype=dtype)
        return frame
    interval_s = sampling_interval_s(phases)
    frame = shared_launches_merged(frame, interval_s)
    if on_run_clocks(frame, interval_s):
        spans = phase_spans(phases)
        offsets = dict(zip(spans["phase"], spans["start_s"], strict=True)) if not spans.empty else {}
        frame["run_t_s"] = frame["t_s"] + frame["phase"].map(offsets).fillna(0.0)
    else:
        frame["run_t_s"] = frame["t_s"]
    frame["stretch"] = _stretches(frame)
    frame["segment"] = frame["phase"].astype(str) + " " + frame["stretch"].astype(str)
    frame["group"] = frame["metric"].map(metric_group)
    scale = frame["metric"].str.endswith("_bytes")
    frame.loc[scale, "value"] = frame.loc[scale, "value"] / 1e9
    frame["metric"] = frame["metric"].where(~scale, frame["metric"].str.replace("_bytes", "_gb", regex=False))
    return frame.sort_values(["run_t_s", "metric"], kind="stable").reset_index(drop=True)


def sampling_interval_s(phases: list[dict[str, Any]]) -> float:
    """The runs' telemetry interval (the largest stored), else measure/telemetry.py's default."""
    stored = [finite_float(p.get("telemetry_interval_s")) for p in phases]
    stored = [value for value in stored if value is not None and value > 0]
    return max(stored) if stored else DEFAULT_INTERVAL_S


def shared_launches_merged(telemetry: pd.DataFrame, interval_s: float = DEFAULT_INTERVAL_S) -> pd.DataFrame:
    """The rows with runs that hold the same samples, every metric's value at every time (R0 and R1 timed in
    one launch), as one run, "R0+R1", each sample once; unchanged where another run starts at zero too: each
    run on its own clock (older rows), where two runs that agree (a GPU at 100% throughout) are two runs."""
    if telemetry.empty:
        return telemetry
    sharing: dict[tuple, list[str]] = {}
    for phase, rows in telemetry.groupby("phase", sort=False):
        samples = tuple(sorted(zip(rows["metric"], rows["t_s"].round(6), rows["value"], strict=True)))
        sharing.setdefault(samples, []).append(str(phase))
    names = {phase: "+".join(group) for group in sharing.values() if len(group) > 1 for phase in group}
    starts = telemetry.groupby("phase")["t_s"].min()
    apart = starts[[phase not in names for phase in starts.index]]
    if not names or (apart <= STARTS_AT_ZERO_INTERVALS * interval_s).any():
        return telemetry
    merged = telemetry.assign(phase=telemetry["phase"].map(lambda phase: names.get(phase, phase)))
    return merged.drop_duplicates(["phase", "metric", "t_s"]).reset_index(drop=True)


def on_run_clocks(telemetry: pd.DataFrame, interval_s: float = DEFAULT_INTERVAL_S) -> bool:
    """Whether the rows hold each run's samples on its own clock (older result files): more than one launch
    starts its telemetry at zero. On the profile's clock only the launch made first does (R0 and R1 timed in
    one launch share its samples: one launch)."""
    spans = shared_launches_merged(telemetry, interval_s).groupby("phase")["t_s"].min()
    return int((spans <= STARTS_AT_ZERO_INTERVALS * interval_s).sum()) > 1


def _stretches(frame: pd.DataFrame) -> pd.Series:
    """Per row, the number (from 1, per run) of the stretch of consecutive samples of its run it is in."""
    times = frame[["run_t_s", "phase"]].drop_duplicates().sort_values(["run_t_s", "phase"], kind="stable")
    new = times["phase"].ne(times["phase"].shift())
    times["stretch"] = new.astype(int).groupby(times["phase"]).cumsum()
    numbers = times.set_index(["run_t_s", "phase"])["stretch"]
    keys = pd.MultiIndex.from_frame(frame[["run_t_s", "phase"]])
    return pd.Series(numbers.reindex(keys).to_numpy(), index=frame.index, dtype="int64")


def telemetry_spans(
    frame: pd.DataFrame, phases: list[dict[str, Any]], interval_s: float | None = None
) -> pd.DataFrame:
    """The bands behind the chart, in time order: (phase, stretch, description, start_s, end_s), one per
    stretch of a run's samples (see telemetry_frame). A band starts one interval before its first sample
    (a sample describes the interval that ends at it), never before the band before it ends."""
    if frame.empty:
        return pd.DataFrame(columns=SPAN_COLUMNS)
    interval = interval_s if interval_s is not None else sampling_interval_s(phases)
    described = {p.get("phase"): p.get("description") or "" for p in phases}
    for name in set(frame["phase"]) - set(described):  # runs of one launch: "R0+R1"
        described[name] = "; ".join(filter(None, (described.get(part, "") for part in str(name).split("+"))))
    bounds = (
        frame.groupby(["phase", "stretch"], sort=False)["run_t_s"].agg(["min", "max"]).reset_index()
    ).sort_values("min", kind="stable")
    rows, previous_end = [], 0.0
    for row in bounds.itertuples(index=False):
        start = max(previous_end, float(row.min) - interval, 0.0)
        end = max(float(row.max), start)
        description = described.get(row.phase, "")
        rows.append({"phase": row.phase, "stretch": int(row.stretch), "description": description,
                     "start_s": start, "end_s": end})  # fmt: skip
        previous_end = end
    return pd.DataFrame(rows, columns=SPAN_COLUMNS)


def phase_spans(phases: list[dict[str, Any]]) -> pd.DataFrame:
    """(phase, description, start_s, end_s) with phases laid end to end by their wall time."""
    rows = []
    start = 0.0
    for phase in sorted(phases, key=lambda p: p.get("phase_index") or 0):
        wall = finite_float(phase.get("wall_s")) or 0.0
        rows.append({"phase": phase.get("phase"), "description": phase.get("description") or "",
                     "start_s": start, "end_s": start + wall})  # fmt: skip
        start += wall
    return pd.DataFrame(rows, columns=["phase", "description", "start_s", "end_s"])


# A metric's name in words, as the chart's legend says it (its unit is in the chart's title).
_UNIT_SUFFIX = re.compile(r"_(pct|mbps|gb|bytes|w)$")
_WORDS = {"util": "utilisation", "rx": "received", "tx": "sent", "mem": "memory", "net": "network",
          "pcie": "PCIe", "nvlink": "NVLink", "cpu": "CPU", "gpu": "GPU"}  # fmt: skip


def metric_words(metric: str) -> str:
    """'disk read' for disk_read_mbps (under "Disk (MB/s)"), 'GPU 0 utilisation' for gpu0_util_pct; the
    legend showed the stored names, whose "mbps" reads as megabits."""
    words = []
    for word in _UNIT_SUFFIX.sub("", metric).split("_"):
        number = re.fullmatch(r"(cpu|gpu)(\d+)", word)
        words.append(f"{number[1].upper()} {number[2]}" if number else _WORDS.get(word, word))
    return " ".join(words)


def metric_group(metric: str) -> str:
    """Which chart a telemetry metric belongs on."""
    if re.fullmatch(r"cpu\d*_util_pct", metric):
        return "CPU utilisation (%)"
    if metric.startswith("mem_"):
        return "Memory used (GB)"
    if metric.startswith("disk_"):
        return "Disk (MB/s)"
    if metric.startswith("net_"):
        return "Network (MB/s)"
    if re.fullmatch(r"gpu\d+_util_pct", metric):
        return "GPU utilisation (%)"
    if re.fullmatch(r"gpu\d+_mem_used_bytes", metric):
        return "GPU memory used (GB)"
    if metric.endswith("_power_w"):
        return "GPU power (W)"
    if metric.startswith("gpu"):
        return "GPU links (MB/s)"
    return "Other"
