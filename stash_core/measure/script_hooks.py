"""Instrumentation of a user's training script, installed before it runs (nothing in the script changes).

- Iteration boundaries: steps of the first optimizer that steps (torch's global optimizer step hook), so
  gradient accumulation counts one iteration per optimizer step.
- Data wait: time inside `__next__` of any torch DataLoader iterator since the previous boundary.
- Replay (synthetic runs): each DataLoader's iterator hands out the first batches it produced, cached in
  memory, in a cycle as long as the loader's own epoch, so the model sees the script's real batch structure
  with no loading cost. The batches are read before the first optimizer step, during the warm-up.

Per boundary the hook reads the clock and appends to two lists; every `check` calls back to decide whether to
stop (see script_stop.py). On CUDA the boundaries are CUDA events, synchronised only at a check.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

REPLAY_BATCHES = 8  # batches cached per loader for the synthetic runs


class StepClock:
    """Per-iteration times of this rank: iteration (boundary to boundary) and data wait within it."""

    def __init__(self, use_cuda_events: bool = False) -> None:
        self.iteration_s: list[float] = []
        self.data_s: list[float] = []
        self.data_wait_s = 0.0  # since the last boundary
        self.last_boundary: float | None = None
        self.optimizer_id: int | None = None
        self.first_step_at: float | None = None
        self.loader_used = False
        self.batch_size: int | None = None
        self.on_boundary: Callable[[], None] | None = None
        self.use_cuda_events = use_cuda_events
        self._events: list = []  # CUDA events of the boundaries not yet read

    def boundary(self, optimizer) -> None:
        if self.optimizer_id is None:
            self.optimizer_id = id(optimizer)
        elif id(optimizer) != self.optimizer_id:
            return  # a second optimizer of the same iteration (GANs): one boundary per iteration
        now = time.perf_counter()
        if self.use_cuda_events:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._events.append(event)
        if self.last_boundary is None:
            self.first_step_at = now  # the time before the first step is start-up, not an iteration
        else:
            self.iteration_s.append(now - self.last_boundary)
            self.data_s.append(self.data_wait_s)
        self.last_boundary = now
        self.data_wait_s = 0.0
        if self.on_boundary is not None:
            self.on_boundary()

    def settle(self) -> None:
        """On CUDA: replace the host-clock iteration times since the last settle by the device's times
        between boundary events (one synchronisation per check, so the host may run ahead as usual)."""
        if not self.use_cuda_events or len(self._events) < 2:
            return
        self._events[-1].synchronize()
        device_s = [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(self._events)]
        self.iteration_s[len(self.iteration_s) - len(device_s) :] = device_s
        self._events = self._events[-1:]


def install(clock: StepClock, replay: bool, replay_batches: int = REPLAY_BATCHES) -> Callable[[], None]:
    """Install the hooks; returns the function that removes them."""
    handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: clock.boundary(optimizer))
    original_next = _BaseDataLoaderIter.__next__
    original_iter = DataLoader.__iter__

    def timed_next(self):
        start = time.perf_counter()
        try:
            batch = original_next(self)
        finally:
            clock.data_wait_s += time.perf_counter() - start
        if not clock.loader_used:
            clock.loader_used = True
            clock.batch_size = leading_dim(batch)
        return batch

    def replay_iter(self):
        return _Replay(self, original_iter, clock, replay_batches)

    _BaseDataLoaderIter.__next__ = timed_next
    if replay:
        DataLoader.__iter__ = replay_iter

    def remove() -> None:
        handle.remove()
        _BaseDataLoaderIter.__next__ = original_next
        DataLoader.__iter__ = original_iter

    return remove


class _Replay:
    """One epoch of a loader in replay: its first batches (read once per loader, kept), cycled for as many
    batches as the loader's epoch has (endless when it has no length)."""

    def __init__(self, loader, original_iter, clock: StepClock, cached: int) -> None:
        clock.loader_used = True
        self.clock = clock
        if not hasattr(loader, "_stash_replay"):
            source = original_iter(loader)
            loader._stash_replay = list(itertools.islice(source, cached))
            del source  # ends the loader's worker processes
            if clock.batch_size is None and loader._stash_replay:
                clock.batch_size = leading_dim(loader._stash_replay[0])
        self.batches = loader._stash_replay
        try:
            self.remaining = len(loader)
        except TypeError:
            self.remaining = None
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        start = time.perf_counter()
        try:
            if not self.batches or self.remaining == 0:
                raise StopIteration
            if self.remaining is not None:
                self.remaining -= 1
            batch = self.batches[self.index % len(self.batches)]
            self.index += 1
            return batch
        finally:
            self.clock.data_wait_s += time.perf_counter() - start

    def __len__(self):
        return self.remaining or 0


def leading_dim(batch) -> int | None:
    """The batch size of a batch: the first dimension of its first tensor (dicts, tuples, lists, objects)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    if isinstance(batch, dict):
        items = list(batch.values())
    elif isinstance(batch, list | tuple):
        items = list(batch)
    else:
        items = list(getattr(batch, "__dict__", {}).values())
    for item in items:
        size = leading_dim(item)
        if size is not None:
            return size
    return None
