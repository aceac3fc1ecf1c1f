"""What a simulated schedule achieved.

Per policy: makespan = last finish - first arrival; average and 95th-percentile job completion time
(finish - arrival; numpy's linear interpolation); average queueing delay (the time a job waited for GPUs:
before its first start and, preempted, before each restart);
communication overhead = time lost to spread placements and congestion, sum over jobs of (GPU-holding time -
consolidated run time - checkpoint time); preemptions; spread jobs (ran at least once looser than their
tightest placement); GPU busy share = GPU-seconds held / (cluster GPUs x makespan). Series for plots: the
JCT CDF, queue length and busy share over time, and the mean queueing delay of the jobs arriving in each
stretch of time.
"""

from __future__ import annotations

import numpy as np

from stash_core.sched.simulator import JobOutcome
from stash_core.sched.topology import Cluster

CDF_POINTS = 50
TIMELINE_POINTS = 120


def schedule_metrics(outcomes: list[JobOutcome], cluster: Cluster) -> dict[str, float]:
    first = min(o.job.submit_s for o in outcomes)
    makespan = max(o.finish_s for o in outcomes) - first
    jct = np.array([o.finish_s - o.job.submit_s for o in outcomes])
    gpu_seconds = sum(o.run_s * o.job.gpus for o in outcomes)
    return {
        "makespan_s": makespan,
        "avg_jct_s": float(jct.mean()),
        "p95_jct_s": float(np.percentile(jct, 95)),
        "avg_queue_s": float(np.mean([o.queued_s for o in outcomes])),
        "comm_overhead_s": float(sum(_time_lost_s(o) for o in outcomes)),
        "preemptions": sum(o.preemptions for o in outcomes),
        "spread_jobs": sum(o.level != "node" for o in outcomes),
        "gpu_busy_share": gpu_seconds / (cluster.total_gpus * makespan) if makespan > 0 else 0.0,
    }


def _time_lost_s(outcome: JobOutcome) -> float:
    """GPU-holding time beyond the consolidated run and checkpoints; a sum of the simulator's time steps, so
    a float's rounding (1e-12 s) is no time lost: a job never spread reads as exactly 0."""
    lost = outcome.run_s - outcome.checkpoint_s - outcome.job.duration_s
    return lost if lost > 1e-9 * max(1.0, outcome.run_s) else 0.0


def jct_cdf(outcomes: list[JobOutcome], points: int = CDF_POINTS) -> list[list[float]]:
    """[seconds, fraction of jobs finished within] at evenly spaced fractions, ending at 1: the empirical
    step CDF's point, the shortest JCT within which that fraction of jobs finished (no interpolation between
    two jobs' JCTs, which on a few jobs claims fractions that never finished)."""
    jct = np.sort([o.finish_s - o.job.submit_s for o in outcomes])
    fractions = np.linspace(1 / points, 1.0, points)
    return [[float(np.quantile(jct, f, method="inverted_cdf")), round(float(f), 6)] for f in fractions]


def sample_timeline(
    timeline: list[tuple[float, int, int]], cluster: Cluster, points: int = TIMELINE_POINTS
) -> list[list[float]]:
    """[t_s, queued jobs, busy share] at evenly spaced instants: the state the last event before left."""
    if not timeline:
        return []
    times = np.array([t for t, _, _ in timeline])
    start, end = times[0], times[-1]
    grid = np.linspace(start, end, points) if end > start else np.array([start])
    rows = np.searchsorted(times, grid, side="right") - 1
    return [[float(t - start), int(timeline[r][1]), timeline[r][2] / cluster.total_gpus]
            for t, r in zip(grid, rows, strict=True)]  # fmt: skip


def queue_delay_over_time(outcomes: list[JobOutcome], buckets: int = 40) -> list[list[float]]:
    """[arrival bucket start s, mean queueing delay of the jobs arriving in it] (empty buckets left out)."""
    submit = np.array([o.job.submit_s for o in outcomes])
    wait = np.array([o.queued_s for o in outcomes])
    first, last = submit.min(), submit.max()
    edges = np.linspace(first, last, buckets + 1) if last > first else np.array([first, first + 1])
    which = np.clip(np.searchsorted(edges, submit, side="right") - 1, 0, len(edges) - 2)
    out = []
    for bucket in range(len(edges) - 1):
        picked = wait[which == bucket]
        if picked.size:
            out.append([float(edges[bucket] - first), float(picked.mean())])
    return out
