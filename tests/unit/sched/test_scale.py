"""The indexed simulator (only affected jobs looked at per event) against a plain one that re-walks the
whole queue at every event, on random traces; and the scale benchmark exists and prints its figures."""

from __future__ import annotations

import heapq
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from stash_core.sched import Cluster, Policy, jobs_from_frame, simulate, synthetic_trace
from stash_core.sched.simulator import _allowed_level
from stash_core.sched.timing import slowdown_at

REPO = Path(__file__).resolve().parents[3]


def plain_simulate(jobs, cluster, policy, uplink_factor=2.0):
    """Every event: walk the whole queue in arrival order and start what the policy lets start."""
    free = cluster.empty_copy()
    events = [(job.submit_s, i, "arrive", i) for i, job in enumerate(jobs)]
    heapq.heapify(events)
    order, queue, running, result, since, timers = len(jobs), [], {}, {}, {}, set()
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, index = heapq.heappop(events)
            if kind == "arrive":
                queue.append(index)
            elif kind == "finish":
                free.give_back(running.pop(index))
        for index in list(queue):
            job = jobs[index]
            timer = policy.timer_s(job.slowdown, job.estimate_s, 0.0)
            level = _allowed_level(timer, since.get(index, now), now)
            placement = free.place(job.gpus, level)
            if placement is None:
                if index not in since and free.place(job.gpus, "any") is not None:
                    since[index] = now
                continue
            free.take(placement)
            queue.remove(index)
            running[index] = placement
            placed = free.level_of(placement, job.gpus)
            run_s = job.duration_s * slowdown_at(placed, job.slowdown, uplink_factor)
            result[index] = (now, now + run_s, placed)
            heapq.heappush(events, (now + run_s, order, "finish", index))
            order += 1
        for index in queue:
            timer = policy.timer_s(jobs[index].slowdown, jobs[index].estimate_s, 0.0)
            if index in since and math.isfinite(timer):
                for deadline in (since[index] + timer, since[index] + 2 * timer):
                    if deadline > now and (index, deadline) not in timers:
                        timers.add((index, deadline))
                        heapq.heappush(events, (deadline, order, "timer", index))
                        order += 1
    return [result[i] for i in range(len(jobs))]


@pytest.mark.parametrize(
    "policy",
    [Policy("consolidate"), Policy("spread"), Policy("delay", delay_s=300.0),
     Policy("network-delay", scale=1.0)],
)  # fmt: skip
@pytest.mark.parametrize("seed", [1, 2])
def test_the_indexed_simulator_schedules_as_the_plain_one(policy, seed):
    frame = synthetic_trace(300, seed, ["resnet50", "alexnet", "vgg16"], mean_gap_s=40.0)
    jobs = [replace(job, estimate_s=job.duration_s) for job in jobs_from_frame(frame, None)]
    cluster = Cluster(2, 2, 8)  # 32 GPUs: a 16-GPU job fills a switch, the queue grows
    fast = [(o.start_s, o.finish_s, o.level) for o in simulate(jobs, cluster, policy)]
    assert fast == plain_simulate(jobs, cluster, policy)
    waits = [start - job.submit_s for (start, _, _), job in zip(fast, jobs, strict=True)]
    assert max(waits) > 0  # the queue did grow: jobs waited


def test_jobs_bigger_than_a_switch_schedule_as_in_the_plain_simulator():
    frame = synthetic_trace(200, 5, ["resnet50"], mean_gap_s=60.0)
    frame.loc[::7, "num_gpu"] = 12  # bigger than one 8-GPU switch
    jobs = [replace(job, estimate_s=job.duration_s) for job in jobs_from_frame(frame, None)]
    policy = Policy("delay", delay_s=120.0)
    fast = [(o.start_s, o.finish_s, o.level) for o in simulate(jobs, Cluster(4, 2, 4), policy)]
    assert fast == plain_simulate(jobs, Cluster(4, 2, 4), policy)


def test_the_scale_benchmark_prints_its_figures():
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "schedule.py"), "--jobs", "300", "--cluster", "2x4x8",
         "--policies", "spread,delay"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "300 jobs on 64 GPUs" in lines[0]
    assert lines[1].startswith("plain:") and lines[5].startswith("congested: node uplinks 100 Gbit/s")
    for header in (lines[2], lines[6]):
        assert "wall s" in header and "comm h" in header
    assert [line.split()[0] for line in lines[3:5] + lines[7:]] == ["spread", "delay"] * 2


def test_the_paper_experiment_prints_both_workloads_and_every_policy():
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "schedule.py"), "--paper", "--jobs", "60", "--cluster",
         "2x2x8"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Philly-like trace, 60 jobs" in out and "slowdowns read at 25 Gbit/s" in out
    assert "continuous arrivals" in out and "batch: every job at 0" in out
    for name in ("fifo-consolidate", "consolidate", "spread", "delay", "network-delay", "network-preempt"):
        assert len([line for line in out.splitlines() if line.startswith(f"  {name} ")]) == 2, name
    assert out.count("against fifo-consolidate") == 6
