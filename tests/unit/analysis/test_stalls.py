import math

import pytest

from stash_core.analysis.stalls import (
    REMAINDER,
    PhaseTime,
    applicable_chain,
    breakdown,
    phases_for_stalls,
    remainder_of,
    stall_fault,
    stall_resolved,
    with_remainder,
)


def full_times():
    return {
        "R0": PhaseTime(0.200, 0.004),
        "R1": PhaseTime(0.260, 0.005),
        "R3": PhaseTime(0.380, 0.006),
        "R2": PhaseTime(0.412, 0.007),
    }


def test_stalls_telescope_to_the_realistic_iteration_time():
    chain = applicable_chain(workers_total=2, nodes=1, real_data=True)
    result = breakdown(full_times(), chain, iterations_per_epoch=31)
    stalls = result["stalls"]
    assert stalls["compute"]["seconds"] == pytest.approx(0.200)
    assert stalls["interconnect"]["seconds"] == pytest.approx(0.060)
    assert stalls["cpu"]["seconds"] == pytest.approx(0.120)
    assert stalls["disk"]["seconds"] == pytest.approx(0.032)
    assert stalls["network"]["status"] == "not_measured"
    total = sum(s["seconds"] for s in stalls.values() if s["seconds"] is not None)
    assert total == pytest.approx(result["iteration_s"]) == pytest.approx(0.412)
    assert sum(s["share"] for s in stalls.values() if s["share"] is not None) == pytest.approx(1.0)
    assert result["epoch_s"] == pytest.approx(0.412 * 31)
    assert stalls["disk"]["epoch_s"] == pytest.approx(0.032 * 31)
    # Interval of a difference: quadrature of the two runs' intervals.
    assert stalls["disk"]["ci95_s"] == pytest.approx((0.006**2 + 0.007**2) ** 0.5)


def test_the_disk_stall_does_not_add_compute_back():
    # The published scripts computed disk = (T2 - T3) + T1; ours is the plain difference.
    result = breakdown(full_times(), ["R0", "R1", "R3", "R2"], None)
    assert result["stalls"]["disk"]["seconds"] == pytest.approx(0.412 - 0.380)


def test_negative_difference_within_noise_is_zero_with_its_interval():
    times = {"R0": PhaseTime(0.200, 0.010), "R1": PhaseTime(0.195, 0.010)}
    stall = breakdown(times, ["R0", "R1"], None)["stalls"]["interconnect"]
    assert stall["status"] == "clamped_zero"
    assert stall["seconds"] == 0.0
    assert stall["raw_s"] == pytest.approx(-0.005)
    assert stall["ci95_s"] > 0


def test_a_positive_stall_wider_than_its_interval_says_so_in_the_file_as_in_the_database():
    """The result file held an empty note where the stored row said "not resolved: ..."."""
    from stash_core.units import UNRESOLVED_NOTE

    times = {"R0": PhaseTime(0.200, 0.010), "R1": PhaseTime(0.205, 0.010)}
    stall = breakdown(times, ["R0", "R1"], None)["stalls"]["interconnect"]
    assert stall["status"] == "measured" and stall["note"] == UNRESOLVED_NOTE
    resolved_stall = breakdown(full_times(), ["R0", "R1"], None)["stalls"]["interconnect"]
    assert resolved_stall["note"] == ""


def test_negative_difference_beyond_noise_warns():
    times = {"R0": PhaseTime(0.200, 0.001), "R1": PhaseTime(0.150, 0.001)}
    result = breakdown(times, ["R0", "R1"], None)
    assert result["stalls"]["interconnect"]["status"] == "negative"
    assert any("interconnect" in w for w in result["warnings"])


def test_a_gap_in_the_chain_is_not_attributed_to_one_stall():
    times = {"R0": PhaseTime(0.2, 0.01), "R2": PhaseTime(0.5, 0.01)}
    result = breakdown(times, ["R0", "R1", "R3", "R2"], None)
    assert result["stalls"]["disk"]["status"] == "not_measured"
    assert result["unattributed_s"] == pytest.approx(0.3)


def test_not_separable_is_reported_as_such():
    times = {"R0": PhaseTime(0.2, 0.01), "R1": PhaseTime(0.25, 0.01), "R2": PhaseTime(0.5, 0.01)}
    reason = "the data set does not fit in memory"
    result = breakdown(times, ["R0", "R1", "R3", "R2"], 10, {"cpu": reason, "disk": reason})
    assert result["stalls"]["cpu"]["status"] == "not_separable"
    assert result["stalls"]["cpu"]["seconds"] is None
    assert result["unattributed_s"] == pytest.approx(0.25)
    # R3 not run: the R1 -> R2 gap spans cpu and disk, both not separable, and is named so (as `stash show`
    # names a stored run's remainder), not as a gap that mixes stalls
    parts = result[REMAINDER]["parts"]
    assert parts == [{"kind": "not_separable", "what": "cpu and disk", "seconds": pytest.approx(0.25)}]
    gap = breakdown({"R0": PhaseTime(0.2, 0.01), "R2": PhaseTime(0.5, 0.01)}, ["R0", "R1", "R3", "R2"], None,
                    {"cpu": reason, "disk": reason})  # fmt: skip
    assert [part["kind"] for part in gap[REMAINDER]["parts"]] == ["gap"]  # it spans the interconnect too


