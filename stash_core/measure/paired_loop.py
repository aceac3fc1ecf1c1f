"""R0 and R1 timed in one launch, in alternating blocks, so that both runs see the same machine.

On a machine whose speed moves in level shifts of seconds (a virtual machine's CPU), separate launches of R0
and R1 each land on their own speed, and the interconnect stall t(R1) - t(R0) carries both launches'
drift (bench/launch_variance.py, bench/paired_blocks.py). Here:

- block A (R1): every rank steps the DDP model, its gradient all-reduce in backward;
- block B (R0): rank 0 steps the bare module alone (DDP's hooks stay idle outside its forward) while the
  other ranks sleep in a blocking receive until rank 0 is done.

Blocks go in groups A B B A, then B A A B, so that a drift linear in time cancels inside each group. Each
group is one sub-round of both runs: its A steps' mean and its B steps' mean. The intervals are Student-t
intervals over the groups (stats.pool_rounds), the interconnect stall's from the groups' paired differences
(engine/paired.py). Rank 0 decides when to stop after each group, over its groups and those of the profile's
earlier paired launches, and tells the others with one broadcast.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from stash_core.analysis.stats import MSER_BATCH, mser_truncation, pool_rounds
from stash_core.measure import protocol
from stash_core.measure.rank_sync import MIN_WARMUP_ITERATIONS, gathered_steps
from stash_core.measure.timed_loop import PARTS, StepTimes, losses_finite, run_steps

MIN_GROUPS = 8  # groups before a stop is considered (a t-interval over fewer is too wide to trust its spread)
# ... in a later launch, whose groups pool with the earlier launches' (it is there to sample its level)
MIN_GROUPS_LATER = 4
GROUP_ORDERS = ("ABBA", "BAAB")
STOP_CODES = ("", "converged", "max_time", "max_iterations", "launch_groups")


def group_figures(a_means_s: list[float], b_means_s: list[float]) -> dict:
    """R1's, R0's and their difference's mean with its 95% half-width over the groups (each group a round,
    its spread the only one: pool_rounds with no within-group part)."""
    zeros = [0.0] * len(a_means_s)
    differences = [a - b for a, b in zip(a_means_s, b_means_s, strict=True)]
    return {
        "R1": pool_rounds(a_means_s, zeros),
        "R0": pool_rounds(b_means_s, zeros),
        "difference": pool_rounds(differences, zeros),
    }


def worst_ratio(a_means_s: list[float], b_means_s: list[float], target: float) -> float:
    """The widest interval over its goal among R1, R0 and their difference (<= 1: all at the target). The
    difference counts only when it is at least `target` of R1's time, as a stall does (engine/rounds.py)."""
    if len(a_means_s) < 2:
        return float("inf")
    figures = group_figures(a_means_s, b_means_s)
    runs = [figures[run] for run in ("R1", "R0") if figures[run].mean > 0]
    ratios = [figure.ci95 / (target * figure.mean) for figure in runs]
    difference = figures["difference"]
    if abs(difference.mean) >= target * figures["R1"].mean:
        ratios.append(difference.ci95 / (target * abs(difference.mean)))
    return max(ratios) if len(ratios) >= 2 else float("inf")


def warmup_groups(a_means_s: list[float], b_means_s: list[float]) -> int:
    """Leading groups to drop: where the paired differences settle (MSER-5 over the groups, so nothing is cut
    before there are 20 groups to judge by: a group is already 2 x block steps)."""
    differences = [a - b for a, b in zip(a_means_s, b_means_s, strict=True)]
    return mser_truncation(differences) if len(differences) >= 4 * MSER_BATCH else 0


def run_paired(job, model, optimizer, loss, batches, device, clock, rank: int, world_size: int) -> dict:
    """Warm both kinds of step up, then groups of blocks until rank 0's figures reach the target or a cap;
    the result as rank 0 reports it (R1's samples, with R0's and the groups under "paired")."""
    bare = model.module  # the same parameters without DDP's all-reduce
    block = int(job["paired"]["block_steps"])  # the engine's choice (engine/paired.BLOCK_STEPS)
    target = job["target_relative_ci"]
    a_times, b_times = StepTimes(), StepTimes()
    token = torch.zeros(1)
    flag = torch.zeros(1)

    def b_block(count: int) -> None:
        if rank == 0:
            run_steps(bare, optimizer, loss, batches, device, count, b_times, clock)
            for peer in range(1, world_size):
                dist.send(token, dst=peer)
        else:
            dist.recv(token, src=0)  # asleep in a blocking read while rank 0 steps alone

    run_steps(model, optimizer, loss, batches, device, MIN_WARMUP_ITERATIONS, a_times, clock)
    b_block(MIN_WARMUP_ITERATIONS)
    a_times, b_times = StepTimes(), StepTimes()
    deadline = time.monotonic() + job["max_phase_s"]
    group, b_loop_s, stop_reason = 0, 0.0, ""
    while not stop_reason:
        for kind in GROUP_ORDERS[group % 2]:
            if kind == "A":
                run_steps(model, optimizer, loss, batches, device, block, a_times, clock)
            else:
                started = time.monotonic()
                b_block(block)
                b_loop_s += time.monotonic() - started
        group += 1
        if rank == 0:
            stop_reason = decide(job, a_times, b_times, block, group, target, deadline)
            flag.fill_(STOP_CODES.index(stop_reason))
        dist.broadcast(flag, src=0)
        stop_reason = STOP_CODES[int(flag.item())]
    return paired_result(job, a_times, b_times, block, stop_reason, b_loop_s, device, rank, world_size)


