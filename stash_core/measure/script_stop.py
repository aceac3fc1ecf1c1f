"""When to stop a user's script, and what its ranks measured: the rule of Stash's own timed loop (worker.py).

Every few iterations (at an optimizer step, where every rank of a synchronous job is at the same step) the
ranks all-reduce the times since the last check through the script's own process group, so each holds the
job's time per iteration (the mean over the ranks: rank_sync.py) and all take the same decision. Past the
interval target, the iteration cap or the time cap, the ranks gather their times to rank 0 while the group
is still alive, and the script is stopped by StopScript raised from the optimizer step.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from stash_core.analysis.stats import converged, mser_truncation
from stash_core.measure.rank_sync import (
    MIN_WARMUP_ITERATIONS,
    agree,
    all_reduce_max,
    by_step,
    report_progress,
    warmup_count,
)
from stash_core.measure.script_hooks import PARTS, StepClock
from stash_core.measure.worker_job import WorkerJob

SPLIT = (
    "data wait, forward (the outermost module calls), optimizer step; backward_s is the rest of the step "
    "(loss, backward, gradient clipping, zero_grad)"
)
CLOSURE_SPLIT = (
    "data wait, forward (the outermost module calls); backward_s is the rest of the step, with the optimizer "
    "step, whose closure runs forward and backward (as Lightning's does)"
)
NO_SPLIT = (
    "iteration and data wait only: the script called no torch module, so forward and backward are not split"
)
FIRST_CHECK_AFTER = 10


class StopScript(BaseException):
    """Raised from an optimizer step to end the script: a BaseException, so `except Exception` lets it by."""


class StopRule:
    def __init__(self, job: WorkerJob, clock: StepClock, rank: int) -> None:
        self.job, self.clock, self.rank = job, clock, rank
        self.fixed = job.get("iterations")
        self.deadline: float | None = None  # from the first step: the script's start-up does not count
        # The first check comes as soon as a fixed count or the iteration cap could be met, and no later.
        self.chunk = min(FIRST_CHECK_AFTER, job["max_iterations"])
        if self.fixed is not None:
            self.chunk = max(1, min(self.chunk, MIN_WARMUP_ITERATIONS + self.fixed))
        self.checked = 0  # iterations already all-reduced
        self.step_s: list[float] = []
        self.result: dict | None = None
        # What ends the process where the script caught StopScript (a bare `except:`) and stepped again
        self.on_caught_stop: Callable[[], None] | None = None

    def __call__(self) -> bool:
        """Called at every boundary: cheap unless a check is due. True when a check ran."""
        if self.result is not None and self.on_caught_stop is not None:
            self.on_caught_stop()  # its run is measured: reported as stopped, the process ended
        if self.deadline is None:
            self.deadline = time.monotonic() + self.job["max_phase_s"]
        if self.clock.iterations - self.checked < self.chunk:
            return False
        self.check()
        return True

    def check(self) -> None:
        self.clock.settle()
        fresh = self.clock.iteration_s[self.checked :]
        step_s, over_time = agree(fresh, time.monotonic() > self.deadline, collective_device())
        self.step_s.extend(step_s)
        self.checked = len(self.clock.iteration_s)
        series = self.step_s[MIN_WARMUP_ITERATIONS:]
        kept = len(series) - mser_truncation(series)
        if self.rank == 0:
            report_progress(self.job, series, kept, self.job["target_relative_ci"])
        reason = self.stop_reason(series, kept, over_time)
        if reason is None:
            # Check less often as the run grows: the check costs O(n) and the decision changes slowly.
            self.chunk = max(FIRST_CHECK_AFTER, len(self.step_s) // 5)
            if self.fixed is not None:
                self.chunk = max(1, min(self.chunk, self.fixed - kept))
            self.chunk = max(1, min(self.chunk, self.job["max_iterations"] - len(self.step_s)))
            return
        self.result = summarise(self.job, self.clock, self.step_s, reason, gather=True)
        raise StopScript(reason)

    def stop_reason(self, series: list[float], kept: int, over_time: bool) -> str | None:
        if self.fixed is not None:
            if kept >= self.fixed:
                return "fixed"
        elif converged(series, self.job["target_relative_ci"]):
            return "converged"
        if len(self.step_s) >= self.job["max_iterations"]:
            return "max_iterations"
        return "max_time" if over_time else None

    def ended_by_script(self, gather: bool = True) -> dict:
        """The script ended by itself: what it measured. The times after the last check are this rank's own
        (the process group may be gone by now); `gather` False: the ranks are not gathered at all (this
        rank may be ending alone)."""
        self.clock.settle()
        step_s = self.step_s + self.clock.iteration_s[self.checked :]
        gather = gather and dist.is_initialized() and self.checked == len(self.clock.iteration_s)
        return summarise(self.job, self.clock, step_s, "script_ended", gather=gather)


def collective_device() -> torch.device:
    """Where the collectives' tensors live: the GPU for NCCL, else (gloo, or no process group) the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def summarise(job: WorkerJob, clock: StepClock, step_s: list[float], reason: str, gather: bool) -> dict:
    """The result of the run (as worker.py's): the job's time per iteration and its parts (means over the
    ranks), the slowest rank of each iteration, and skew."""
    count = len(step_s)
    rows = [clock.iteration_s[:count], *(clock.parts[part][:count] for part in PARTS)]
    local = torch.tensor(rows, dtype=torch.float64)
    world_size = dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", "1"))
    host = (socket.gethostname(), int(os.environ.get("GROUP_RANK", "0")))
    if gather and dist.is_initialized() and world_size > 1:
        device = collective_device()
        gathered = [torch.empty_like(local, device=device) for _ in range(world_size)]
        dist.all_gather(gathered, local.to(device))
        per_rank = torch.stack(gathered).cpu()  # (ranks, 5, iterations)
        hosts: list = [None] * world_size
        dist.all_gather_object(hosts, host)
        seen = all_reduce_max([clock.forward_seen, clock.closure_seen], device)
        forward_seen, closure_seen = (v > 0 for v in seen)
    else:
        per_rank, hosts = local.unsqueeze(0), [host]
        forward_seen, closure_seen = clock.forward_seen, clock.closure_seen
    steps = by_step(per_rank)  # the job's step and its parts, the slowest rank and the skew of each step
    warmup = warmup_count(step_s, job.get("iterations") if reason == "fixed" else None)
    skew = steps["skew_s"]
    kept = per_rank[:, :, warmup:]
    means = kept.mean(dim=2) if count > warmup else torch.full((len(hosts), len(rows)), float("nan"))
    parts, split = (PARTS[:3], CLOSURE_SPLIT) if closure_seen else (PARTS, SPLIT)
    if not forward_seen:
        parts, split = PARTS[:1], NO_SPLIT  # iteration and data wait only
    samples = {"iteration_s": step_s[warmup:]}
    for part in parts:
        samples[part] = steps[part][warmup:]
    samples["slowest_rank"] = steps["slowest_rank"][warmup:] if len(hosts) > 1 else [0] * (count - warmup)
    return {
        "phase": job["phase"],
        "world_size": world_size,
        "warmup_iterations": warmup,
        "stop_reason": reason,
        "samples": samples,
        # Not measured (None) when only this rank's times are at hand (the script ended its process group,
        # left through os._exit, or stepped after the last check).
        "rank_skew_s": sum(skew[warmup:]) / max(count - warmup, 1) if len(hosts) == world_size else None,
        "bad_files": None,
        "ranks": [
            {
                "rank": rank,
                "hostname": name,
                "node": node,
                **{name: float(means[rank, i]) for i, name in enumerate(("iteration_s", *parts))},
            }
            for rank, (name, node) in enumerate(hosts)
        ],  # fmt: skip
        "script": {
            "loader_used": clock.loader_used,
            "batch_size": clock.batch_size,
            "iterations_per_epoch": clock.iterations_per_epoch,
            "loader_workers": clock.loader_workers,
            "threads": max(clock.threads) if clock.threads else None,
            "threads_seen": list(clock.threads),
            "optimizer_steps": clock.iterations + (clock.first_step_at is not None),
            "other_steps_after": clock.other_steps_after,
            "process_group": bool(clock.process_group),
            "group_ended_after": clock.group_ended_after,
            "split": split,
            "ranks_gathered": len(hosts) == world_size,
            "warnings": list(clock.warnings),  # this rank's: what the profile should say of the run
        },
    }
