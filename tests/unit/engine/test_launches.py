"""Several launches per run: the round order, each launch's share of the budget, and the run records pooled
from their launches (complete rounds only, warnings for runs short of their target or of an epoch)."""

from __future__ import annotations

import math

import pytest

from stash_core.engine.launch_warnings import (
    ONE_LAUNCH,
    epoch_boundary_warning,
    pooled_warnings,
    script_end_warning,
)
from stash_core.engine.launches import ROUNDS_BY_TIME, LaunchedRuns, rounds_of
from stash_core.engine.paired import FIRST_STARTUP_ESTIMATE_S
from stash_core.engine.plan import (
    DEFAULT_LAUNCHES,
    MAX_ROUNDS_FACTOR,
    PhasePlan,
    launch_spec,
    launches_of,
    max_rounds_of,
    round_order,
    round_runs,
)
from stash_core.engine.retry import aborted, transient
from stash_core.engine.rounds import current_shortfalls
from stash_core.spec import ProfileSpec


def _plans(*names: str) -> list[PhasePlan]:
    return [PhasePlan(name, 2, 1, "synthetic" if name in ("R0", "R1") else "cached") for name in names]


def test_rounds_alternate_chain_order_and_its_reverse() -> None:
    order = round_order(_plans("R0", "R1", "R3", "R2"), 3)
    assert [(r, plan.name) for r, plan in order] == [
        (0, "R0"), (0, "R1"), (0, "R3"), (0, "R2"),
        (1, "R2"), (1, "R3"), (1, "R1"), (1, "R0"),
        (2, "R0"), (2, "R1"), (2, "R3"), (2, "R2"),
    ]  # fmt: skip
    assert [plan.name for _, plan in round_order(_plans("R0", "R1"), 1)] == ["R0", "R1"]


def test_launches_default_to_rounds_with_auto_and_one_with_a_fixed_count() -> None:
    assert launches_of(ProfileSpec(model="m", batch_size=2)) == DEFAULT_LAUNCHES
    assert launches_of(ProfileSpec(model="m", batch_size=2, iterations="40")) == 1
    assert launches_of(ProfileSpec(model="m", batch_size=2, iterations="40", launches=4)) == 4


def test_each_launch_gets_its_share_of_the_budget() -> None:
    spec = ProfileSpec(model="m", batch_size=2, max_phase_s=90, max_iterations=1000, target_relative_ci=0.02)
    one = launch_spec(spec, 3)
    assert (one.max_phase_s, one.max_iterations, one.iterations) == (30.0, 334, "auto")
    assert one.target_relative_ci == 0.02  # each launch to the target; rounds narrow the rest
    assert launch_spec(ProfileSpec(model="m", batch_size=2, iterations="25"), 2).iterations == "13"
    assert launch_spec(spec, 1) is spec


def test_rounds_past_the_planned_ones_only_with_auto_and_several_launches() -> None:
    auto = ProfileSpec(model="m", batch_size=2)
    assert max_rounds_of(auto, 3) == MAX_ROUNDS_FACTOR * 3
    assert max_rounds_of(auto, 1) == 1  # --launches 1: one launch per run, as before rounds
    assert max_rounds_of(ProfileSpec(model="m", batch_size=2, iterations="40"), 3) == 3
    plans = _plans("R0", "R1", "R3")
    assert [p.name for p in round_runs(plans, 3)] == ["R3", "R1", "R0"]
    assert [p.name for p in round_runs(plans, 4)] == ["R0", "R1", "R3"]


def _add_round(launched: LaunchedRuns, round_index: int, means: dict, ci95_s: float = 0.001) -> None:
    for name, mean_s in means.items():
        launched.add(name, round_index, _outcome(mean_s, ci95_s))


