"""Which breakdowns are physically impossible, and the warning naming the runs, the cause and what to do."""

from __future__ import annotations

from stash_core.analysis.coherence import (
    DIFFERENT_WORK,
    IMPOSSIBLE,
    NO_LOADER,
    UNREAD_DATA_DIR,
    faster_pairs,
    impossible_findings,
    impossible_of_stored,
    impossible_warning,
    per_process_differences,
)
from stash_core.analysis.pipeline import input_pipeline
from stash_core.analysis.stalls import PhaseTime, breakdown

CHAIN = ["R0", "R1", "R3", "R2"]


def findings_of(times: dict[str, tuple[float, float]]) -> list[str]:
    result = breakdown({k: PhaseTime(*v) for k, v in times.items()}, CHAIN, None)
    return impossible_findings(result, times, CHAIN)


def test_r0_slower_than_r1_beyond_the_noise_is_impossible_and_named() -> None:
    found = findings_of({"R0": (0.92, 0.02), "R1": (0.22, 0.01)})
    assert found[0].startswith("R0 took 920.0 ms per iteration and R1 220.0 ms")
    assert any("compute is 418% of the iteration" in text for text in found)


def test_a_share_above_100_percent_within_the_noise_is_no_finding_and_beyond_it_is() -> None:
    # compute 0.23 s of a 0.22 s iteration, each ± 0.02 s: 10 ms beyond it, the noise 28 ms
    assert findings_of({"R0": (0.23, 0.02), "R1": (0.22, 0.02)}) == []
    assert findings_of({"R0": (0.23, 0.002), "R1": (0.22, 0.002)}) == [
        "R0 took 230.0 ms per iteration and R1 220.0 ms: R1 does more than R0 and cannot be faster beyond "
        "the noise (± 2.8 ms)",
        "compute is 105% of the iteration",
    ]


def test_runs_that_did_the_same_work_are_not_an_impossible_pair_and_short_steps_keep_their_digits() -> None:
    """A script that iterates no DataLoader runs the same work in R0 and R2 (its CPU and disk stalls are not
    separable): R2 a little faster than R0 was called impossible, "R2 does more than R0", with the two
    times and their noise printed as 0.0003 s, 0.0003 s and ± 0.0000 s."""
    times = {"R0": (0.000312, 0.000002), "R2": (0.000298, 0.000002)}
    stalls = {name: {"status": "not_separable", "note": NO_LOADER} for name in ("cpu", "disk")}
    assert faster_pairs(times, ["R0", "R2"], stalls) == []
    (earlier, later, ci95_s), = faster_pairs(times, ["R0", "R2"])
    found = impossible_findings({}, times, ["R0", "R2"])
    assert found[0].startswith("R0 took 312 us per iteration and R2 298 us: R2 does more than R0")
    assert found[0].endswith(f"(± {ci95_s * 1e6:.0f} us)") and ci95_s > 0


def test_runs_not_separable_for_a_reason_that_leaves_r2_more_to_do_are_still_judged() -> None:
    """Only a reason that means the same work skips a pair: a script with a DataLoader but no --data-dir (R2
    does the input pipeline on top of R1), a data set too large for memory, or a script without a DataLoader
    whose data folder R2 evicts (R2 reads from the disk what R3 read from memory) still have R2 do more."""
    times = {"R1": (0.010, 0.0001), "R3": (0.012, 0.0001), "R2": (0.008, 0.0001)}
    reasons = {"without --data-dir Stash cannot set the page-cache state": ["R1", "R2"],
               "the data set is larger than this machine's memory": ["R1", "R2"],
               NO_LOADER: ["R1", "R3", "R2"]}  # fmt: skip
    for note, chain in reasons.items():
        stalls = {name: {"status": "not_separable", "note": note} for name in ("cpu", "disk")}
        assert [(a, b) for a, b, _ in faster_pairs(times, chain, stalls)] == [(chain[-2], "R2")], note
    unread = {"disk": {"status": "not_separable", "note": f"{UNREAD_DATA_DIR} /data in R3: it reads"}}
    assert faster_pairs(times, ["R1", "R3", "R2"], unread) == []  # R3 and R2 read the same (nothing there)


def test_a_coherent_chain_is_possible() -> None:
    assert findings_of({"R0": (0.10, 0.01), "R1": (0.15, 0.01), "R3": (0.18, 0.01), "R2": (0.2, 0.01)}) == []


