"""The congested fast path (max-min rates recomputed once per instant, only the jobs whose rate moved
re-timed, timing.retime_many) against a reference that recomputes every flow's rate from the
running placements and re-times every running job at every instant."""

from __future__ import annotations

import pytest

from stash_core.sched import Cluster, Policy, jobs_from_frame, simulate, synthetic_trace
from stash_core.sched.fabric import Fabric, links_of, max_min_rates
from stash_core.sched.policy import POLICIES
from stash_core.sched.simulator import _Engine
from stash_core.sched.timing import retime


class _ReTimeEverything(_Engine):
    def retime_all(self, now: float) -> None:
        fabric = self.links.fabric
        flows = {i: links_of(run.placement, self.cluster.nodes_per_switch) for i, run in self.running.items()}
        rates = max_min_rates({i: links for i, links in flows.items() if links}, fabric.capacity)
        for index, run in list(self.running.items()):
            if not flows[index]:
                retime(self, index, now, 1.0)
                continue
            alone = min(fabric.capacity(link) for link in flows[index])
            extra = run.comm.slowdown(alone) - 1.0 if run.level == "node" else 0.0
            retime(self, index, now, run.comm.slowdown(rates[index]) - extra)
        self.links.reallocate(set(self.changed_links))  # keeps the engine's own bookkeeping going
        self.touched.clear()
        self.changed_links.clear()


FIXED = {"delay": {"delay_s": 300.0}, "network-delay": {"scale": 1.0}, "network-preempt": {"scale": 1.0},
         "las": {"min_run_s": 120.0, "las_limits_gpu_s": (600.0, 6000.0)}}  # fmt: skip


@pytest.mark.parametrize("name", POLICIES)
def test_the_fast_path_times_jobs_as_re_timing_everything_does(name):
    frame = synthetic_trace(250, 3, ["resnet50", "alexnet", "vgg16", "bert_base"], mean_gap_s=30.0)
    frame.loc[::4, "num_gpu"] = 6  # two nodes even at their tightest: node uplinks shared with neighbours
    frame.loc[2::9, "num_gpu"] = 12  # two switches at their tightest
    jobs = jobs_from_frame(frame, None)
    cluster = Cluster(4, 2, 4)  # 32 GPUs on 4 switches: 8- and 16-GPU jobs cross switch uplinks
    fabric = Fabric.oversubscribed(100.0, 4.0, cluster.nodes_per_switch)
    policy = Policy(name, **FIXED.get(name, {}))
    fast = simulate(jobs, cluster, policy, fabric=fabric)
    reference = _ReTimeEverything(jobs, cluster, policy, 2.0, fabric, None).run()
    assert [o.finish_s for o in fast] == pytest.approx([o.finish_s for o in reference], abs=1e-6, rel=0)
    assert [o.start_s for o in fast] == pytest.approx([o.start_s for o in reference], abs=1e-6, rel=0)
    assert sum(o.run_s - o.job.duration_s - o.checkpoint_s for o in fast) > 10.0  # links were shared
