"""What a simulation assumed, in words `stash schedule` and the Schedule page both say: how crossing
switches slows a spread job (the link model, or none), where each job's network sensitivity came from, and
how much work the trace offers the cluster."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from stash_core.sched.fabric import Fabric

SOURCE_WORDS = {
    "trace": "from the trace's network_slowdown",
    "measured": "measured by Stash (multi-node profiles of their model)",
    "blox": "from Blox's penalty for their model",
    "blox default": "from Blox's default penalty (model not in Blox's list: 0.8 of the speed)",
    "drawn (blox)": "drawn from Blox's penalties (the trace names no model)",
}


def links_line(fabric: dict[str, Any]) -> str:
    """The link model of a simulation document's `fabric`: links shared by bandwidth, or the multiplier."""
    if fabric.get("node_gbps") is not None:
        links = Fabric(fabric["node_gbps"], fabric["uplink_gbps"], fabric["reference_gbps"])
        return f"links shared max-min fairly: {links.label()}"
    factor = f"{float(fabric.get('uplink_factor', 0)):g}"
    return f"no link model: crossing more switches than needed multiplies the stall by {factor}"


def sensitivity_counts(sources: Iterable[str]) -> dict[str, int]:
    """How many jobs took their network sensitivity from each source, most first."""
    return dict(Counter(sources).most_common())


def sensitivity_line(counts: dict[str, int]) -> str:
    return "network sensitivity (slowdown when spread) of the jobs: " + "; ".join(
        f"{n} {SOURCE_WORDS.get(kind, kind)}" for kind, n in counts.items()
    )


def offered_load_line(jobs: Iterable[Any], total_gpus: int) -> str:
    """The work the jobs ask (GPUs x consolidated duration) over the cluster's GPU-time between the first
    and last arrival: above 100% the queue grows while jobs arrive, and the figures with its length."""
    jobs = list(jobs)
    work_gpu_s = sum(job.gpus * job.duration_s for job in jobs)
    span_s = max(job.submit_s for job in jobs) - min(job.submit_s for job in jobs)
    full_h = work_gpu_s / total_gpus / 3600
    if span_s <= 0:
        return f"offered load: every job arrives at once; their work fills the whole cluster {full_h:,.1f} h"
    share = work_gpu_s / (total_gpus * span_s)
    grows = ": the queue grows while jobs arrive (overloaded)" if share > 1 else ""
    return (f"offered load: the jobs ask {share:.0%} of the cluster's GPU-time between the first and last "
            f"arrival{grows}")  # fmt: skip
