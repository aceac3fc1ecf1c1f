"""What a simulated schedule achieved, and the policy comparison (with the delay timer tuned on the trace).

Metrics (per policy): makespan = last finish - first arrival; average and 95th-percentile job completion
time (finish - arrival); average queueing delay (start - arrival); communication overhead = the run time
lost to spread placements, sum of (run time - consolidated run time); GPU busy share = GPU-seconds held by
jobs / (cluster GPUs x makespan).
"""

from __future__ import annotations

import numpy as np

from stash_core.decide.sched.fabric import Fabric
from stash_core.decide.sched.simulator import JobOutcome, Policy, simulate
from stash_core.decide.sched.topology import Cluster
from stash_core.decide.sched.trace import Job

TUNING_SCALES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
TUNING_DELAYS_S = (0.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)


def schedule_metrics(outcomes: list[JobOutcome], cluster: Cluster) -> dict[str, float]:
    first = min(o.job.submit_s for o in outcomes)
    makespan = max(o.finish_s for o in outcomes) - first
    jct = np.array([o.finish_s - o.job.submit_s for o in outcomes])
    gpu_seconds = sum(o.run_s * o.job.gpus for o in outcomes)
    return {
        "makespan_s": makespan,
        "avg_jct_s": float(jct.mean()),
        "p95_jct_s": float(np.percentile(jct, 95)),
        "avg_queue_s": float(np.mean([o.start_s - o.job.submit_s for o in outcomes])),
        "comm_overhead_s": float(sum(max(0.0, o.run_s - o.job.duration_s) for o in outcomes)),
        "spread_jobs": sum(o.level != "node" for o in outcomes),
        "gpu_busy_share": gpu_seconds / (cluster.total_gpus * makespan) if makespan > 0 else 0.0,
    }


def tune(
    jobs: list[Job], cluster: Cluster, name: str, uplink_factor: float, fabric: Fabric | None = None
) -> Policy:
    """The timer (delay) or scale (network-delay) from a small grid with the lowest average JCT."""
    grid = (
        [Policy("delay", delay_s=d) for d in TUNING_DELAYS_S]
        if name == "delay"
        else [Policy("network-delay", scale=k) for k in TUNING_SCALES]
    )
    scored = []
    for i, policy in enumerate(grid):
        outcomes = simulate(jobs, cluster, policy, uplink_factor, fabric)
        scored.append((schedule_metrics(outcomes, cluster)["avg_jct_s"], i, policy))
    return min(scored)[2]
