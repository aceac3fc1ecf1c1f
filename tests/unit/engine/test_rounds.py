"""After the planned rounds: the stalls held to the target, the rounds each still needs, and which runs the
next round launches; and what a profile short of its target blames, from what it measured."""

from __future__ import annotations

import math

import pytest

from stash_core.analysis.stats import t_quantile_975
from stash_core.engine.launch_warnings import pooled_warnings
from stash_core.engine.launches import (
    ROUNDS_BY_COUNT,
    ROUNDS_BY_TIME,
    LaunchedRuns,
    spread_cause,
    within_launch_lag1,
)
from stash_core.engine.rounds import (
    ITERATION,
    Shortfall,
    current_shortfalls,
    decide_next_round,
    next_runs,
    rounds_needed,
    stall_runs,
)


def _outcome(
    mean_s: float, ci95_s: float = 1e-4, wall_s: float = 5.0, other_cores: float | None = None
) -> dict:
    return {
        "status": "completed", "error": None, "iteration_s": {"mean": mean_s, "ci95": ci95_s}, "iterations": 10,
        "warmup_iterations": 2, "samples": {"iteration_s": [mean_s] * 10}, "parts_mean_s": {"forward_s": mean_s},
        "rank_skew_s": 0.0, "stop_reason": "converged", "wall_s": wall_s,
        "machine_load": None if other_cores is None else {
            "wall_s": wall_s, "other_cpu_s": other_cores * wall_s, "steal_s": 0.0},
    }  # fmt: skip


def _launched(means: dict[str, list[float]], other_cores: float | None = None) -> LaunchedRuns:
    launched = LaunchedRuns(list(means), 3)
    for name, values in means.items():
        for round_index, mean_s in enumerate(values):
            launched.add(name, round_index, _outcome(mean_s, other_cores=other_cores))
    return launched


def test_rounds_needed_follows_the_student_interval_over_the_rounds() -> None:
    # 3 rounds at ± 0.029: the spread is 0.029 * sqrt(3) / t(2); k rounds give t(k-1) * spread / sqrt(k)
    spread = 0.029 * math.sqrt(3) / t_quantile_975(2)
    k = rounds_needed(0.029, 0.0055, 3)
    assert (
        t_quantile_975(k - 1) * spread / math.sqrt(k)
        <= 0.0055
        < t_quantile_975(k - 2) * spread / math.sqrt(k - 1)
    )
    assert rounds_needed(0.004, 0.005, 3) == 3  # already there
    assert rounds_needed(1.0, 1e-6, 3) is None  # not within 1000 rounds


def test_launches_of_groups_are_projected_from_the_groups_spread_within_and_between_launches() -> None:
    """R0 and R1 timed together in groups: taken as the launches' interval alone the launches still needed
    were about half what pooling them needs (stats.pool_rounds); taken as all the groups', twice."""
    groups = [[1.0, 3.0, 2.0, 2.0], [2.5, 1.5, 2.0], [2.2, 1.8, 2.0]]  # launch means 2.0, 2.0, 2.0
    within = (2.0 + 0.5 + 0.08) / (3 + 2 + 2)  # each launch's squares about its mean, over its freedom
    sd = math.sqrt(0.0 + within / 3)  # the launches agree: no spread between them; 3 groups a launch
    k = rounds_needed(1.0, 0.2, 3, groups)
    assert t_quantile_975(k - 1) * sd / math.sqrt(k) <= 0.2 < t_quantile_975(k - 2) * sd / math.sqrt(k - 1)
    assert rounds_needed(0.1, 0.2, 3, groups) == 3  # already there
    apart = [[1.0, 1.2], [3.0, 3.2], [2.0, 2.2]]  # launches that disagree: their spread counts
    alike = [[1.0, 1.2], [1.0, 1.2], [1.0, 1.2]]
    assert rounds_needed(1.0, 0.2, 3, apart) > rounds_needed(1.0, 0.2, 3, alike)
    assert rounds_needed(0.029, 0.0055, 3, [[0.1], [0.12], [0.11]]) == rounds_needed(0.029, 0.0055, 3)


