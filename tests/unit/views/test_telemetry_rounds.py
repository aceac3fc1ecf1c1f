"""The telemetry chart's data: the runs' launches where they happened (interleaved rounds on the profile's
clock), each run's stretches apart, lines never bridging another run; older rows laid end to end."""

from __future__ import annotations

import pandas as pd
import pytest

from stash_core import views
from stash_core.engine.launches import joined_telemetry, on_profile_clock

INTERVAL_S = 0.5


def launch(started_s: float, samples: int, cpu_pct: float) -> dict:
    """A launch outcome as run_phase gives it: telemetry on its own clock, sampled every half second."""
    times = [INTERVAL_S * (i + 1) for i in range(samples)]
    metrics = {"cpu_util_pct": [cpu_pct] * samples, "mem_used_bytes": [2e9] * samples}
    telemetry = {"interval_s": INTERVAL_S, "gpu_status": "no GPU", "t_s": times, "metrics": metrics}
    return on_profile_clock({"telemetry": telemetry}, started_s)


def long_rows(runs: dict[str, dict]) -> pd.DataFrame:
    """The telemetry table's rows (phase, metric, t_s, value) as the store gives them back."""
    rows = [
        {"phase": phase, "metric": metric, "t_s": t_s, "value": value}
        for phase, block in runs.items()
        for metric, values in block["metrics"].items()
        for t_s, value in zip(block["t_s"], values, strict=True)
    ]
    return pd.DataFrame(rows).sort_values(["phase", "metric", "t_s"]).reset_index(drop=True)


PHASES = [{"phase": "R0", "phase_index": 0, "description": "one worker", "wall_s": 9.0,
           "telemetry_interval_s": INTERVAL_S},
          {"phase": "R1", "phase_index": 1, "description": "all workers", "wall_s": 9.0,
           "telemetry_interval_s": INTERVAL_S}]  # fmt: skip


def test_interleaved_rounds_are_drawn_where_they_ran() -> None:
    # Rounds R0 R1 | R1 R0 | R0 R1: R1 ends round 0 and begins round 1, so its two launches are back to back.
    r0 = joined_telemetry([launch(0.0, 6, 90.0), launch(9.0, 6, 91.0), launch(12.0, 6, 92.0)])
    r1 = joined_telemetry([launch(3.0, 6, 40.0), launch(6.0, 6, 41.0), launch(15.0, 6, 42.0)])
    assert r0["t_s"][:6] == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
    assert r0["t_s"][6:9] == pytest.approx([9.5, 10.0, 10.5])
    assert not views.telemetry.on_run_clocks(long_rows({"R0": r0, "R1": r1}), INTERVAL_S)

    frame = views.breakdown.telemetry_frame(long_rows({"R0": r0, "R1": r1}), PHASES)
    assert (frame["run_t_s"] == frame["t_s"]).all()  # time as measured, not moved
    assert frame["run_t_s"].is_monotonic_increasing
    spans = views.breakdown.telemetry_spans(frame, PHASES)
    assert list(zip(spans["phase"], spans["stretch"], strict=True)) == [
        ("R0", 1), ("R1", 1), ("R0", 2), ("R1", 2)
    ]  # fmt: skip
    assert spans["start_s"].tolist() == pytest.approx([0.0, 3.0, 9.0, 15.0])
    assert spans["end_s"].tolist() == pytest.approx([3.0, 9.0, 15.0, 18.0])
    assert (spans["start_s"].iloc[1:].to_numpy() >= spans["end_s"].iloc[:-1].to_numpy()).all()  # no overlap
    # A line per metric and stretch: R0's line stops at 3 s and starts again at 9.5 s, across no R1 sample.
    cpu = frame[frame["metric"] == "cpu_util_pct"]
    for segment, rows in cpu.groupby("segment"):
        inside = cpu[cpu["run_t_s"].between(rows["run_t_s"].min(), rows["run_t_s"].max())]
        assert set(inside["segment"]) == {segment}
    assert set(cpu[cpu["segment"] == "R0 2"]["value"]) == {91.0, 92.0}
    assert set(frame["metric"]) == {"cpu_util_pct", "mem_used_gb"}  # bytes became GB


