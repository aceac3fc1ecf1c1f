"""anywhere.place_anywhere's shortcut for las: a pass is not made when no waiting job could start even by
preempting every preemptable job; the schedule is the one the full passes give."""

from __future__ import annotations

import pytest

from stash_core.sched import Cluster, Policy, anywhere, jobs_from_frame, simulate, synthetic_trace
from stash_core.sched.fabric import Fabric
from stash_core.sched.waiting import Waiting


@pytest.mark.parametrize("fabric", [None, Fabric(100.0, 100.0)])
def test_las_skips_only_the_passes_that_would_start_nothing(monkeypatch, fabric):
    jobs = jobs_from_frame(synthetic_trace(400, 3, ["resnet50", "vgg16"], 60.0), None, "synthetic trace")
    cluster, policy = Cluster(2, 2, 4), Policy("las", min_run_s=300.0)
    passes = []  # passes made (each reads the GPU counts' first jobs)
    heads_in_order = Waiting.heads_in_order

    def counted(self):
        passes.append(1)
        return heads_in_order(self)

    monkeypatch.setattr(Waiting, "heads_in_order", counted)

    def run() -> tuple[list, int]:
        passes.clear()
        outcomes = simulate(jobs, cluster, policy, fabric=fabric)
        return [(o.start_s, o.finish_s, o.preemptions, o.held_s) for o in outcomes], len(passes)

    fast, fast_passes = run()
    monkeypatch.setattr(anywhere, "min", lambda values: 0, raising=False)  # the shortcut never taken
    full, full_passes = run()
    assert fast == full
    assert (
        fast_passes < full_passes and sum(o[2] for o in full) > 0
    )  # passes skipped, on a run that preempted