def test_per_process_differences_name_each_run_and_ignore_unknowns() -> None:
    runs = {"R0": {"threads": 2, "batch_size": 64}, "R1": {"threads": 1, "batch_size": 64}, "R2": {}}
    assert per_process_differences(runs) == ["torch threads per process R0 2, R1 1"]


def test_the_warning_names_the_cause_and_what_to_do() -> None:
    text = impossible_warning(["R0 took longer"], ["batch size per process R0 64, R1 32"])
    assert text.startswith(IMPOSSIBLE) and "R0 64, R1 32" in text and "To do:" in text
    assert impossible_warning([], ["torch threads per process R0 2, R1 1"]).startswith(DIFFERENT_WORK)
    assert impossible_warning([], []) is None
    assert "world size" in impossible_warning(["x"], [])


def test_a_stored_run_is_judged_by_its_warning_or_its_shares() -> None:
    assert impossible_of_stored([f"{IMPOSSIBLE}: x"], []) == f"{IMPOSSIBLE}: x"
    made = impossible_of_stored([], [{"stall": "compute", "share": 3.84}, {"stall": "disk", "share": 0.1}])
    assert made.startswith(IMPOSSIBLE) and "compute is 384%" in made
    assert impossible_of_stored(["other"], [{"stall": "compute", "share": 0.9}]) is None


def test_the_input_pipeline_is_r2_minus_the_last_synthetic_run_with_both_intervals() -> None:
    seconds, ci95_s, reference = input_pipeline({"R0": (0.1, 0.01), "R1": (0.2, 0.03), "R2": (0.3, 0.04)})
    assert reference == "R1" and abs(seconds - 0.1) < 1e-12 and abs(ci95_s - 0.05) < 1e-12
    assert input_pipeline({"R0": (0.1, 0.01)}) is None


def test_when_every_run_measured_the_same_work_other_load_is_the_cause_and_the_code_needs_no_change():
    from stash_core.analysis.coherence import same_work

    runs = {"R0": {"threads": 1, "batch_size": 16}, "R1": {"threads": 1, "batch_size": 16}}
    measured = same_work(runs)
    assert measured == "threads 1, batch size 16"
    text = impossible_warning(["R0 took 0.09 s per iteration and R1 0.07 s"], [], measured)
    assert text.startswith(IMPOSSIBLE) and "other load on the machine" in text and "needs no change" in text
    assert "torch.set_num_threads" not in text
    assert same_work({"R0": {"threads": 1, "batch_size": 16}, "R1": {"threads": None, "batch_size": 16}}) == ""
    assert same_work({"R0": {"threads": 1, "batch_size": 16}, "R1": {"threads": 2, "batch_size": 16}}) == ""


def test_r2_faster_than_r3_with_the_same_workers_is_not_blamed_on_the_world_size():
    from stash_core.analysis.coherence import same_processes_cause

    times = {"R0": (0.05, 0.001), "R1": (0.06, 0.001), "R3": (0.0878, 0.002), "R2": (0.0766, 0.002)}
    runs = {name: {"workers": 2} for name in times} | {"R0": {"workers": 1}}
    cause = same_processes_cause(times, CHAIN, runs)
    assert "R3 and R2 run the same 2 worker(s)" in cause and "page cache" in cause
    text = impossible_warning(findings_of(times), [], "", cause)
    assert "world size is not the cause" in text and "make each process do the same work" not in text
    # R1 faster than R0: more workers, so the world size may well be the cause
    slower_r0 = {"R0": (0.09, 0.001), "R1": (0.07, 0.001)}
    assert same_processes_cause(slower_r0, CHAIN, runs) == ""


def test_a_one_worker_profile_s_impossible_run_does_not_blame_the_world_size() -> None:
    """Every run of a one-worker profile ran one worker: 'work per process that depends on the world size'
    and a code change were said for Stash's own loop."""
    from stash_core.engine.profiler import add_impossible_warning

    # each step within its noise, the compute (R0) beyond the iteration (R2) beyond its own
    times = {"R0": PhaseTime(0.90, 0.02), "R3": PhaseTime(0.80, 0.12), "R2": PhaseTime(0.70, 0.12)}
    chain = ["R0", "R3", "R2"]
    result = breakdown(times, chain, None)
    result["warnings"] = []
    runs = [{"name": name, "workers": 1} for name in chain]
    add_impossible_warning(result, runs, times, chain)
    [warning] = result["warnings"]
    assert warning.startswith(IMPOSSIBLE)
    assert "the same 1 worker(s), so the world size is not the cause" in warning
    assert "the code needs no change" in warning and "depends on the world size" not in warning