def test_chains_and_needed_phases():
    assert applicable_chain(1, 1, False) == ["R0"]
    assert applicable_chain(4, 1, True) == ["R0", "R1", "R3", "R2"]
    assert applicable_chain(8, 2, False) == ["R0", "R1", "R1n"]
    chain = applicable_chain(2, 1, True)
    assert phases_for_stalls(["disk"], chain) == ["R3", "R2"]
    assert phases_for_stalls(["compute", "cpu"], chain) == ["R0", "R1", "R3"]
    # One worker: no interconnect run, CPU is measured against R0.
    assert phases_for_stalls(["cpu"], applicable_chain(1, 1, True)) == ["R0", "R3"]


def test_a_clamped_stall_leaves_its_difference_in_a_signed_remainder():
    times = {"R0": PhaseTime(0.200, 0.010), "R1": PhaseTime(0.195, 0.010)}
    result = breakdown(times, ["R0", "R1"], 10)
    remainder = result[REMAINDER]
    assert result["stalls"]["interconnect"]["seconds"] == 0.0
    assert remainder["seconds"] == pytest.approx(-0.005) and remainder["share"] == pytest.approx(
        -0.005 / 0.195
    )
    assert remainder["ci95_s"] == pytest.approx((0.01**2 + 0.01**2) ** 0.5)
    assert remainder["epoch_s"] == pytest.approx(-0.05)
    assert remainder["status"] == "within_noise" and remainder["label"] == "not separated"
    assert remainder["parts"] == [
        {"kind": "within_noise", "what": "interconnect", "seconds": pytest.approx(-0.005)}
    ]
    assert "interconnect" in remainder["note"]
    assert result["stalls"]["compute"]["seconds"] + remainder["seconds"] == pytest.approx(
        result["iteration_s"]
    )


def test_no_remainder_when_every_stall_is_measured():
    result = breakdown(full_times(), ["R0", "R1", "R3", "R2"], None)
    assert result[REMAINDER]["seconds"] == 0.0 and result[REMAINDER]["status"] == "none"
    assert result[REMAINDER]["ci95_s"] == 0.0 and result[REMAINDER]["parts"] == []


def test_not_separable_stalls_and_gaps_are_in_the_remainder_with_their_interval():
    times = {"R0": PhaseTime(0.2, 0.01), "R1": PhaseTime(0.25, 0.01), "R3": PhaseTime(0.4, 0.02),
             "R2": PhaseTime(0.5, 0.03)}  # fmt: skip
    result = breakdown(times, ["R0", "R1", "R3", "R2"], 10, {"cpu": "too big", "disk": "too big"})
    remainder = result[REMAINDER]
    assert remainder["seconds"] == pytest.approx(0.25) and remainder["status"] == "not_separated"
    assert remainder["ci95_s"] == pytest.approx((0.01**2 + 0.03**2) ** 0.5)  # t2 - t1
    assert {part["what"] for part in remainder["parts"]} == {"cpu", "disk"}
    no_compute_run = breakdown(
        {"R1": PhaseTime(0.3, 0.01), "R3": PhaseTime(0.4, 0.01)}, ["R0", "R1", "R3"], None
    )
    assert no_compute_run[REMAINDER]["seconds"] == pytest.approx(0.3)
    assert no_compute_run[REMAINDER]["ci95_s"] == pytest.approx(0.01)


def test_a_stored_breakdown_without_a_remainder_gets_one_on_the_fly():
    stored = {"iteration_s": 0.5, "iteration_ci95_s": 0.01, "iterations_per_epoch": None,
              "stalls": {"compute": {"seconds": 0.3, "ci95_s": 0.01, "status": "measured"},
                         "interconnect": {"seconds": 0.0, "ci95_s": 0.04, "status": "clamped_zero"},
                         "cpu": {"seconds": 0.21, "ci95_s": 0.03, "status": "measured"}}}  # fmt: skip
    remainder = remainder_of(stored)
    assert remainder["seconds"] == pytest.approx(-0.01) and remainder["estimated"]
    assert remainder["ci95_s"] == pytest.approx(0.04)  # the clamped stall's interval
    assert remainder["parts"][0]["what"] == "interconnect"
    assert with_remainder({**stored, "unattributed_ci95_s": 0.05})["unattributed_ci95_s"] == 0.05
    assert remainder_of({"iteration_s": None, "stalls": {}}) is None
    assert stall_resolved(stored["stalls"]["interconnect"]) is False
    assert stall_resolved(stored["stalls"]["cpu"]) is True
    assert stall_resolved({"seconds": 0.02, "ci95_s": 0.03, "status": "measured"}) is False
    assert stall_resolved({"seconds": None, "status": "not_measured"}) is None


