"""CPU workers pinned to cores of this machine only: a run on remote hosts leaves their placement to them."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from stash_core.engine import phase
from stash_core.engine.phase import run_phase, worker_cores
from stash_core.engine.plan import PhasePlan
from stash_core.engine.progress import Reporter
from stash_core.spec import ProfileSpec

SPEC = ProfileSpec(model="resnet10", batch_size=2, workers_per_node=2, device="cpu", threads_per_worker=1,
                   probes=False)  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="2 cores")
def test_local_workers_get_their_own_cores_and_remote_ones_none(monkeypatch) -> None:
    plan = PhasePlan("R1", 2, 1, "synthetic")
    cores = sorted(os.sched_getaffinity(0))
    assert worker_cores(plan, SPEC) == [[cores[0]], [cores[1]]]
    assert worker_cores(plan, ProfileSpec(**{**SPEC.__dict__, "pin_workers": False})) is None
    jobs: list[dict] = []

    def launched(module, job, *args, **kwargs):
        jobs.append(job)
        return "stopped here"

    monkeypatch.setattr(phase, "run_workers", launched)
    data = SimpleNamespace(root=None, bad_files=[], files=[])
    run_phase(plan, SPEC, data, Reporter(), [])
    run_phase(plan, SPEC, data, Reporter(), [], remote=SimpleNamespace(comm_timeout_s=60))
    assert jobs[0]["cpu_cores"] == [[cores[0]], [cores[1]]]
    assert jobs[1]["cpu_cores"] is None  # the hosts' own cores (and --cpu-sets) decide