def test_the_later_launches_of_a_run_keep_its_budget_start_up_included() -> None:
    launched = LaunchedRuns(["R0"], 3)
    assert launched.startup_s("R0") == 0.0 and launched.run_wall_s("R0") == 0.0
    _add_round(
        launched, 0, {"R0": 0.25}
    )  # 12 iterations of 0.25 s = 3 s of loop in 5 s of wall: 2 s start-up
    assert launched.startup_s("R0") == pytest.approx(2.0)
    # 12 s per run, 5 s spent, 2 launches due: 3.5 s each, less 2 s start-up -> 1.5 s, raised to the floor
    assert launched.launch_cap_s("R0", 12.0, 2, planned_cap_s=4.0) == 2.0
    # a large budget: never more than the planned share
    assert launched.launch_cap_s("R0", 60.0, 2, planned_cap_s=4.0) == 4.0
    # 20 s per run: (20 - 5) / 2 - 2 = 5.5, under a planned 10 s
    assert launched.launch_cap_s("R0", 20.0, 2, planned_cap_s=10.0) == pytest.approx(5.5)


def _outcome(mean_s: float, ci95_s: float, n: int = 10, stop: str = "converged") -> dict:
    return {
        "name": "?", "status": "completed", "error": None, "workers": 2, "data": "synthetic",
        "iteration_s": {"mean": mean_s, "ci95": ci95_s}, "iterations": n, "warmup_iterations": 2,
        "samples": {"iteration_s": [mean_s] * n, "data_s": [0.0] * n},
        "parts_mean_s": {"data_s": 0.0, "forward_s": mean_s}, "rank_skew_s": 0.001, "stop_reason": stop,
        "wall_s": 5.0, "telemetry": {"t_s": []}, "resident_fraction_start": None,
    }  # fmt: skip


def _records(*names: str) -> list[dict]:
    return [{"name": name, "data": "synthetic", "status": "interrupted", "error": "x"} for name in names]


def test_runs_are_pooled_over_the_rounds_every_run_completed() -> None:
    launched = LaunchedRuns(["R0", "R1"], 3)
    for round_index, (r0, r1) in enumerate([(0.10, 0.13), (0.12, 0.15)]):
        launched.add("R0", round_index, _outcome(r0, 0.002))
        launched.add("R1", round_index, _outcome(r1, 0.003))
    launched.add("R0", 2, _outcome(0.50, 0.002))  # the profile ended during round 3
    records = _records("R0", "R1")
    launched.pool_into(records)
    r0, r1 = records
    assert r0["status"] == r1["status"] == "completed" and r0["error"] is None
    assert r0["iteration_s"]["mean"] == pytest.approx(0.11) and r0["iterations"] == 20
    assert len(r0["samples"]["iteration_s"]) == 20 and r0["launches_planned"] == 3
    assert [(launch["round"], launch["pooled"]) for launch in r0["launches"]] == [
        (0, True),
        (1, True),
        (2, False),
    ]
    assert rounds_of(r1) == {0: (0.13, 0.003), 1: (0.15, 0.003)}
    assert r0["iteration_s"]["ci95"] == pytest.approx(12.706 * 0.01 * math.sqrt(2) / math.sqrt(2))
    short = current_shortfalls(launched, ["R0", "R1"], 0.02)
    warnings = pooled_warnings(records, 0.02, False, 120.0, 3, shortfalls=short)
    assert warnings[-1].startswith("intervals from 2 of 3 rounds")
    assert warnings[0].startswith("compute: ± 116% after 2 rounds (target ± 2%); about 160 more rounds of R0 (800 s)")
    assert "R0's launches disagree more than their iterations do" in warnings[0]
    # other load, not measured, is not ruled out ("and not from other load (... could not be measured)")
    assert "); other load could not be measured there" in warnings[0]
    assert "not from other load" not in warnings[0]


def test_a_profile_ended_in_its_first_round_keeps_the_runs_it_measured() -> None:
    launched = LaunchedRuns(["R0", "R1"], 3)
    launched.add("R0", 0, _outcome(0.10, 0.002))
    records = _records("R0", "R1")
    launched.pool_into(records)
    assert records[0]["status"] == "completed" and records[0]["iteration_s"]["mean"] == 0.10
    assert records[1]["status"] == "interrupted" and "launches" not in records[1]


