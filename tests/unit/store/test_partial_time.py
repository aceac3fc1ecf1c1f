"""Whose time a run that did not complete holds: the job's as set up where its last completed phase is the
last its stalls needed (R2 with real data; R1n across machines, R1 or R0 without), not only where it is R2: an
interrupted synthetic profile over two machines with R1n's time was "not the time of the job profiled"."""

from __future__ import annotations

import json

import pytest

from stash_core.store.partial_time import job_phase, partial_note

PHASES = [{"phase": "R0", "status": "completed", "description": "1 worker"},
          {"phase": "R1", "status": "completed", "description": "2 workers on one machine"},
          {"phase": "R1n", "status": "interrupted", "description": "2 workers over 2 machines"}]  # fmt: skip


def spec(**given) -> str:
    stalls = ["compute", "interconnect", "network", "cpu", "disk"]
    base = {"workers_per_node": 1, "nodes": 2, "stalls": stalls, "dataset": None, "synthetic_images": None,
            "script": None}  # fmt: skip
    return json.dumps(base | given)


@pytest.mark.parametrize(
    ("given", "job"),
    [({}, "R1n"), ({"nodes": 1, "workers_per_node": 2}, "R1"), ({"nodes": 1}, "R0"),
     ({"synthetic_images": 256}, "R2"), ({"stalls": ["compute"]}, "R0"), ({"dataset": "/data"}, "R2")],
)  # fmt: skip
def test_the_job_s_phase_is_the_last_its_stalls_needed(given, job) -> None:
    assert job_phase({"spec": spec(**given)}) == job


def test_a_run_stopped_after_the_job_s_phase_is_not_marked_and_one_stopped_before_is() -> None:
    run = {"status": "interrupted", "iteration_s": 0.33, "spec": spec()}
    assert partial_note({**run, "reference_phase": "R1n"}, PHASES) is None
    said = partial_note({**run, "reference_phase": "R1"}, PHASES)
    assert said is not None and said.startswith("interrupted in R1n; its time is R1's")


def test_a_run_without_a_readable_spec_takes_r2_as_the_job_s_phase() -> None:
    assert job_phase({"spec": "{not json"}) == job_phase({}) == "R2"


def test_a_run_whose_later_launch_failed_is_said_to_have_failed_in_it() -> None:
    """R1n kept its completed launches when a later one failed, and reads "completed": the note said "failed;
    its time is R1n's", naming no run it failed in."""
    phases = [{"phase": "R0", "status": "completed"}, {"phase": "R1n", "status": "completed"},
              {"phase": "R3", "status": "skipped"}, {"phase": "R2", "status": "skipped"}]  # fmt: skip
    run = {"status": "failed", "iteration_s": 0.33, "reference_phase": "R1n", "spec": spec(dataset="/data"),
           "error": "run R1n (2 workers over 2 machines, synthetic data) failed: rank 1: connection reset"}
    said = partial_note(run, phases)
    assert said is not None and said.startswith("failed in R1n; its time is R1n's")
