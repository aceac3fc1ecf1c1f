"""Why a stall was not measured: a stall left out of --stalls says so; one this setup has no run for says what
would give it one (a second worker, a second machine, data to load)."""

from __future__ import annotations

from stash_core.analysis.unmeasured import (
    NO_REFERENCE,
    NOT_ASKED,
    NOT_FINISHED,
    UNMEASURABLE,
    add_not_measured_notes,
    not_measured_reasons,
)


def test_one_machine_without_data_leaves_network_cpu_and_disk_out_with_their_reasons() -> None:
    reasons = not_measured_reasons(["compute", "interconnect", "network", "cpu", "disk"], ["R0", "R1"], 1)
    assert reasons["network"] == UNMEASURABLE["network"] and "two machines" in reasons["network"]
    assert reasons["cpu"] == reasons["disk"] == UNMEASURABLE["cpu"] and "data set" in reasons["disk"]
    assert "--" not in " ".join(reasons.values())  # read on the dashboard too: no command-line option


def test_a_stall_not_asked_for_says_so_and_one_worker_has_no_interconnect() -> None:
    reasons = not_measured_reasons(["compute", "disk"], ["R0", "R3", "R2"], 1)
    assert reasons["cpu"] == NOT_ASKED and reasons["interconnect"] == UNMEASURABLE["interconnect"]


def test_machines_whose_first_holds_one_worker_have_no_interconnect_run() -> None:
    reasons = not_measured_reasons(["compute", "interconnect", "network"], ["R0", "R1n"], 2)
    assert reasons["interconnect"] == NO_REFERENCE


def test_a_stall_asked_for_whose_run_is_planned_was_cut_short() -> None:
    assert not_measured_reasons(["compute", "disk"], ["R0", "R3", "R2"], 1)["disk"] == NOT_FINISHED


def test_a_note_already_there_and_a_measured_stall_are_kept() -> None:
    stalls = {"network": {"status": "not_measured", "note": "the profile ended first"},
              "cpu": {"status": "not_measured", "note": ""},
              "disk": {"status": "measured", "note": ""}}  # fmt: skip
    add_not_measured_notes(stalls, {"network": "x", "cpu": NOT_ASKED, "disk": NOT_ASKED})
    assert stalls["network"]["note"] == "the profile ended first"
    assert stalls["cpu"]["note"] == NOT_ASKED and stalls["disk"]["note"] == ""