def test_a_run_whose_later_launch_failed_keeps_the_rounds_it_completed_as_an_interrupted_run_does() -> None:
    """A link cut during R1n's second launch threw away its first, completed one: the profile's headline fell
    back to R1's time and said "R1n, the job as set up, was not timed"; interrupted there, it kept it."""
    launched = LaunchedRuns(["R0", "R1n"], 2)
    launched.add("R0", 0, _outcome(0.10, 0.002))
    launched.add("R1n", 0, _outcome(0.33, 0.004))
    launched.add("R0", 1, _outcome(0.11, 0.002))
    records = _records("R0", "R1n")
    records[1].update(status="failed", error="rank 1: connection reset")  # its round-2 launch
    warnings = launched.pool_into(records)
    assert records[1]["status"] == "completed" and records[1]["iteration_s"]["mean"] == pytest.approx(0.33)
    assert warnings == ["R1n: a later launch failed (rank 1: connection reset); its figure is from the 1 "
                        "launch(es) it completed before"]  # fmt: skip
    failed_first = _records("R1n")
    failed_first[0].update(status="failed", error="boom")
    assert LaunchedRuns(["R1n"], 2).pool_into(failed_first) == [] and failed_first[0]["status"] == "failed"


def test_a_run_at_its_cap_says_what_to_do() -> None:
    launched = LaunchedRuns(["R0"], 2)
    launched.add("R0", 0, _outcome(0.10, 0.010, stop="max_time"))
    launched.add("R0", 1, _outcome(0.10, 0.010, stop="converged"))
    records = _records("R0")
    launched.pool_into(records)
    assert records[0]["stop_reason"] == "max_time"
    short = current_shortfalls(launched, ["R0"], 0.02)
    (warning,) = pooled_warnings(records, 0.02, False, 60.0, 2, ROUNDS_BY_TIME, short)
    assert "stopped at the time cap" in warning and "--max-phase-seconds, now 60 s per run" in warning
    assert pooled_warnings(records, 0.02, True, 60.0, 2, None, short) == []  # a fixed --iterations N: no target


def test_a_run_stopped_by_its_iteration_cap_says_so_and_what_to_raise() -> None:
    """R0 stopped at --max-iterations with time left: the advice named the load and more launches only."""
    launched = LaunchedRuns(["R0"], 1)
    launched.add("R0", 0, _outcome(0.10, 0.010, stop="max_iterations"))
    records = _records("R0")
    launched.pool_into(records)
    short = current_shortfalls(launched, ["R0"], 0.02)
    warning, one_launch = pooled_warnings(records, 0.02, False, 60.0, 1, None, short)
    assert one_launch == ONE_LAUNCH
    assert "stopped at the iteration cap" in warning  # the spread's cause names the cap once
    assert "; a larger --max-iterations would narrow it" in warning


def test_other_load_is_said_even_where_every_target_was_met() -> None:
    busy, quiet = _outcome(0.10, 0.001), _outcome(0.10, 0.001)
    busy["machine_load"] = {"wall_s": 5.0, "other_cpu_s": 4.0, "steal_s": 0.0}  # 0.8 cores kept busy
    quiet["machine_load"] = {"wall_s": 5.0, "other_cpu_s": 0.1, "steal_s": 0.0}
    for outcome, said in ((busy, True), (quiet, False)):
        launched = LaunchedRuns(["R0"], 1)
        launched.add("R0", 0, outcome)
        records = _records("R0")
        launched.pool_into(records)
        warnings = pooled_warnings(records, 0.10, False, 60.0, 1, None, [])
        assert warnings == [ONE_LAUNCH] + ([
            "other load on the machine: other processes kept 0.80 cores busy on average during the launches "
            "(up to 0.80); the figures hold their competition for the cores (the runs with more workers the "
            "most), so a quieter machine would measure the job alone"
        ] if said else [])  # fmt: skip


@pytest.mark.parametrize("fixed", [True, False])
def test_intervals_from_one_launch_say_what_they_leave_out(fixed) -> None:
    """One launch per run (the default with --iterations N): its interval holds the spread of its iterations
    only; with two rounds, nothing is said of it."""
    for launches, said in ((1, True), (2, False)):
        launched = LaunchedRuns(["R0"], launches)
        for round_index in range(launches):
            launched.add("R0", round_index, _outcome(0.10, 0.001))
        records = _records("R0")
        launched.pool_into(records)
        warnings = pooled_warnings(records, 0.10, fixed, 60.0, launches, None, [])
        assert (ONE_LAUNCH in warnings) is said, launches
    assert pooled_warnings([], 0.10, fixed, 60.0, 1, None, []) == []  # nothing completed: nothing to caveat


