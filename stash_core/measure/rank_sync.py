"""What the ranks of a run share while it measures, for Stash's own loop and for a user's script alike: the
job's step times and the progress line rank 0 reports.

A synchronous step's time is the mean of the ranks' own times of that step, not the slowest rank's: a rank
that finishes first waits in the step's collective, so every rank's steps add up to the same wall time, and
each rank's mean is the job's. A step's maximum over the ranks is above that whenever the ranks' step
boundaries are apart (rank 0's step i long where rank 1's is short, and the other way round the step
after): its mean counts that jitter as time the job never spent. The slowest rank of each step and the skew
(slowest - fastest) are kept beside it, as what they are."""

from __future__ import annotations

import torch
import torch.distributed as dist

from stash_core.analysis.stats import mean_ci95, mser_truncation
from stash_core.measure import protocol
from stash_core.measure.timed_loop import PARTS, StepTimes
from stash_core.measure.worker_job import WorkerJob

MIN_WARMUP_ITERATIONS = 2  # always dropped before MSER looks at the rest: the first steps build caches


def warmup_count(step_s: list[float], fixed: int | None = None) -> int:
    """Steps dropped as warm-up: MIN_WARMUP_ITERATIONS, then MSER's cut of the rest (stats.mser_truncation).
    A run stopped at a fixed count keeps exactly that many, the last ones: MSER's cut can shrink as steps
    come in, so the run may have stepped past the count by the time a check found it reached."""
    warmup = min(len(step_s), MIN_WARMUP_ITERATIONS + mser_truncation(step_s[MIN_WARMUP_ITERATIONS:]))
    return warmup if fixed is None else max(warmup, len(step_s) - fixed)


def all_reduce_max(values: list[float], device: torch.device) -> list[float]:
    """Each value's maximum over the ranks (the values as they are without a process group)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def agree(step_s: list[float], flag: bool, device: torch.device) -> tuple[list[float], bool]:
    """(each step's mean time over the ranks, whether any rank raised `flag`), in one collective."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return list(step_s), flag
    tensor = torch.tensor([*step_s, float(flag)], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    summed = tensor.tolist()
    world_size = dist.get_world_size()
    return [value / world_size for value in summed[:-1]], summed[-1] > 0


def gathered_steps(times: StepTimes, world_size: int, device: torch.device) -> tuple[torch.Tensor, dict]:
    """Every rank's step times gathered (ranks, 5, steps: the iteration, then PARTS) and by_step of them."""
    local = torch.tensor(
        [times.iteration_s, *(getattr(times, part) for part in PARTS)], dtype=torch.float64, device=device
    )
    if world_size > 1:
        gathered = [torch.empty_like(local) for _ in range(world_size)]
        dist.all_gather(gathered, local)
        per_rank = torch.stack(gathered).cpu()
    else:
        per_rank = local.cpu().unsqueeze(0)
    return per_rank, by_step(per_rank)


def by_step(per_rank: torch.Tensor) -> dict[str, list]:
    """Per step of the gathered times (ranks, 5, steps): the iteration time and each part as the mean over
    the ranks (the job's step; the parts still add up to it), the slowest rank and the skew (slowest -
    fastest)."""
    means = per_rank.mean(dim=0)
    steps = {"iteration_s": means[0].tolist()}
    for index, part in enumerate(PARTS, start=1):
        steps[part] = means[index].tolist()
    iteration_by_rank = per_rank[:, 0, :]
    steps["slowest_rank"] = iteration_by_rank.argmax(dim=0).tolist()
    steps["skew_s"] = (iteration_by_rank.max(dim=0).values - iteration_by_rank.min(dim=0).values).tolist()
    return steps


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