def test_an_iteration_time_short_of_the_job_says_whose_it_is():
    chain = applicable_chain(workers_total=2, nodes=1, real_data=True)
    only_compute = breakdown({"R0": PhaseTime(0.200, 0.004)}, chain, iterations_per_epoch=31)
    assert only_compute["iteration_s"] == pytest.approx(0.200)
    assert any(warning.startswith("the iteration time is R0's: R2, the job as set up, was not timed")
               for warning in only_compute["warnings"])  # fmt: skip
    whole = breakdown(full_times(), chain, iterations_per_epoch=31)
    assert not any("the job as set up" in warning for warning in whole["warnings"])


def test_no_epoch_from_a_run_of_fewer_workers_than_the_job():
    """A 2-worker job timed only as R0 (one worker) had an epoch of the job's iterations at R0's step: no
    epoch that ran. R3 short of R2 runs the job's workers: its epoch stands."""
    chain = applicable_chain(workers_total=2, nodes=1, real_data=True)
    only_r0 = breakdown({"R0": PhaseTime(0.200, 0.004)}, chain, iterations_per_epoch=31)
    assert only_r0["epoch_s"] is None and only_r0["stalls"]["compute"]["epoch_s"] is None
    assert any("no epoch time is given (R0 runs fewer workers)" in w for w in only_r0["warnings"])
    times = full_times()
    without_r2 = breakdown({name: times[name] for name in ("R0", "R1", "R3")}, chain, iterations_per_epoch=31)
    assert without_r2["epoch_s"] == pytest.approx(times["R3"].mean_s * 31)
    one_worker = applicable_chain(workers_total=1, nodes=1, real_data=True)
    assert breakdown({"R0": PhaseTime(0.2, 0.004)}, one_worker, iterations_per_epoch=31)["epoch_s"] == (
        pytest.approx(0.2 * 31)
    )


def stored_stalls(compute_s):
    """Stored rows of a one-worker real-data run: compute (as given), CPU measured, disk within the noise
    (stored as 0 without its difference)."""
    return {
        "compute": {"seconds": compute_s, "ci95_s": 0.016, "status": "measured"},
        "cpu": {"seconds": 0.039, "ci95_s": 0.032, "status": "measured"},
        "disk": {"seconds": 0.0, "ci95_s": 0.031, "status": "clamped_zero"},
    }


@pytest.mark.parametrize(
    ("compute_s", "fault"), [(None, "has no value stored"), (-0.5, "is stored as -0.5000 s, not valid")]
)
def test_a_stall_stored_without_a_valid_figure_is_no_named_stall_and_no_other_stall_takes_its_time(
    compute_s, fault
):
    stalls = stored_stalls(compute_s)
    remainder = remainder_of({"iteration_s": 0.205, "unattributed_ci95_s": 0.031, "stalls": stalls})
    assert remainder["seconds"] == pytest.approx(0.205 - 0.039)  # the compute time is in the remainder
    assert [part["kind"] for part in remainder["parts"]] == ["unusable"]  # not "disk, within the noise"
    assert f"the compute stall {fault}" in remainder["note"] and "disk" not in remainder["note"]
    assert stall_fault(stalls["compute"]).startswith(fault) and stall_resolved(stalls["compute"]) is None


def test_a_stall_negative_beyond_the_noise_is_a_valid_figure():
    entry = {"seconds": -0.02, "ci95_s": 0.005, "status": "negative"}
    assert stall_fault(entry) is None and stall_fault({"seconds": None, "status": "not_measured"}) is None
    assert stall_fault({"seconds": 0.01, "status": "measured"}) is None


def test_a_stall_of_an_infinite_interval_is_not_resolved():
    """One round with no spread of its own has an infinite interval: it was shown '± inf' as resolved."""
    from stash_core.analysis.stalls import stall_resolved

    assert stall_resolved({"seconds": 0.0312, "status": "measured", "ci95_s": math.inf}) is False
    assert stall_resolved({"seconds": 0.0312, "status": "measured", "ci95_s": None}) is False  # as saved
    assert stall_resolved({"seconds": 0.0312, "status": "measured", "ci95_s": 0.001}) is True