def test_rows_on_each_runs_own_clock_are_laid_end_to_end() -> None:
    # Stored before every launch's telemetry was kept: each run's samples from its own start.
    own = {
        name: {"t_s": [0.5, 1.0, 1.5], "metrics": {"cpu_util_pct": [50.0 + shift, 60.0, 70.0]}}
        for name, shift in (("R0", 0.0), ("R1", 5.0))  # two runs, two loads: never the same samples
    }
    rows = long_rows(own)
    assert views.telemetry.on_run_clocks(rows, INTERVAL_S)
    frame = views.breakdown.telemetry_frame(rows, PHASES)
    r1 = frame[frame["phase"] == "R1"]
    assert r1["run_t_s"].tolist() == pytest.approx([9.5, 10.0, 10.5])  # after R0's 9 s of wall time
    spans = views.breakdown.telemetry_spans(frame, PHASES)
    assert list(spans["phase"]) == ["R0", "R1"] and set(spans["stretch"]) == {1}


def test_no_telemetry_gives_empty_frames() -> None:
    empty = pd.DataFrame(columns=["phase", "metric", "t_s", "value"])
    frame = views.breakdown.telemetry_frame(empty, PHASES)
    assert frame.empty and {"run_t_s", "stretch", "segment", "group"} <= set(frame.columns)
    assert views.breakdown.telemetry_spans(frame, PHASES).empty


def test_r0_and_r1_timed_in_one_launch_are_one_run_where_it_ran() -> None:
    """Paired R0/R1 store their launch's samples under each: counted as two runs starting at zero, the chart
    laid every run end to end (R3 at 19.7 s where it ran at 6.3 s) and R0 and R1 alternated every sample."""
    paired = joined_telemetry([launch(0.0, 6, 90.0), launch(9.0, 6, 91.0)])
    r3 = joined_telemetry([launch(3.0, 6, 40.0), launch(6.0, 6, 41.0)])
    phases = [*PHASES, {"phase": "R3", "phase_index": 2, "description": "real data cached", "wall_s": 6.0,
                        "telemetry_interval_s": INTERVAL_S}]  # fmt: skip
    rows = long_rows({"R0": paired, "R1": paired, "R3": r3})
    assert not views.telemetry.on_run_clocks(rows, INTERVAL_S)
    frame = views.breakdown.telemetry_frame(rows, phases)
    assert (frame["run_t_s"] == frame["t_s"]).all()  # where they ran
    assert set(frame["phase"]) == {"R0+R1", "R3"} and not frame.duplicated(["metric", "t_s"]).any()
    spans = views.breakdown.telemetry_spans(frame, phases)
    assert list(spans["phase"]) == ["R0+R1", "R3", "R0+R1"]
    assert spans["description"].iloc[0] == "one worker; all workers"


def test_older_runs_that_agree_sample_for_sample_stay_two_runs_end_to_end() -> None:
    """Each run on its own clock, R0 and R1 at 100% GPU throughout: merged as one launch, R1 lost its place"""
    same = {"t_s": [0.5, 1.0, 1.5], "metrics": {"gpu0_util_pct": [100.0, 100.0, 100.0]}}
    other = {"t_s": [0.5, 1.0], "metrics": {"gpu0_util_pct": [40.0, 45.0]}}
    rows = long_rows({"R0": same, "R1": same, "R3": other})
    assert views.telemetry.on_run_clocks(rows, INTERVAL_S)
    phases = [*PHASES, {"phase": "R3", "phase_index": 2, "description": "real data cached", "wall_s": 6.0,
                        "telemetry_interval_s": INTERVAL_S}]  # fmt: skip
    frame = views.breakdown.telemetry_frame(rows, phases)
    assert set(frame["phase"]) == {"R0", "R1", "R3"}
    assert frame.loc[frame["phase"] == "R1", "run_t_s"].min() == pytest.approx(9.5)  # after R0's 9 s


@pytest.mark.parametrize("metric, words", [
    ("cpu_util_pct", "CPU utilisation"), ("cpu3_util_pct", "CPU 3 utilisation"),
    ("disk_read_mbps", "disk read"),
    ("net_tx_mbps", "network sent"), ("gpu1_mem_used_gb", "GPU 1 memory used"),
    ("gpu0_pcie_rx_mbps", "GPU 0 PCIe received"),
])  # fmt: skip
def test_the_legend_names_each_metric_in_words_its_unit_in_the_charts_title(metric, words):
    """The legend showed the stored names: disk_read_mbps under "Disk (MB/s)" read as megabits."""
    from stash_core.views.telemetry import metric_words

    assert metric_words(metric) == words
