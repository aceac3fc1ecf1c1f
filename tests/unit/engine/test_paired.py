"""R0 and R1 timed in one launch: when a profile pairs them, how the launch's groups become both runs' rounds,
and that the interconnect stall's interval is the groups' paired one."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest

from stash_core.analysis.stats import pool_rounds
from stash_core.engine import paired as pairing
from stash_core.engine.launches import LaunchedRuns
from stash_core.engine.plan import PhasePlan
from stash_core.engine.progress import JsonReporter
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec

PLANS = [PhasePlan("R0", 1, 1, "synthetic"), PhasePlan("R1", 2, 1, "synthetic")]


def _spec(**fields) -> ProfileSpec:
    fields.setdefault("device", "cpu")
    return ProfileSpec(model="m", batch_size=2, target_relative_ci=0.10, max_phase_s=30.0, **fields)


def test_pairing_applies_to_this_machines_cpu_runs_only_and_on_says_why_not() -> None:
    names = ["R0", "R1", "R3", "R2"]
    assert pairing.pairs_runs(_spec(), names, None)
    assert not pairing.pairs_runs(_spec(paired="off"), names, None)
    assert not pairing.pairs_runs(_spec(), ["R0", "R3"], None)
    assert not pairing.pairs_runs(_spec(iterations="20"), names, None)
    gpu = _spec(device="cuda")
    assert not pairing.pairs_runs(gpu, names, None)
    with pytest.raises(UsageError, match="--paired on: pairing runs on this machine's CPU with gloo only"):
        pairing.pairs_runs(_spec(device="cuda", paired="on"), names, None)
    assert pairing.why_not_paired(_spec(), names, True) == "runs on remote hosts are launched separately"
    # a model whose branches skip parameters failed paired: "Encountered gradient which is undefined, but
    # still allreduced by DDP reducer" (rank 0's solo steps run outside DDP's forward)
    assert not pairing.pairs_runs(_spec(find_unused_parameters=True), names, None)
    with pytest.raises(UsageError, match="--paired on: --find-unused-parameters: DDP's search"):
        pairing.pairs_runs(_spec(find_unused_parameters=True, paired="on"), names, None)


def test_a_rounds_launches_fold_r0_into_r1s() -> None:
    plans = [*PLANS, PhasePlan("R3", 2, 1, "cached")]
    assert [p.name for p in pairing.launch_plans(plans, True)] == ["R1", "R3"]
    assert [p.name for p in pairing.launches_of_round(plans, True, ["R0"])] == ["R1"]
    assert [p.name for p in pairing.launches_of_round(plans, False, ["R0"])] == ["R0"]
    assert pairing.record_names(["R3", "R1"], True) == ["R3", "R0", "R1"]


def _paired_outcome(plan: PhasePlan, a_groups: list[float], b_groups: list[float]) -> dict:
    """What run_phase returns for a paired launch (measure/paired_loop.py's result in a run's record)."""
    steps = 6 * len(a_groups)
    a_steps = [mean for mean in a_groups for _ in range(6)]
    b_steps = [mean for mean in b_groups for _ in range(6)]
    return {
        **plan.to_dict(), "status": "completed", "error": None, "warmup_iterations": 2, "iterations": steps,
        "iteration_s": {"mean": sum(a_steps) / steps, "ci95": 1e-4}, "samples": {"iteration_s": a_steps},
        "parts_mean_s": {"forward_s": 0.01}, "rank_skew_s": 0.0, "stop_reason": "converged", "wall_s": 10.0,
        "paired": {
            "block_steps": 3, "groups_a_s": a_groups, "groups_b_s": b_groups, "warmup_groups": 0,
            "b_loop_s": 4.0, "b_samples": {"iteration_s": b_steps, "forward_s": b_steps},
        },
    }  # fmt: skip


def _run(monkeypatch, groups: list[tuple[list[float], list[float]]], spec: ProfileSpec):
    from stash_core.engine import profiler

    seen: list[tuple[str, dict | None, float]] = []

    def run_phase(plan, this_spec, data, reporter, warnings, remote=None, grad_bytes=None, paired=None):
        seen.append((plan.name, paired, this_spec.max_phase_s))
        assert len(seen) <= len(groups), launched.planned
        a_groups, b_groups = groups[len(seen) - 1]
        return _paired_outcome(plan, a_groups, b_groups)

    monkeypatch.setattr(profiler, "run_phase", run_phase)
    doc = {"phases": [], "probes": [], "spec": {}}
    launched = LaunchedRuns(["R0", "R1"], spec.launches or 3)
    warnings: list[str] = []
    profiler.run_launches(PLANS, spec, None, JsonReporter(io.StringIO()), warnings, None, doc, {}, launched)
    launched.pool_into(doc["phases"])
    return seen, doc, launched, warnings


def test_paired_launches_in_every_round_give_both_runs_and_the_stall_its_paired_interval(monkeypatch) -> None:
    from stash_core.engine.profiler import breakdown_of_completed, launch_warnings

    a = [0.115, 0.125, 0.116, 0.124, 0.115, 0.126, 0.114, 0.125]  # the machine's speed moves by 10%
    b = [x - 0.04 + (0.001 if i % 2 else -0.001) for i, x in enumerate(a)]
    spec = _spec()
    seen, doc, launched, warnings = _run(monkeypatch, [(a, b)] * 3, spec)
    assert [name for name, _, _ in seen] == ["R1", "R1", "R1"]  # one launch a round, R0 inside it
    assert seen[0][1] == {"block_steps": 3, "launch_groups": 8}
    # the later launches pool the earlier launches' groups into their stop rule, launch by launch; launches
    # that agree (the same groups each time) keep the longest launches
    assert seen[1][1]["launch_groups"] == 4
    assert seen[2][1] == {"block_steps": 3, "prior_a_s": [a, a], "prior_b_s": [b, b]}  # no cap: they agree
    # both runs' time over the rounds still due, less a start-up: 60 / 3 - 5 and (60 - 10) / 2 - 5 while
    # only the first launch (with its probe) has run, then (60 - 20) / 1 less the second launch's time
    # beyond its timed groups (10 s less 2 x 3 steps a group)
    later_startup_s = 10.0 - 2 * 3 * (sum(a) + sum(b))
    assert 0 < later_startup_s < 1
    assert [cap for _, _, cap in seen] == pytest.approx([15.0, 20.0, 40.0 - later_startup_s])
    r0, r1 = doc["phases"]
    assert (r0["name"], r1["name"]) == ("R0", "R1")
    assert r0["iteration_s"]["mean"] == pytest.approx(sum(b) / len(b))
    assert r0["iteration_s"]["ci95"] == pytest.approx(pool_rounds(b * 3, [0.0] * 24).ci95)
    assert r0["launches"][0]["groups_s"] == b and r1["launches"][2]["groups_s"] == a
    assert r0["wall_s"] == 12.0 and r1["wall_s"] == 18.0  # each launch's time, split by R0's blocks
    result = breakdown_of_completed(doc, ["R0", "R1"], spec, [])
    stall = result["stalls"]["interconnect"]
    differences = [x - y for x, y in zip(a, b, strict=True)] * 3
    assert stall["raw_s"] == pytest.approx(sum(differences) / 24)
    assert stall["ci95_s"] == pytest.approx(pool_rounds(differences, [0.0] * 24).ci95)
    assert stall["ci95_s"] < 0.25 * pool_rounds(a * 3, [0.0] * 24).ci95  # the drift cancels in the pairs
    assert not any("rounds of launches" in w for w in launch_warnings(doc, spec, launched, ["R0", "R1"]))


def test_a_paired_launch_of_one_group_gives_its_iterations_interval_never_zero(monkeypatch) -> None:
    from stash_core.analysis.stats import summarise
    from stash_core.engine import profiler
    from stash_core.engine.profiler import breakdown_of_completed

    a_steps, b_steps = [0.12, 0.13, 0.11, 0.125, 0.118, 0.127], [0.08, 0.085, 0.075, 0.082, 0.079, 0.081]

    def run_phase(plan, this_spec, data, reporter, warnings, remote=None, grad_bytes=None, paired=None):
        outcome = _paired_outcome(plan, [sum(a_steps) / 6], [sum(b_steps) / 6])  # a short launch: one group
        outcome["samples"]["iteration_s"] = a_steps
        outcome["paired"]["b_samples"] = {"iteration_s": b_steps, "forward_s": b_steps}
        return outcome

    monkeypatch.setattr(profiler, "run_phase", run_phase)
    spec = _spec(launches=1)
    doc = {"phases": [], "probes": [], "spec": {}}
    launched = LaunchedRuns(["R0", "R1"], 1)
    profiler.run_launches(PLANS, spec, None, JsonReporter(io.StringIO()), [], None, doc, {}, launched)
    launched.pool_into(doc["phases"])
    r0, r1 = doc["phases"]
    assert r0["paired_blocks"]["groups"] == 1
    assert r0["iteration_s"]["ci95"] == pytest.approx(summarise(b_steps).ci95) and summarise(b_steps).ci95 > 0
    assert r1["iteration_s"]["ci95"] == pytest.approx(summarise(a_steps).ci95) and summarise(a_steps).ci95 > 0
    stalls = breakdown_of_completed(doc, ["R0", "R1"], spec, [])["stalls"]
    assert stalls["compute"]["ci95_s"] == pytest.approx(r0["iteration_s"]["ci95"])
    # the difference of two launches' means, each with its iterations' interval (no pairs to narrow it)
    both = (r0["iteration_s"]["ci95"] ** 2 + r1["iteration_s"]["ci95"] ** 2) ** 0.5
    assert stalls["interconnect"]["ci95_s"] == pytest.approx(both)


def test_groups_of_launches_that_disagree_are_never_narrower_than_the_launches_means() -> None:
    same = [0.100, 0.102, 0.098, 0.101, 0.099, 0.100, 0.101, 0.099]
    shifted = [x + 0.02 for x in same]  # the second launch on a slower machine: its groups agree among them
    launches = [0] * 8 + [1] * 8
    groups = pool_rounds(same + shifted, [0.0] * 16)
    held = pool_rounds(same + shifted, [0.0] * 16, launches)
    means = pool_rounds([sum(same) / 8, sum(shifted) / 8], [0.0, 0.0])
    assert held.ci95 == pytest.approx(means.ci95) and held.ci95 >= groups.ci95
    assert pool_rounds(same + same, [0.0] * 16, launches).ci95 == pytest.approx(
        pool_rounds(same + same, [0.0] * 16).ci95
    )


def test_a_paired_run_short_of_the_target_after_the_planned_rounds_gets_another_launch(monkeypatch) -> None:
    noisy_a = [0.120, 0.130] * 4
    noisy_b = [0.100, 0.070] * 4  # a difference of 20 or 60 ms: about +- 27% over 16 groups
    quiet_a, quiet_b = [0.125] * 40, [0.085] * 40
    spec = replace(_spec(), launches=2, max_phase_s=300.0)  # time for the groups it needs
    groups = [(noisy_a, noisy_b), (noisy_a, noisy_b), (quiet_a, quiet_b)]
    seen, doc, launched, _ = _run(monkeypatch, groups, spec)
    assert [name for name, _, _ in seen] == ["R1", "R1", "R1"]
    # past the planned rounds: all the time left, less the second launch's start-up (none: its 10 s are all
    # timed groups)
    assert seen[2][2] == pytest.approx(600.0 - 20.0)
    r0 = doc["phases"][0]
    assert [launch["round"] for launch in r0["launches"]] == [0, 1, 2]
    assert len(launched.round_figures("R0")) == 56  # every launch's groups, each its own round


def test_paired_on_where_it_cannot_apply_is_one_line_before_anything_is_written(tmp_path) -> None:
    from support import stash_main

    done = stash_main(
        "profile", "--model", "resnet10", "--batch-size", "4", "--input-shape", "3,32,32", "--workers", "2",
        "--stalls", "interconnect", "--iterations", "10", "--paired", "on", "--db", str(tmp_path / "r.duckdb"),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == "stash: --paired on: a fixed --iterations count times each run alone"
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # no database, no result file


def test_each_paired_launch_keeps_as_many_groups_as_what_launches_disagree_by_makes_worth_it() -> None:
    from stash_core.engine.paired import (
        FIRST_LAUNCH_GROUPS,
        LATER_LAUNCH_GROUPS,
        MIN_LAUNCH_GROUPS,
        launch_groups,
    )

    wobble = [0.002, -0.002, 0.001, -0.001]  # the groups' own spread inside a launch
    assert launch_groups([], [], 2.0, 0.1) == FIRST_LAUNCH_GROUPS
    assert launch_groups([[0.1 + w for w in wobble]], [[0.06] * 4], 2.0, 0.1) == LATER_LAUNCH_GROUPS
    # launches that agree: no cap, the stop rule's target decides
    same = [[0.1 + w for w in wobble]] * 3
    assert launch_groups(same, [[0.06] * 4] * 3, 2.0, 0.1) is None
    # launches that land 10% apart, the groups inside each close together: short launches, more of them
    shifted = [[level + w for w in wobble] for level in (0.10, 0.11, 0.095)]
    assert launch_groups(shifted, [[0.06] * 4] * 3, 2.0, 0.1) == MIN_LAUNCH_GROUPS
    # in between, two-stage sampling's optimum for the series furthest from its target
    wide = [0.03, -0.03, 0.035, -0.035]
    levels = (0.10, 0.14, 0.08)
    a = [[level + w for w in wide] for level in levels]
    b = [[0.06] * 4] * 3
    within = sum(w * w for w in wide) / 3
    means = [sum(x) / 4 for x in a]
    centre = sum(means) / 3
    between = sum((m - centre) ** 2 for m in means) / 2 - within / 4
    group_s = 6 * (sum(means) / 3 + 0.06)
    expected = round((within * 8.0 / (between * group_s)) ** 0.5)
    assert MIN_LAUNCH_GROUPS < expected < FIRST_LAUNCH_GROUPS
    assert launch_groups(a, b, 8.0, 0.1) == expected


def test_a_difference_too_small_to_be_held_to_the_target_does_not_set_the_launch_length() -> None:
    from stash_core.engine.paired import launch_groups

    wobble = [0.002, -0.002, 0.001, -0.001]
    a = [[0.1 + w for w in wobble]] * 3  # R1's launches agree
    # R0 sits 0.4-0.8 ms below R1, launch to launch apart: a 0.6% stall, under the 10% target's share
    b = [[x - gap for x in a[0]] for gap in (0.0004, 0.0008, 0.0005)]
    assert launch_groups(a, b, 2.0, 0.1) is None  # set by R1 and R0, which agree: no cap


def test_a_paired_launch_gives_each_run_its_launch_s_share_of_the_iteration_cap(monkeypatch) -> None:
    """R0 and R1 timed together got the whole --max-iterations in every launch (2,000 steps over both),
    where a run of launches of its own gets its share a launch (667 of 2,000 over 3): each run now gets
    that share, so the pair's launch is capped at twice it."""
    from stash_core.engine import profiler

    caps: list[int] = []
    a = [0.115, 0.125, 0.116, 0.124]
    b = [x - 0.04 for x in a]

    def run_phase(plan, this_spec, data, reporter, warnings, remote=None, grad_bytes=None, paired=None):
        caps.append(this_spec.max_iterations)
        return _paired_outcome(plan, a, b)

    monkeypatch.setattr(profiler, "run_phase", run_phase)
    spec = _spec()
    launched = LaunchedRuns(["R0", "R1"], spec.launches or 3)
    doc = {"phases": [], "probes": [], "spec": {}}
    profiler.run_launches(PLANS, spec, None, JsonReporter(io.StringIO()), [], None, doc, {}, launched)
    assert caps and set(caps) == {2 * math.ceil(spec.max_iterations / 3)}


def test_a_time_cap_under_the_launch_floor_is_said_not_raised_silently(monkeypatch) -> None:
    """--max-phase-seconds 0.1 ran launches of at least 2 s each (17 s in all) without a word."""
    from stash_core.engine import profiler

    def run_phase(plan, this_spec, data, reporter, warnings, remote=None, grad_bytes=None, paired=None):
        return _paired_outcome(plan, [0.1, 0.1], [0.05, 0.05])

    monkeypatch.setattr(profiler, "run_phase", run_phase)
    spec = replace(_spec(), max_phase_s=0.1)
    out = io.StringIO()
    launched = LaunchedRuns(["R0", "R1"], 3)
    doc = {"phases": [], "probes": [], "spec": {}}
    profiler.run_launches(PLANS, spec, None, JsonReporter(out), [], None, doc, {}, launched)
    assert "--max-phase-seconds 0.1 leaves under 2 s to each of a run's 3 launches" in out.getvalue()