def test_real_data_runs_say_whether_a_launch_crossed_an_epoch() -> None:
    records = [
        {"name": "R3", "data": "cached", "launches": [{"iterations": 30, "warmup_iterations": 2}]},
        {"name": "R2", "data": "cold", "launches": [{"iterations": 8, "warmup_iterations": 2}]},
        {"name": "R1", "data": "synthetic", "launches": [{"iterations": 8, "warmup_iterations": 2}]},
    ]
    warning = epoch_boundary_warning(records, 20)
    assert records[0]["epoch_boundary_crossed"] and not records[1]["epoch_boundary_crossed"]
    assert "R2 (longest launch 10 iterations)" in warning and "R3" not in warning
    assert "epoch_boundary_crossed" not in records[2]
    assert epoch_boundary_warning(records[:1], 20) is None
    assert "a smaller data set or more iterations per launch would include it" in warning


def test_a_script_that_ends_before_an_epochs_end_is_told_to_do_more_not_to_run_longer() -> None:
    """It advised more iterations per launch, which a script that stops by itself does not take."""
    ended = {"iterations": 61, "warmup_iterations": 2, "stop_reason": "script_ended"}
    warning = epoch_boundary_warning([{"name": "R2", "data": "cold", "launches": [ended]}], 64)
    assert "the script ended before it (see its warning): more for it to do" in warning
    assert "more iterations per launch" not in warning


@pytest.mark.parametrize(
    "error, again",
    [
        ("RuntimeError: [pair.cc:534] Connection closed by peer [127.0.0.1]:4242", True),
        ("RuntimeError: Application timeout caused pair closure", True),
        ("rank 1 (local_rank: 1) exited with code -9 (pid: 42)", False),
        ("rank 1 exited with code -9 (pid: 42); first worker error: Connection reset by peer", False),
        ("rank 1 (pid 42) was killed by SIGKILL (the out-of-memory killer does this)", False),
        ("the master port 29500 is in use: address already in use", True),
        ("ValueError: expected 4D input (got 2D input)", False),
        ("no optimizer step within 120 s of the start: the script hangs (--script-start-timeout)", False),
        ("run did not finish within 90 s; stopped it", False),
        (None, False),
    ],
)
def test_only_failures_of_the_machine_are_tried_again(error, again) -> None:
    assert transient(error) is again


@pytest.mark.parametrize(
    "error, again",
    [
        (
            "node 0 (10.213.1.10) exited with code 1: rank 1 (local_rank: 1) exited with code -6 (pid: 5156)",
            True,
        ),
        ("rank 1 (local_rank: 1) exited with code -6 (pid: 42)", True),
        ("rank 1 (local_rank: 1) exited with code -9 (pid: 42)", False),
        ("rank 1 (local_rank: 1) exited with code -60 (pid: 42)", False),
        ("node 0 (10.213.1.10) exited with code 1: rank 1 (pid 5156) was ended by SIGABRT", True),
        ("rank 1 (pid 42) was killed by SIGKILL (the out-of-memory killer does this)", False),
        (None, False),
    ],
)
def test_a_rank_that_aborted_is_tried_again_but_not_one_killed(error, again) -> None:
    assert aborted(error) is again



def test_a_script_that_ended_its_process_group_has_no_rank_skew_and_says_whose_times_it_kept() -> None:
    """Rank 0 alone after destroy_process_group(): its skew was stored as 0.0, as if the ranks agreed."""
    launched = LaunchedRuns(["R1"], 1)
    alone = {"rank_skew_s": None, "stop_reason": "script_ended", "script": {"ranks_gathered": False}}
    launched.add("R1", 0, {**_outcome(0.10, 0.002), **alone})
    (record,) = _records("R1")
    launched.pool_into([record])
    assert record["rank_skew_s"] is None
    warning = script_end_warning(record)
    assert "rank 0's own times, not the slowest rank's" in warning and "rank skew is not measured" in warning
    assert "ended its process group, or left through os._exit" in warning  # not the process group alone


