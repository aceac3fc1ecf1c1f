"""What the ranks of a run share while it measures, for Stash's own loop and for a user's script alike: the
slowest rank's times (a synchronous step waits for it) and the progress line rank 0 reports."""

from __future__ import annotations

import torch
import torch.distributed as dist

from stash_core.analysis.stats import mean_ci95
from stash_core.measure import protocol
from stash_core.measure.timed_loop import PARTS, StepTimes
from stash_core.measure.worker_job import WorkerJob

MIN_WARMUP_ITERATIONS = 2  # always dropped before MSER-5 looks at the rest: the first steps build caches


def all_reduce_max(values: list[float], device: torch.device) -> list[float]:
    """Each value's maximum over the ranks (the values as they are without a process group)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def slowest_by_step(times: StepTimes, world_size: int, device: torch.device) -> tuple[torch.Tensor, dict]:
    """Every rank's step times gathered (ranks, 5, steps: the iteration, then PARTS) and, per step, the
    slowest rank's: its iteration time, its parts, which rank it was and the skew (slowest - fastest)."""
    local = torch.tensor(
        [times.iteration_s, *(getattr(times, part) for part in PARTS)], dtype=torch.float64, device=device
    )
    if world_size > 1:
        gathered = [torch.empty_like(local) for _ in range(world_size)]
        dist.all_gather(gathered, local)
        per_rank = torch.stack(gathered).cpu()
    else:
        per_rank = local.cpu().unsqueeze(0)
    iteration_by_rank = per_rank[:, 0, :]
    slowest_rank = iteration_by_rank.argmax(dim=0)
    columns = torch.arange(per_rank.shape[2])
    slowest = {"iteration_s": iteration_by_rank.max(dim=0).values.tolist()}
    for index, part in enumerate(PARTS, start=1):
        slowest[part] = per_rank[slowest_rank, index, columns].tolist()
    slowest["slowest_rank"] = slowest_rank.tolist()
    slowest["skew_s"] = (iteration_by_rank.max(dim=0).values - iteration_by_rank.min(dim=0).values).tolist()
    return per_rank, slowest


def report_progress(job: WorkerJob, series: list[float], kept: int, target: float) -> None:
    """A PROGRESS line: iterations so far, those kept after the warm-up, their mean and relative interval."""
    tail = series[len(series) - kept :] if kept else []
    mean_s, ci_s = mean_ci95(tail) if len(tail) > 1 else (float("nan"), float("inf"))
    protocol.emit(
        "PROGRESS",
        {
            "phase": job["phase"],
            "iterations": len(series) + MIN_WARMUP_ITERATIONS if series else 0,
            "kept": kept,
            "mean_s": mean_s if tail else None,
            "relative_ci": (ci_s / mean_s) if tail and mean_s > 0 and ci_s != float("inf") else None,
            "target_relative_ci": target,
            "fixed_iterations": job.get("iterations"),
            "max_iterations": job["max_iterations"],
        },
    )
