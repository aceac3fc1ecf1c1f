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
    and last arrival, and the most GPUs they would hold at once were each run as it arrives: above the
    cluster's, jobs must queue; with the share above 100% too, the queue grows while jobs arrive. A short
    trace's share can pass 100% with no queue at all (its work outlasts its arrivals), which the peak says."""
    jobs = list(jobs)
    work_gpu_s = sum(job.gpus * job.duration_s for job in jobs)
    span_s = max(job.submit_s for job in jobs) - min(job.submit_s for job in jobs)
    full_h = work_gpu_s / total_gpus / 3600
    peak = peak_gpus(jobs)
    held = f"run as they arrive, they would hold at most {peak:,} of its {total_gpus:,} GPUs at once"
    if peak > total_gpus:
        held += ": jobs must queue"
    if span_s <= 0:
        fills = f"their work fills the whole cluster {full_h:,.1f} h"
        return f"offered load: every job arrives at once; {fills}; {held}"
    share = work_gpu_s / (total_gpus * span_s)
    if peak > total_gpus and share > 1:
        held += ", and the queue grows while jobs arrive (overloaded)"
    elif share > 1:
        held += " (their work outlasts their arrivals)"
    return (f"offered load: the jobs ask {share:.0%} of the cluster's GPU-time between the first and last "
            f"arrival; {held}")  # fmt: skip


def peak_gpus(jobs: Iterable[Any]) -> int:
    """The most GPUs the jobs hold at once were each to start as it arrives and run its duration (a job that
    ends as another arrives hands its GPUs over)."""
    starts = [(job.submit_s, job.gpus) for job in jobs]
    events = sorted(starts + [(job.submit_s + job.duration_s, -job.gpus) for job in jobs])
    held = peak = 0
    for _, gpus in events:  # at one time, ends (negative) sort before starts
        held += gpus
        peak = max(peak, held)
    return peak
