"""The timed training step: per iteration, waiting for the batch, forward, backward, optimizer step.

Kept free of any bookkeeping beyond reading the clock at the four boundaries, so that timing
adds almost nothing to the loop it measures (see bench/overhead.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

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

    def __len__(self) -> int:
        return len(self.iteration_s)


def make_sync(device: torch.device) -> Callable[[], None]:
    """A barrier for the device's queue: CUDA kernels are asynchronous, CPU ops are not."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def run_steps(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable,
    batches: Iterator,
    device: torch.device,
    count: int,
    times: StepTimes,
    sync: Callable[[], None],
) -> None:
    """Run `count` training steps, appending their timings to `times`."""
    clock = time.perf_counter
    non_blocking = device.type == "cuda"
    for _ in range(count):
        start = clock()
        inputs, targets = next(batches)
        if inputs.device != device:
            inputs = inputs.to(device, non_blocking=non_blocking)
            targets = targets.to(device, non_blocking=non_blocking)
        sync()
        after_data = clock()
        loss = training_loss(model(inputs), targets, loss_fn)  # logits, or an output with .logits/.loss
        sync()
        after_forward = clock()
        # With DDP the gradient all-reduce overlaps the backward pass, so it is timed here.
        loss.backward()
        sync()
        after_backward = clock()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        end = clock()
        times.data_s.append(after_data - start)
        times.forward_s.append(after_forward - after_data)
        times.backward_s.append(after_backward - after_forward)
        times.optimizer_s.append(end - after_backward)
        times.iteration_s.append(end - start)
