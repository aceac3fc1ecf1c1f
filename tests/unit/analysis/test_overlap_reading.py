"""Exposed time and share hidden are physically possible: never "exposed -539 ms, hidden 100%"."""

from __future__ import annotations

import pytest

from stash_core.analysis.comm import communication_bounds
from stash_core.analysis.overlap import overlap_reading
from stash_core.cli.probe_text import format_communication
from stash_core.units import MIB


def probe(world: int = 2) -> dict:
    sizes = (4096, MIB, 16 * MIB)
    return {
        "world_size": world,
        "nodes": 1,
        "allreduce": [
            {"size_bytes": size, "time_s": 1e-4 + size / 1e9, "repetitions": 5, "busbw_gbps": size / 1e9}
            for size in sizes
        ],
        "gradient_allreduce": {"size_bytes": 6 * MIB, "time_s": 0.3, "repetitions": 3, "buckets": 1},
    }


def bounds(backward_r1_s: float) -> dict:
    # Backward took 1.0 s alone (R0) and backward_r1_s with the all-reduce of two workers (R1).
    return communication_bounds(
        "interconnect", {"seconds": 0.2}, probe(), None, 6 * MIB, {"R0": 1.0, "R1": backward_r1_s}, "R0", "R1"
    )


def test_a_positive_exposed_time_beyond_the_noise_stands() -> None:
    reading = overlap_reading(bounds(1.1), fallback_ci95_s=0.02)
    assert reading["state"] == "exposed" and reading["exposed_s"] == pytest.approx(0.1)
    assert reading["hidden_share"] == pytest.approx(1 - 0.1 / 0.3) and reading["text"] == ""


def test_a_negative_exposed_time_within_the_noise_is_said_to_be_so_with_its_interval() -> None:
    raw = bounds(0.461)
    assert raw["exposed_s"] == pytest.approx(-0.539) and raw["overlap_share"] == 1.0  # what comm gives
    reading = overlap_reading(raw, fallback_ci95_s=0.6)
    assert reading["state"] == "within_noise" and reading["interval_source"] == "stall"
    assert "within the noise" in reading["text"] and "± 600 ms" in reading["text"]
    assert reading["hidden_at_least"] is None  # 0.6 s of noise says nothing about a 0.3 s all-reduce
    narrow = overlap_reading({**raw, "exposed_s": -0.01, "exposed_ci95_s": 0.05})
    assert narrow["interval_source"] == "exposed"
    assert narrow["hidden_at_least"] == pytest.approx(1 - 0.05 / 0.3)


def test_a_negative_exposed_time_beyond_the_noise_is_not_resolved() -> None:
    reading = overlap_reading(bounds(0.461), fallback_ci95_s=0.01)
    assert reading["state"] == "negative" and reading["hidden_share"] is None
    assert "not physically possible" in reading["text"] and "539 ms" in reading["text"]
    assert overlap_reading({"exposed_s": None})["state"] == "unknown"


def table_row(lines: list[str], stall: str) -> str:
    return next(line for line in lines if line.split() and line.split()[0] == stall)


def test_the_cli_never_prints_a_negative_exposed_time_with_everything_hidden() -> None:
    def lines_for(ci95_s: float) -> list[str]:
        result = {"stalls": {"interconnect": {"seconds": 0.2, "ci95_s": ci95_s}},
                  "communication": {"interconnect": bounds(0.461)}}  # fmt: skip
        return format_communication(result)

    within = lines_for(0.6)
    row = table_row(within, "interconnect")
    assert "within noise" in row and "-539" not in row and "100%" not in row
    assert any("interconnect: exposed time -539 ms ± 600 ms is within the noise" in line for line in within)
    beyond = lines_for(0.01)
    row = table_row(beyond, "interconnect")
    assert "not resolved" in row and "-539" not in row and "100%" not in row
    assert any("not physically possible" in line for line in beyond)
    plain = format_communication(
        {"stalls": {"interconnect": {"ci95_s": 0.01}}, "communication": {"interconnect": bounds(1.1)}}
    )
    assert "100.0 ms" in table_row(plain, "interconnect") and "67%" in table_row(plain, "interconnect")