def test_a_later_launch_whose_ranks_were_not_gathered_is_said_though_the_first_gathered_them() -> None:
    """The pooled run kept the first launch's script record, so a second launch's rank-0-alone end went unsaid."""
    launched = LaunchedRuns(["R1"], 2)
    gathered = {"rank_skew_s": 0.001, "stop_reason": "converged", "script": {"ranks_gathered": True}}
    alone = {"rank_skew_s": None, "stop_reason": "script_ended", "script": {"ranks_gathered": False}}
    launched.add("R1", 0, {**_outcome(0.10, 0.002), **gathered})
    launched.add("R1", 1, {**_outcome(0.10, 0.002), **alone})
    (record,) = _records("R1")
    launched.pool_into([record])
    assert record["script"]["ranks_gathered"] is False
    assert "rank 0's own times" in script_end_warning(record)


def test_a_run_of_one_worker_says_worker_not_workers() -> None:
    # "[2/2] R2  1 workers, real data read cold from disk"
    assert PhasePlan("R2", 1, 1, "cold").description == "1 worker, real data read cold from disk"
    assert PhasePlan("R3", 2, 1, "cached").description == "2 workers, real data cached in memory"
    assert PhasePlan("R1n", 1, 2, "synthetic").description.startswith("2 workers over 2 machines")


def test_a_scripts_real_data_runs_without_a_data_dir_are_not_said_to_read_cold_from_disk() -> None:
    """Without --data-dir Stash sets no page-cache state, yet a failed R2 was '1 worker, real data read cold
    from disk'."""
    from stash_core.engine.plan import phase_plan
    from stash_core.spec import ProfileSpec

    spec = ProfileSpec(model="script:train.py", script="train.py", batch_size=None)
    assert phase_plan("R2", spec).description == "1 worker, the script's own data"
    assert "cache_set" not in phase_plan("R2", spec).to_dict()  # the run's record is as before
    with_folder = ProfileSpec(model="script:train.py", script="train.py", batch_size=None, data_dir="/data")
    assert phase_plan("R2", with_folder).description == "1 worker, real data read cold from disk"


def test_a_runs_first_launch_keeps_a_start_up_out_of_its_loop_as_the_profiles_earlier_runs_took() -> None:
    """The first launch of each run timed its loop for the whole planned share, its start-up on top: a script
    profiled with --max-phase-seconds 6 --launches 1 took 9 to 11 s a run."""
    launched = LaunchedRuns(["R0", "R3"], 1)
    # before any launch of the profile: the estimate the paired launch also keeps out
    assert launched.expected_startup_s("R0") == FIRST_STARTUP_ESTIMATE_S
    first_cap_s = launched.launch_cap_s("R0", 12.0, 1, planned_cap_s=12.0)
    assert first_cap_s == pytest.approx(12.0 - FIRST_STARTUP_ESTIMATE_S)
    _add_round(launched, 0, {"R0": 0.25})  # 2 s of start-up (see above)
    # R3's first launch: R0's start-up kept out of its 6 s
    assert launched.expected_startup_s("R3") == pytest.approx(2.0)
    assert launched.launch_cap_s("R3", 6.0, 1, planned_cap_s=6.0) == pytest.approx(4.0)


def test_a_run_far_past_its_time_says_why() -> None:
    """R1n took 43 s under --max-phase-seconds 10 (iterations of 0.9 s, three launches): the output said "now
    10 s per run" alone."""
    from stash_core.engine.launch_warnings import overrun_warning

    record = {"name": "R1n", "wall_s": 43.0, "iteration_s": {"mean": 0.88},
              "launches": [{"round": r} for r in range(3)]}  # fmt: skip
    said = overrun_warning(record, 10.0)
    assert said is not None and said.startswith("R1n ran 43 s in 3 launch(es), over --max-phase-seconds 10")
    assert "after its first 10 iterations (0.88 s each here)" in said
    # a script's own setup is part of a launch's start-up (10 fast iterations could not explain 12 s)
    assert "each launch starts up first (its processes, imports and the job's own setup)" in said
    assert overrun_warning({**record, "wall_s": 19.0}, 10.0) is None  # within twice the cap
    assert overrun_warning({**record, "wall_s": 7.0}, 2.0) is None  # a start-up's seconds over a tiny cap
