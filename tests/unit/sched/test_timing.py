"""timing.retime_many against timing.retime job by job: the same speeds, progress, service and events, to
the bit, with and without a fabric and LAS queues."""

from __future__ import annotations

import copy
import random
from types import SimpleNamespace

import pytest

from stash_core.sched.fabric import Comm
from stash_core.sched.timing import Running, retime, retime_many
from stash_core.sched.trace import TraceJob


def _engine(rng: random.Random, fabric: bool, las: bool) -> SimpleNamespace:
    """Running jobs at random points of their run: some restoring, some past their work, some on links."""
    jobs, running, rate = [], {}, {}
    for index in range(30):
        gpus = rng.choice([1, 2, 4, 8, 16])
        jobs.append(TraceJob(f"j{index}", gpus, 0.0, 3600.0, None, rng.uniform(1.0, 3.0), "trace"))
        links = [index, -1] if fabric and rng.random() < 0.7 else []
        comm = Comm(rng.uniform(0.5, 40.0), rng.choice([0.0, rng.uniform(0.0, 2.0)])) if links else None
        if links:
            rate[index] = rng.uniform(1.0, 100.0)
        running[index] = Running({0: gpus}, rng.choice(["node", "switch", "any"]), links, comm,
                                 rng.uniform(-5.0, 3000.0), rng.choice([0.0, rng.uniform(0.0, 200.0)]),
                                 rng.uniform(0.0, 500.0), 0.0, index, alone=rng.choice([0.0, 0.25]),
                                 slowdown=rng.uniform(1.0, 4.0))  # fmt: skip
    limits = (600.0, 6000.0, 60000.0) if las else None
    return SimpleNamespace(
        jobs=jobs, running=running, events=[], order=7, uplink_factor=2.0, las_limits=limits,
        las=[rng.randint(0, 3) for _ in jobs], held=[rng.uniform(0, 900) for _ in jobs],
        restored=[0.0] * len(jobs), attained=[rng.uniform(0, 9000) for _ in jobs],
        links=SimpleNamespace(rate=rate) if fabric else None,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_retiming_many_jobs_at_once_is_retiming_each(seed):
    rng = random.Random(seed)
    one = _engine(rng, fabric=seed % 2 == 0, las=seed % 3 != 0)
    many = copy.deepcopy(one)
    order = rng.sample(sorted(one.running), 20)
    now = 600.0
    for index in order:
        retime(one, index, now)
    retime_many(many, order, now)
    assert many.events == one.events and many.order == one.order
    assert many.running == one.running  # dataclass equality: every float to the bit
    assert (many.held, many.restored, many.attained) == (one.held, one.restored, one.attained)
    assert any(event[2] != 0 for event in one.events) or one.las_limits is None  # demotions were pushed too