def test_a_stalls_groups_are_its_runs_difference_in_each_group_by_launch() -> None:
    from stash_core.analysis.stats import group_round_key
    from stash_core.engine.rounds import stall_groups

    keys = [group_round_key(0, 0), group_round_key(0, 1), group_round_key(1, 0)]
    figures = {"R0": dict(zip(keys, [(0.10, 0), (0.11, 0), (0.12, 0)], strict=True)),
               "R1": dict(zip(keys, [(0.15, 0), (0.17, 0), (0.16, 0)], strict=True))}  # fmt: skip
    assert stall_groups(("R0",), figures) == [[0.10, 0.11], [0.12]]
    differences = stall_groups(("R0", "R1"), figures)
    assert [len(launch) for launch in differences] == [2, 1]
    assert [value for launch in differences for value in launch] == pytest.approx([0.05, 0.06, 0.04])
    assert stall_groups(("R1", "R3"), {"R1": {0: (0.1, 0)}, "R3": {0: (0.2, 0)}}) is None  # one a launch


def test_each_stall_is_made_of_its_runs_and_a_gap_makes_none() -> None:
    chain = ["R0", "R1", "R3", "R2"]
    assert stall_runs(chain, chain) == {
        "compute": ("R0",), "interconnect": ("R0", "R1"), "cpu": ("R1", "R3"), "disk": ("R3", "R2")}  # fmt: skip
    assert stall_runs(chain, ["R0", "R1", "R2"]) == {"compute": ("R0",), "interconnect": ("R0", "R1")}


def test_only_stalls_of_at_least_the_target_share_are_held_to_it() -> None:
    # R0 drifts between rounds; R1 and R3 agree. compute (0.10) and interconnect (0.04) are >= 10% of the
    # iteration (0.16); cpu (0.02 = 12.5%) is too; R3 -> R2 differ by 0.001 (a small stall, never held).
    launched = _launched({"R0": [0.09, 0.11, 0.10], "R1": [0.14] * 3, "R3": [0.16] * 3, "R2": [0.161] * 3})
    short = current_shortfalls(launched, ["R0", "R1", "R3", "R2"], 0.10)
    assert [(s.stall, s.runs, s.rounds) for s in short] == [
        ("compute", ("R0",), 3), ("interconnect", ("R0", "R1"), 3)]  # fmt: skip
    compute = short[0]
    assert compute.value_s == pytest.approx(0.10) and compute.goal_s == pytest.approx(0.01)
    assert compute.seconds_needed == pytest.approx((compute.rounds_needed - 3) * 5.0)
    assert short[1].seconds_needed == pytest.approx((short[1].rounds_needed - 3) * 10.0)  # two runs a round


def test_the_next_round_launches_only_the_runs_of_stalls_that_can_reach_the_target_in_time() -> None:
    quick = Shortfall("compute", ("R0",), 0.1, 0.02, 0.01, 3, 6, 15.0)
    slow = Shortfall("cpu", ("R1", "R3"), 0.02, 0.02, 0.002, 3, 60, 570.0)
    runs, hopeless = next_runs([quick, slow], time_left_s=100.0)
    assert runs == ["R0"] and hopeless == [slow]
    assert "about 57 more rounds of R1 R3 (570 s)" in slow.text(0.1)
    assert next_runs([slow], 100.0) == ([], [slow])


def test_the_rounds_end_at_their_cap_or_when_nothing_short_fits_the_time_left() -> None:
    launched = _launched({"R0": [0.09, 0.11, 0.10]})  # 3 launches of 5 s
    runs, short, hopeless = decide_next_round(launched, ["R0"], 0.05, 3, 12, budget_s=1000.0)
    assert runs == ["R0"] and [s.stall for s in short] == ["compute"] and launched.stopped_by is None
    assert decide_next_round(launched, ["R0"], 0.05, 12, 12, 1000.0)[0] == []
    assert launched.stopped_by == ROUNDS_BY_COUNT
    runs, _, hopeless = decide_next_round(launched, ["R0"], 0.05, 3, 12, budget_s=16.0)
    assert runs == [] and hopeless and launched.stopped_by == ROUNDS_BY_TIME
    assert decide_next_round(_launched({"R0": [0.1] * 3}), ["R0"], 0.05, 3, 12, 1000.0) == ([], [], [])


