"""A real profile with two launches per run: the rounds run in alternating order, every run keeps its
launches, and the pooled figures are the ones the breakdown uses."""

from __future__ import annotations

import json
import math

import pytest
from support import SMALL, stash

from stash_core.analysis.stats import pool_rounds
from stash_core.measure import protocol
from stash_core.results import load_result


def test_two_launches_per_run_in_alternating_rounds(tmp_path) -> None:
    out = tmp_path / "run.json"
    result = stash(
        "profile", *SMALL, "--workers", "2", "--stalls", "interconnect", "--iterations", "16",
        "--launches", "2", "--out", str(out), "--no-store", "--progress", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    started = [
        payload["name"]
        for kind, payload in filter(None, map(protocol.parse, result.stdout.splitlines()))
        if kind == "PHASE" and payload.get("event") == "started"
    ]
    assert started == ["R0", "R1", "R1", "R0"]
    doc = load_result(out)  # validated, launches included
    assert doc["status"] == "completed"
    for phase in doc["phases"]:
        launches = phase["launches"]
        assert [(launch["round"], launch["pooled"]) for launch in launches] == [(0, True), (1, True)]
        assert all(launch["iterations"] == 8 for launch in launches)  # 16 split over 2 launches
        assert phase["iterations"] == len(phase["samples"]["iteration_s"]) == 16
        pooled = pool_rounds([x["mean_s"] for x in launches], [x["ci95_s"] for x in launches])
        assert phase["iteration_s"]["mean"] == pytest.approx(pooled.mean)
        assert phase["iteration_s"]["ci95"] == pytest.approx(pooled.ci95)
    r0, r1 = doc["phases"]
    stall = doc["breakdown"]["stalls"]["interconnect"]
    paired = [b["mean_s"] - a["mean_s"] for a, b in zip(r0["launches"], r1["launches"], strict=True)]
    assert stall["raw_s"] == pytest.approx(sum(paired) / 2)
    parts = [s["seconds"] for s in doc["breakdown"]["stalls"].values() if s["seconds"] is not None]
    total = math.fsum([*parts, doc["breakdown"]["unattributed"]["seconds"]])
    assert total == pytest.approx(doc["breakdown"]["iteration_s"], rel=1e-9)
    assert len(doc["probes"]) == 1  # the bandwidth probe once, in R1's first launch
    assert json.loads(out.read_text())["spec"]["launches"] == 2