def group_means(times: StepTimes, block: int) -> list[float]:
    """Each group's mean step time: its two blocks of one kind, 2 x block steps in a row."""
    steps = times.iteration_s
    size = 2 * block
    return [sum(steps[i : i + size]) / size for i in range(0, len(steps) - size + 1, size)]


def decide(job, a_times: StepTimes, b_times: StepTimes, block: int, group: int, target, deadline) -> str:
    """Rank 0's decision after a group: "" to go on, else why the loop stops. It reports progress too."""
    a_means, b_means = group_means(a_times, block), group_means(b_times, block)
    cut = warmup_groups(a_means, b_means)
    # The figures pool the groups of the profile's earlier paired launches too (engine/paired.py), and a
    # later launch stops once they reach the target, after MIN_GROUPS_LATER of its own. What launches
    # disagree by is not narrowed by a longer launch (the engine adds launches for that), so the rule looks
    # at the groups alone.
    prior_a, prior_b = job["paired"].get("prior_a_s") or [], job["paired"].get("prior_b_s") or []
    a_pooled = [g for groups in prior_a for g in groups] + a_means[cut:]
    b_pooled = [g for groups in prior_b for g in groups] + b_means[cut:]
    ratio = worst_ratio(a_pooled, b_pooled, target)
    steps = len(a_times) + len(b_times)
    protocol.emit(
        "PROGRESS",
        {
            "phase": job["phase"],
            "iterations": steps + 2 * MIN_WARMUP_ITERATIONS,
            "kept": 2 * block * (group - cut),
            "mean_s": sum(a_means[cut:]) / max(group - cut, 1),
            "relative_ci": ratio * target if ratio != float("inf") else None,
            "target_relative_ci": target,
            "fixed_iterations": None,
            "max_iterations": job["max_iterations"],
        },
    )
    if group - cut >= (MIN_GROUPS_LATER if prior_a else MIN_GROUPS) and ratio <= 1.0:
        return "converged"
    launch_groups = job["paired"].get("launch_groups")
    if launch_groups and group - cut >= launch_groups:
        return "launch_groups"  # the engine adds launches: they narrow what launches disagree by
    if steps >= job["max_iterations"]:
        return "max_iterations"
    return "max_time" if time.monotonic() > deadline else ""


def paired_result(job, a_times, b_times, block, stop_reason, b_loop_s, device, rank, world_size) -> dict:
    """R1's kept samples (the mean over the ranks per step, as in every multi-worker run), R0's (rank 0's
    own), and the groups' means after the warm-up groups, on rank 0 (the other ranks return their part of
    nothing)."""
    _, steps = gathered_steps(a_times, world_size, device)
    loss_finite = losses_finite([a_times, b_times], device)  # every rank: it is a collective
    if rank != 0:
        return {}
    a_steps = StepTimes()
    a_steps.iteration_s = steps["iteration_s"]
    a_means, b_means = group_means(a_steps, block), group_means(b_times, block)
    cut = warmup_groups(a_means, b_means)
    first_step = 2 * block * cut
    kept_skew = steps.pop("skew_s")[first_step:]
    return {
        "phase": job["phase"],
        "world_size": world_size,
        "warmup_iterations": MIN_WARMUP_ITERATIONS + first_step,
        "stop_reason": stop_reason,
        "samples": {name: values[first_step:] for name, values in steps.items()},
        "rank_skew_s": sum(kept_skew) / max(len(kept_skew), 1),
        "bad_files": None,
        "loss_finite": loss_finite,
        "paired": {
            "block_steps": block,
            "groups_a_s": a_means[cut:],
            "groups_b_s": b_means[cut:],
            "warmup_groups": cut,
            "b_loop_s": b_loop_s,
            "b_samples": {name: getattr(b_times, name)[first_step:] for name in ("iteration_s", *PARTS)},
        },
    }