def _records(launched: LaunchedRuns) -> list[dict]:
    records = [{"name": name, "status": "interrupted", "error": "x"} for name in launched.names]
    launched.pool_into(records)
    return records


def test_other_load_is_blamed_only_when_it_was_measured() -> None:
    busy = _records(_launched({"R0": [0.09, 0.11, 0.10]}, other_cores=0.9))
    assert spread_cause(busy).startswith("other load on the machine: other processes kept 0.90 cores busy")
    # workers of two threads under that load: one thread each read ±3% where two read ±167%
    assert "--threads-per-worker" not in spread_cause(busy) + spread_cause(busy, threads_per_worker=1)
    assert "as would fewer threads per worker (--threads-per-worker 1, now 2)" in spread_cause(busy, 2)
    quiet = _records(_launched({"R0": [0.13, 0.100, 0.101, 0.099, 0.100]}, other_cores=0.02))
    cause = spread_cause(quiet)
    assert "its first launch was +30% off the others (a warm-up left in it, or the machine's speed then)" in cause
    assert "not from other load (other processes kept 0.02 cores busy" in cause
    drifting = _records(_launched({"R0": [0.10, 0.11, 0.12, 0.13, 0.14]}, other_cores=0.0))
    assert "drift by +8.3% a launch" in spread_cause(drifting)
    unknown = _records(_launched({"R0": [0.09, 0.11, 0.10]}))
    assert "other load could not be measured there" in spread_cause(unknown)


def test_the_iteration_time_is_held_to_the_target_unless_it_is_the_compute_run() -> None:
    launched = _launched({"R0": [0.05] * 3, "R1": [0.09, 0.12, 0.15]})
    short = current_shortfalls(launched, ["R0", "R1"], 0.05)
    assert [s.stall for s in short] == ["interconnect", ITERATION]
    assert short[-1].text(0.05).startswith("the iteration time: ± ")


def test_a_speed_that_shifts_within_launches_is_named() -> None:
    launched = LaunchedRuns(["R0"], 3)
    for round_index, (low, high) in enumerate([(0.08, 0.11), (0.10, 0.10), (0.07, 0.09)]):
        outcome = _outcome((low + high) / 2, other_cores=0.01)
        outcome["samples"] = {"iteration_s": [low] * 5 + [high] * 5}  # two levels in one launch
        launched.add("R0", round_index, outcome)
    records = _records(launched)
    assert within_launch_lag1(records[0]) == pytest.approx(0.7)  # 0.7 in two launches; the flat one has none
    cause = spread_cause(records)
    assert "the machine's speed shifts within its launches too: its iterations' lag-1 autocorrelation is 0.70" in cause
    assert "not from other load" in cause


def test_a_run_of_one_launch_has_no_disagreement_to_blame() -> None:
    launched = LaunchedRuns(["R0"], 1)
    launched.add("R0", 0, {**_outcome(0.1, ci95_s=0.05), "stop_reason": "max_time"})
    records = _records(launched)
    assert records[0]["pooled"]["between_ci95"] is None
    assert spread_cause(records).startswith("its launches stopped at the time cap")


def test_a_script_that_ended_by_itself_is_said_to_have_ended_with_what_to_pass() -> None:
    launched = LaunchedRuns(["R0"], 2)
    for round_index, mean_s in enumerate([0.10, 0.13]):
        launched.add("R0", round_index, {**_outcome(mean_s, ci95_s=0.02), "stop_reason": "script_ended"})
    records = _records(launched)
    short = current_shortfalls(launched, ["R0"], 0.05)
    warnings = pooled_warnings(records, 0.05, False, 60.0, 2, None, short)
    assert any(w.startswith("compute: ") and "the script ended by itself before" in w for w in warnings)
    # more time or rounds would not help a script that ran out of steps: no such advice beside it
    timed = pooled_warnings(records, 0.05, False, 60.0, 2, "time", short)
    (compute,) = [w for w in timed if w.startswith("compute: ")]
    assert "more time" not in compute and "more launches" not in compute
    (ended,) = [w for w in warnings if w.startswith("R0: the script ended by itself in 2 of its 2 launches")]
    assert "(after 13 steps at most)" in ended and "more epochs or steps after --" in ended
    assert not any("other load" in w for w in warnings)