def test_an_impossible_run_is_not_blamed_on_other_load_that_was_measured_small() -> None:
    """The warning said "other load on the machine slowed one of them ... the code needs no change" where
    Stash had measured 0.00 cores of other load (a script whose synthetic runs fed other batches)."""
    from stash_core.engine.profiler import add_impossible_warning

    times = {"R0": PhaseTime(0.90, 0.02), "R3": PhaseTime(0.80, 0.12), "R2": PhaseTime(0.70, 0.12)}
    chain = ["R0", "R3", "R2"]
    launch = {"pooled": True, "other_cores": 0.01}
    for load, blamed in ((0.01, False), (0.8, True)):
        result = breakdown(times, chain, None)
        result["warnings"] = []
        runs = [{"name": name, "workers": 1, "launches": [launch | {"other_cores": load}]} for name in chain]
        add_impossible_warning(result, runs, times, chain)
        [warning] = result["warnings"]
        assert ("other load on the machine slowed one" in warning) is blamed
        assert ("the code needs no change" in warning) is blamed
        if not blamed:
            assert "not other load (other processes kept 0.01 cores busy on average (up to 0.01))" in warning
            assert "launches disagreed (too few, or too short), or the work in them differed" in warning
            assert "--launches" in warning and "--max-phase-seconds" in warning


def _paired(rounds: dict[str, list[tuple[float, float]]], chain: list[str]) -> tuple[dict, list[str]]:
    from stash_core.analysis.stats import pool_rounds

    times = {}
    for name, each in rounds.items():
        pooled = pool_rounds([mean for mean, _ in each], [ci for _, ci in each])
        times[name] = PhaseTime(pooled.mean, pooled.ci95)
    result = breakdown(times, chain, None, None, rounds)
    return result, impossible_findings(result, {k: (t.mean_s, t.ci95_s) for k, t in times.items()}, chain)


def test_the_impossible_verdict_is_the_stall_s_own_paired_by_round() -> None:
    """The check combined the runs' intervals as if unpaired: R1 0.02 s faster than R0 in every round was a
    'negative' interconnect stall beyond the noise and no finding; and a difference within its paired noise
    was called impossible."""
    chain = ["R0", "R1", "R3"]
    steady = {"R0": [(1.0, 0.01), (1.2, 0.01), (1.4, 0.01)], "R1": [(0.98, 0.01), (1.18, 0.01), (1.38, 0.01)],
              "R3": [(1.5, 0.01), (1.7, 0.01), (1.9, 0.01)]}  # fmt: skip
    result, found = _paired(steady, chain)
    assert result["stalls"]["interconnect"]["status"] == "negative"
    assert found and found[0].startswith("R0 took") and "R1 does more than R0" in found[0]
    swings = [1, -1] * 5
    opposed = {"R0": [(1.0 + 0.1 * x, 0.0) for x in swings], "R1": [(0.87 - 0.1 * x, 0.0) for x in swings],
               "R3": [(1.5, 0.01)] * 10}  # fmt: skip
    result, found = _paired(opposed, chain)
    assert result["stalls"]["interconnect"]["status"] == "clamped_zero"
    assert not any(text.startswith("R0 took") for text in found)


def test_the_page_cache_is_named_only_where_r2_started_cached_or_could_not_tell():
    """R2 fully evicted at its start (no warning) was said to have read from the cache, 'see its warning'."""
    from stash_core.analysis.coherence import same_processes_cause

    times = {"R0": (0.05, 0.001), "R1": (0.06, 0.001), "R3": (0.0878, 0.002), "R2": (0.0766, 0.002)}
    runs = {name: {"workers": 2} for name in times} | {"R0": {"workers": 1}}
    for started_cached, named in ((False, False), (True, True), (None, True)):
        runs["R2"] = {"workers": 2, "started_cached": started_cached}
        cause = same_processes_cause(times, CHAIN, runs)
        assert ("page cache" in cause) is named and "other load on the machine" in cause
