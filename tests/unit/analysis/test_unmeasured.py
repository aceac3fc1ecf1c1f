"""Why a stall was not measured: a stall left out of --stalls says so; one this setup has no run for says what
would give it one (a second worker, a second machine, data to load)."""

from __future__ import annotations

from stash_core.analysis.unmeasured import (
    NOT_ASKED,
    UNMEASURABLE,
    add_not_measured_notes,
    not_measured_reasons,
)


def test_one_machine_without_data_leaves_network_cpu_and_disk_out_with_their_reasons() -> None:
    reasons = not_measured_reasons(["compute", "interconnect", "network", "cpu", "disk"], 2, 1, False)
    assert reasons == {"network": UNMEASURABLE["network"], "cpu": UNMEASURABLE["cpu"],
                       "disk": UNMEASURABLE["disk"]}  # fmt: skip
    assert "--nodes 2" in reasons["network"] and "--dataset" in reasons["disk"]


def test_a_stall_not_asked_for_says_so_and_one_worker_has_no_interconnect() -> None:
    reasons = not_measured_reasons(["compute", "disk"], 1, 1, True)
    assert reasons["cpu"] == NOT_ASKED and "disk" not in reasons and "compute" not in reasons
    assert reasons["interconnect"] == UNMEASURABLE["interconnect"]


def test_a_note_already_there_and_a_measured_stall_are_kept() -> None:
    stalls = {"network": {"status": "not_measured", "note": "the profile ended first"},
              "cpu": {"status": "not_measured", "note": ""},
              "disk": {"status": "measured", "note": ""}}  # fmt: skip
    add_not_measured_notes(stalls, {"network": "x", "cpu": NOT_ASKED, "disk": NOT_ASKED})
    assert stalls["network"]["note"] == "the profile ended first"
    assert stalls["cpu"]["note"] == NOT_ASKED and stalls["disk"]["note"] == ""