def test_a_paired_runs_spread_is_put_on_the_paired_launches() -> None:
    """R0 timed in blocks inside R1's launches has no launches of its own: the cause names the paired ones."""
    records = _records(_launched({"R0": [0.13, 0.100, 0.101, 0.099, 0.100]}, other_cores=0.02))
    records[0]["paired_blocks"] = {"block_steps": 3, "groups": 8, "warmup_groups": 0}
    cause = spread_cause(records)
    assert cause.startswith("the paired launches of R0 and R1 (R0's blocks in them) disagree more than")
    assert "its first launch was +30% off the others" in cause


def test_a_script_that_trained_on_with_another_optimizer_is_told_why_its_steps_ended() -> None:
    from stash_core.engine.launch_warnings import script_end_warning

    launched = LaunchedRuns(["R0"], 1)
    launched.add("R0", 0, {**_outcome(0.10, ci95_s=0.02), "stop_reason": "script_ended"})
    record = {**_records(launched)[0], "script": {"other_steps_after": 980}}
    warning = script_end_warning(record)
    assert "the optimizer timed stopped stepping after 13 steps" in warning  # 2 + 10 iterations: 13 steps
    assert "980 steps after it" in warning and "more epochs" not in warning


def test_a_cold_run_that_started_cached_gets_no_rounds_for_its_disk_stall() -> None:
    # R2 spreads round to round (a disk stall held to the target would need more rounds) ...
    means = {"R0": [0.05] * 3, "R3": [0.10] * 3, "R2": [0.15, 0.19, 0.17]}
    cold = _launched(means)
    assert [s.stall for s in current_shortfalls(cold, ["R0", "R3", "R2"], 0.10)] == ["disk", ITERATION]
    # ... but where it started with its data in the page cache (tmpfs) there is no disk stall to narrow.
    cached = _launched(means)
    for _, outcome in cached.outcomes["R2"]:
        outcome["resident_fraction_start"] = 1.0
    assert [s.stall for s in current_shortfalls(cached, ["R0", "R3", "R2"], 0.10)] == [ITERATION]


def test_a_scripts_stall_with_nothing_to_measure_gets_no_rounds_and_no_advice() -> None:
    """A script with no process group (its workers never communicate) and no DataLoader: its interconnect,
    CPU and disk stalls are not separable, yet "interconnect: ± 214% after 1 round; more than 1000 rounds
    would be needed" was said, and rounds went to them."""
    means = {"R0": [0.05] * 3, "R1": [0.08, 0.12, 0.10], "R3": [0.14, 0.18, 0.15], "R2": [0.20, 0.27, 0.19]}
    chain = ["R0", "R1", "R3", "R2"]
    for used, held in ((True, {"interconnect", "cpu", "disk"}), (False, set())):
        launched = _launched(means)
        for name, outcomes in launched.outcomes.items():
            for _, outcome in outcomes:
                script = {"process_group": used, "loader_used": used}
                outcome.update(workers=1 if name == "R0" else 2, script=script)
        short = {s.stall for s in current_shortfalls(launched, chain, 0.10)}
        assert short & {"interconnect", "cpu", "disk"} == held


def test_one_round_is_said_in_the_singular() -> None:
    from stash_core.engine.rounds import Shortfall

    one = Shortfall("compute", ("R0",), 1.0, 1.95, 0.1, 1, None, None)
    assert one.text(0.1).startswith("compute: ± 195% after 1 round (target ± 10%)")


def test_a_shortfall_that_rounds_to_its_target_is_said_with_a_digit_more() -> None:
    """'± 2% after 1 round (target ± 2%)': 2.2% read as met."""
    short = Shortfall(ITERATION, ("R1",), 1.0, 0.022, 0.02, 1, 3, 10.0)
    assert short.text(0.02).startswith("the iteration time: ± 2.2% after 1 round (target ± 2%)")
    wide = Shortfall("compute", ("R0",), 1.0, 0.18, 0.1, 3, 9, 50.0)
    assert wide.text(0.1).startswith("compute: ± 18% after")


