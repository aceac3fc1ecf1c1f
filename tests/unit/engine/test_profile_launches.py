"""A real profile with two launches per run: the rounds run in alternating order, every run keeps its
launches, and the pooled figures are the ones the breakdown uses."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from support import SMALL, stash_main

from stash_core.analysis.stats import pool_rounds
from stash_core.measure import protocol
from stash_core.results import load_result


@pytest.mark.launches
def test_two_launches_per_run_in_alternating_rounds(tmp_path) -> None:
    out = tmp_path / "run.json"
    result = stash_main(  # main() in this process; its launches are real processes
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
    # Telemetry of every launch, on the profile's clock: R0's second launch (round 1 ends with it) samples
    # after both of R1's, its first before them.
    starts = {phase["name"]: [launch["started_s"] for launch in phase["launches"]] for phase in doc["phases"]}
    assert starts["R0"][0] < starts["R1"][0] < starts["R1"][1] < starts["R0"][1]
    r0_times = r0["telemetry"]["t_s"]
    assert r0_times == sorted(r0_times)
    assert min(r0_times) < starts["R1"][0] and max(r0_times) > starts["R0"][1] > max(r1["telemetry"]["t_s"])
    assert json.loads(out.read_text())["spec"]["launches"] == 2


def _fake_run_phase(means: dict[str, list[float]], seen: list[str]):
    """A stand-in for phase.run_phase: each launch of a run takes the next of its means, and reports half-way
    progress, as a worker does."""

    def run_phase(plan, spec, data, reporter, warnings, remote=None, grad_bytes=None) -> dict:
        seen.append(plan.name)
        reporter.progress({"phase": plan.name, "iterations": 6, "kept": 4, "max_iterations": 12,
                           "target_relative_ci": spec.target_relative_ci, "relative_ci": 0.1})  # fmt: skip
        mean_s = means[plan.name][sum(name == plan.name for name in seen) - 1]
        outcome = {**plan.to_dict(), "status": "completed", "error": None, "warmup_iterations": 2}
        return {
            **outcome, "iteration_s": {"mean": mean_s, "ci95": 1e-4}, "iterations": 10,
            "samples": {"iteration_s": [mean_s] * 10}, "parts_mean_s": {"forward_s": mean_s},
            "rank_skew_s": 0.0, "stop_reason": "converged", "wall_s": 2.0,
        }  # fmt: skip

    return run_phase


def test_rounds_go_on_for_the_stalls_short_of_their_target_and_progress_only_moves_forward(monkeypatch) -> None:
    """R0's first three launches disagree (the machine drifted), so the compute stall is short of its 5%; the
    rounds go on with R0 alone (the interconnect stall and the iteration time are at their target) until
    compute is within 5%; the dashboard's whole-profile fraction never goes back."""
    import io

    from stash_core.engine import profiler
    from stash_core.engine.job_state import JobState, parse_output
    from stash_core.engine.launches import LaunchedRuns
    from stash_core.engine.plan import PhasePlan
    from stash_core.engine.progress import JsonReporter
    from stash_core.engine.rounds import current_shortfalls
    from stash_core.spec import ProfileSpec

    # R0 over R rounds: t(R-1) * sd / sqrt(R) is 22%, 12%, 8%, 6% of its mean, then 4.9% after 7 rounds
    means = {"R0": [0.10, 0.12] + [0.11] * 10, "R1": [2.0] * 12}
    seen: list[str] = []
    monkeypatch.setattr(profiler, "run_phase", _fake_run_phase(means, seen))
    spec = ProfileSpec(model="m", batch_size=2, target_relative_ci=0.05, max_phase_s=60.0)
    plans = [PhasePlan("R0", 1, 1, "synthetic"), PhasePlan("R1", 2, 1, "synthetic")]
    out = io.StringIO()
    doc = {"phases": [], "probes": []}
    launched = LaunchedRuns(["R0", "R1"], 3)
    profiler.run_launches(plans, spec, None, JsonReporter(out), [], None, doc, {}, launched)
    rounds = seen.count("R0")
    assert rounds == 7 and seen.count("R1") == 3 and launched.stopped_by is None
    assert current_shortfalls(launched, ["R0", "R1"], 0.05) == []
    assert seen == ["R0", "R1", "R1", "R0", "R0", "R1", "R0", "R0", "R0", "R0"]
    lines = out.getvalue().splitlines()
    fractions, messages = [], []
    for end in range(1, len(lines) + 1):
        state = JobState("j", Path("."), [], None, None, "running")
        parse_output(state, "\n".join(lines[:end]))
        fractions.append(state.fraction_done)
        messages = state.messages
    assert fractions == sorted(fractions) and 0.0 < fractions[-1] < 1.0
    assert messages[:3] == ["round 1 of 3: R0 R1", "round 2 of 3: R1 R0", "round 3 of 3: R0 R1"]
    assert messages[3] == "round 4 (of at most 12; compute short of the target): R0"
    assert state.phases[0].name == "R0" and state.phases[0].launches == rounds


def test_a_failed_paired_launch_counts_its_time_once(monkeypatch) -> None:
    """R0 and R1 timed in one launch that fails: each record held the launch's whole wall time, so the
    phases' wall_s added up to twice what the profile spent."""
    import io

    from stash_core.engine import profiler
    from stash_core.engine.launches import LaunchedRuns
    from stash_core.engine.plan import PhasePlan
    from stash_core.engine.progress import JsonReporter
    from stash_core.errors import MeasurementError
    from stash_core.spec import ProfileSpec

    def failing(plan, spec, data, reporter, warnings, remote=None, grad_bytes=None, **paired) -> dict:
        return {**plan.to_dict(), "status": "failed", "error": "rank 1 exited with 1", "wall_s": 7.5}

    monkeypatch.setattr(profiler, "run_phase", failing)
    monkeypatch.setattr(profiler, "pairs_runs", lambda *args: True)
    plans = [PhasePlan("R0", 1, 1, "synthetic"), PhasePlan("R1", 2, 1, "synthetic")]
    doc: dict = {"phases": [], "probes": []}
    spec = ProfileSpec(model="m", batch_size=2, max_phase_s=60.0)
    with pytest.raises(MeasurementError, match="run R1"):
        profiler.run_launches(plans, spec, None, JsonReporter(io.StringIO()), [], None, doc, {},
                              LaunchedRuns(["R0", "R1"], 1))  # fmt: skip
    walls = {phase["name"]: phase["wall_s"] for phase in doc["phases"]}
    assert walls == {"R0": 0.0, "R1": 7.5}
    assert {phase["status"] for phase in doc["phases"]} == {"failed"}
