"""The timed training step: per iteration, waiting for the batch, forward, backward, optimizer step.

Kept free of any bookkeeping beyond a stamp at the five boundaries, so that timing adds almost nothing to
the loop it measures (see bench/overhead.py). On CPU a stamp is the host clock; on CUDA it is an event, and
the stamps of a whole call are read after one synchronisation at its end (device_clock.py), so the host
runs ahead of the device as in a real job instead of waiting for it at every boundary.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.distributed as dist

from stash_core.measure.device_clock import EventClock, HostClock, clock_for
from stash_core.zoo.outputs import training_loss

PARTS = ("data_s", "forward_s", "backward_s", "optimizer_s")


class StepTimes:
    """Per-iteration durations of one rank, in seconds, as parallel lists."""

    def __init__(self) -> None:
        self.data_s: list[float] = []
        self.forward_s: list[float] = []
        self.backward_s: list[float] = []
        self.optimizer_s: list[float] = []
        self.iteration_s: list[float] = []
        self.last_loss: torch.Tensor | None = None  # of the last step run, on the device (never synced)

    def __len__(self) -> int:
        return len(self.iteration_s)


def make_clock(device: torch.device) -> HostClock | EventClock:
    """The clock of the timed loop on this device: CUDA events, or the host clock."""
    return clock_for(device)


make_sync = make_clock  # the name callers used when the loop synchronised at every boundary


def run_steps(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn,
    batches: Iterator,
    device: torch.device,
    count: int,
    times: StepTimes,
    clock: HostClock | EventClock,
) -> None:
    """Run `count` training steps, appending their timings to `times` (after one wait for the device)."""
    stamp = clock.stamp
    non_blocking = device.type == "cuda"
    stamps = []
    for _ in range(count):
        start = stamp()
        inputs, targets = next(batches)
        if inputs.device != device:
            inputs = inputs.to(device, non_blocking=non_blocking)
            targets = targets.to(device, non_blocking=non_blocking)
        after_data = stamp()
        loss = training_loss(model(inputs), targets, loss_fn)  # logits, or an output with .logits/.loss
        after_forward = stamp()
        # With DDP the gradient all-reduce overlaps the backward pass, so it is timed here.
        loss.backward()
        after_backward = stamp()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stamps.append((start, after_data, after_forward, after_backward, stamp()))
    if stamps:
        clock.settle(stamps[-1][-1])
        times.last_loss = loss.detach()
    record(times, stamps, clock.seconds)


def losses_finite(runs: list[StepTimes], device: torch.device) -> bool | None:
    """Whether the last loss of each of these runs was finite on every rank (a diverged job is timed as if
    it trained): one read of the device at a run's end, not one a step. Every rank calls it; None where no
    rank ran a step."""
    losses = [times.last_loss for times in runs if times.last_loss is not None]
    if not losses:
        return None
    finite = float(all(bool(torch.isfinite(loss).all()) for loss in losses))
    flag = torch.tensor([finite], dtype=torch.float64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def record(times: StepTimes, stamps: list[tuple], seconds) -> None:
    for start, after_data, after_forward, after_backward, end in stamps:
        times.data_s.append(seconds(start, after_data))
        times.forward_s.append(seconds(after_data, after_forward))
        times.backward_s.append(seconds(after_forward, after_backward))
        times.optimizer_s.append(seconds(after_backward, end))
        times.iteration_s.append(seconds(start, end))