def test_paired_launches_that_agree_are_not_said_to_disagree() -> None:
    """A paired run's pooled interval is over blocks, which have no interval of their own: its launches were
    always said to disagree, even one launch, or three with the same mean."""
    agreeing = _records(_launched({"R0": [0.100, 0.100, 0.100]}, other_cores=0.02))
    single = _records(_launched({"R0": [0.100]}, other_cores=0.02))
    for records in (agreeing, single):
        records[0]["paired_blocks"] = {"block_steps": 3, "groups": 8, "warmup_groups": 0}
        # pooled over its blocks as engine/paired.py pools them: groups carry no interval of their own
        records[0]["pooled"].update(between_ci95=0.01, within_ci95=0.0)
        assert spread_cause(records).startswith("its iterations vary within launches that agree")
        # a load below the thresholds is what it rules out, not a cause ("(other processes kept 0.00 cores
        # busy ...)" read as one)
        assert "(no other load to blame: other processes kept 0.02 cores busy" in spread_cause(records)


def test_a_first_launch_far_off_under_steady_load_is_named_beside_the_load() -> None:
    """R0's first launch ran +510% off the next two under the same ~1 core of other load: only the load was
    blamed, and the first launch never named."""
    busy = _records(_launched({"R0": [0.0569, 0.0093, 0.0093, 0.0094]}, other_cores=0.97))
    cause = spread_cause(busy)
    assert cause.startswith("other load on the machine: other processes kept 0.97 cores busy")
    assert cause.endswith("; also R0's first launch was +510% off the others (a warm-up left in it, or the "
                          "machine's speed then)")


def test_of_runs_whose_launches_disagree_the_one_furthest_apart_is_named() -> None:
    """R1's first launch was some +48% off its others, R0's +9%: R0's, always the first, was named."""
    runs = {"R0": [0.109, 0.100, 0.101, 0.099], "R1": [0.150, 0.101, 0.100, 0.102]}
    quiet = _records(_launched(runs, other_cores=0.02))
    named = "R1's launches disagree more than their iterations do (its first launch"
    assert spread_cause(quiet).startswith(named)
    busy = _records(_launched(runs, other_cores=0.9))
    assert "; also R1's first launch was +" in spread_cause(busy)


def test_a_stall_given_up_is_noted_once_while_others_go_on_else_left_to_the_closing_warning() -> None:
    """The note repeated the closing warning word for word when no round was left."""
    from stash_core.engine.rounds import given_up_notes

    wide = Shortfall("interconnect", ("R0", "R1"), 1.0, 0.3, 0.1, 3, 40, 300.0)
    said: set[str] = set()
    notes = given_up_notes([wide], ["R0"], said, 0.1, 20.4)
    assert len(notes) == 1 and notes[0].startswith("note: interconnect: ± 30% after 3 rounds (target ± 10%)")
    assert notes[0].endswith("(20 s), so no round is run for it alone; those of the other stalls go on")
    assert given_up_notes([wide], ["R0"], said, 0.1, 10.0) == []  # said once
    assert given_up_notes([wide], [], set(), 0.1, 10.0) == []  # no round left: the closing warning says it


def test_a_stall_measured_on_the_way_but_not_asked_gets_no_rounds_and_no_advice() -> None:
    """--stalls compute,network warned "interconnect: ± 272% ... about 36 more rounds of R0 R1 (226 s)"."""
    launched = _launched({"R0": [0.05] * 3, "R1": [0.05, 0.09, 0.13], "R1n": [0.30, 0.30, 0.30]})
    chain = ["R0", "R1", "R1n"]
    assert "interconnect" in {s.stall for s in current_shortfalls(launched, chain, 0.05)}
    asked = {s.stall for s in current_shortfalls(launched, chain, 0.05, ["compute", "network"])}
    assert "interconnect" not in asked
    runs, short, _ = decide_next_round(launched, chain, 0.05, 3, 12, 1000.0, ["compute", "network"])
    assert "interconnect" not in {s.stall for s in short}
