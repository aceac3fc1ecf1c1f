"""Instrumentation of a user's training script, installed before it runs (nothing in the script changes).

- Iteration boundaries: steps of the first optimizer that steps (torch's global optimizer step hooks), so
  gradient accumulation counts one iteration per optimizer step; the optimizer step itself is timed from
  its pre-hook.
- Data wait: time inside `__next__` of any torch DataLoader iterator since the previous boundary; the samples
  those calls return (each batch's first dimension) make the iteration's batch per process.
- Forward: time inside the outermost module call(s) of the step (script_forward.py). The rest of the
  iteration (the loss, backward, gradient clipping, zero_grad, a scheduler) is reported as backward_s.
- Replay (synthetic runs, script_replay.py): each map-style dataset's first samples, read once before the
  first optimizer step, are handed out again in place of new reads, while the loader's sampler, collation and
  workers run as in the real-data runs: the synthetic runs skip the loading only, so the model sees the
  script's real batch structure with no loading cost. An IterableDataset's loader replays its first batches.
  A dataset that cannot be read outside its loader's workers is left to them, with a warning (warnings).

Each boundary only takes stamps (device_clock.py): the host clock, or CUDA events on the device of the
optimizer's parameters, chosen at the first step, when the script has placed its model. Stamps turn into
durations at a check of the stopping rule (script_stop.py), after one synchronisation.
"""

from __future__ import annotations

import collections
import time
import weakref
from collections.abc import Callable

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import DataLoader, IterableDataset
from torch.utils.data._utils.fetch import _MapDatasetFetcher
from torch.utils.data.dataloader import _BaseDataLoaderIter

from stash_core.measure.device_clock import EventClock, HostClock
from stash_core.measure.script_backward import count_backwards
from stash_core.measure.script_forward import time_forward
from stash_core.measure.script_replay import REPLAY_BATCHES, BatchReplay, SampleReplay, leading_dim

PARTS = ("data_s", "forward_s", "backward_s", "optimizer_s")
_TOKEN = "_stash_epoch_token"  # kept on a DataLoader iterator: (its batches per epoch or 0, a unique object)


class StepClock:
    """Per-iteration times of this rank: the iteration (boundary to boundary) and its parts."""

    def __init__(self, use_cuda_events: bool = True, event_clock: Callable = EventClock) -> None:
        self.iteration_s: list[float] = []  # settled durations, one per whole iteration
        self.parts: dict[str, list[float]] = {part: [] for part in PARTS}
        self.iterations = 0  # whole iterations, settled or not
        self.pending: list[tuple] = []  # stamps of the iterations not yet settled
        self.data_pairs: list[tuple] = []  # (start, end) stamps since the last boundary
        self.forward_pairs: list[tuple] = []
        self.optimizer_start = None
        self.last_boundary = None
        self.optimizer_id: int | None = None
        self.optimizer_ref: Callable[[], object] = lambda: None  # a weak reference: a script may drop it
        # Steps of other optimizers since the timed one's last step: a script that makes a new optimizer per
        # stage and keeps the old ones goes on training where the timed one has stopped.
        self.other_steps_after = 0
        # Whether the script set up a process group by a step: without one its workers never communicate
        # (read at the steps: a script may destroy its group before it ends).
        self.process_group = False
        self.group_ended_after: int | None = None  # optimizer steps when the script ended its process group
        self.backwards_before_step = 0  # backward passes before the first step (script_backward.py)
        self.first_step_at: float | None = None
        self.last_step_at: float | None = None
        self.loader_used = False
        self.forward_seen = False
        self.closure_seen = False  # the optimizer step ran the forward (a closure): not split from backward
        self.in_loader = False  # module calls inside a loader are not the forward pass
        # Samples (the first dimension of each batch) read from torch DataLoaders since the last boundary,
        # and how many iterations read each total: with gradient accumulation an iteration reads several.
        self.samples_read = 0
        self.samples_per_iteration: collections.Counter[int] = collections.Counter()
        self.loader_workers: int | None = None  # worker processes of the loader the steps read, as made
        self.read_workers: int | None = None  # of the loader read last (a number: holding its iterator
        # would keep its worker processes alive)
        # Since the last boundary, per DataLoader iterator read: [its token (batches per epoch, ...), reads]
        self.step_reads: dict[int, list] = {}
        # The steps per epoch each iteration that read a loader gives (None where a loader has no length)
        self.epoch_steps: collections.Counter[int | None] = collections.Counter()
        self.warnings: list[str] = []  # what the profile should say of this run, each once
        self.threads: list[int] = []  # torch threads at each optimizer step, each value once, in order
        self.on_boundary: Callable[[], bool] | None = None  # True when it took time of its own
        self.narrow_hooks: Callable[[], bool] | None = None
        self.use_cuda_events, self.event_clock = use_cuda_events, event_clock
        self.device_clock = HostClock()
        self.stamp = self.device_clock.stamp

    @property
    def data_s(self) -> list[float]:
        return self.parts["data_s"]

    def step_started(self, optimizer) -> None:
        if id(optimizer) == self.optimizer_id and self.last_boundary is not None:
            self.optimizer_start = self.stamp()

    def boundary(self, optimizer) -> None:
        if self.optimizer_id is None:
            self.choose_clock(optimizer)
            self.follow(optimizer)
        elif id(optimizer) != self.optimizer_id:
            if self.optimizer_ref() is not None:
                self.other_steps_after += 1
                return  # a second optimizer of the same iteration (GANs): one boundary per iteration
            # The timed optimizer is gone (`optimizer = SGD(...)` again, a new stage): its successor times on.
            self.follow(optimizer)
        self.other_steps_after = 0
        if not self.process_group:
            self.process_group = torch.distributed.is_available() and torch.distributed.is_initialized()
        now = self.stamp()
        threads = torch.get_num_threads()  # as the script set them (it may change them after Stash did)
        if threads not in self.threads:
            self.threads.append(threads)
        self.last_step_at = time.perf_counter()  # a script that stops stepping is found by its age
        if self.last_boundary is None:
            self.first_step_at = self.last_step_at  # before the first step is start-up, not an iteration
        else:
            stamps = (self.last_boundary, now, self.data_pairs, self.forward_pairs, self.optimizer_start)
            self.pending.append(stamps)
            self.iterations += 1
            if self.data_pairs:
                self.samples_per_iteration[self.samples_read] += 1
                reads = [(token[0], count) for token, count in self.step_reads.values()]
                self.epoch_steps[steps_per_epoch(reads)] += 1
            if self.narrow_hooks is not None and self.narrow_hooks():
                self.narrow_hooks = None
        self.last_boundary = now
        if self.data_pairs:  # the loader this step read (not one read before training, e.g. a sanity check)
            self.loader_workers = self.read_workers
        self.data_pairs, self.forward_pairs, self.optimizer_start = [], [], None
        self.samples_read, self.step_reads = 0, {}
        if self.on_boundary is not None and self.on_boundary():
            # A check ran (a wait for the device, an all-reduce): its time is Stash's, not the next step's.
            self.last_boundary = self.stamp()

    def batch_read(self, batch) -> None:
        self.loader_used = True
        self.samples_read += leading_dim(batch) or 0

    @property
    def batch_size(self) -> int | None:
        """Samples per iteration (optimizer step) of this process: the most common total read between two
        steps (an epoch's last batch may be short); None when no whole iteration read a DataLoader."""
        common = self.samples_per_iteration.most_common(1)
        return (common[0][0] or None) if common else None

    @property
    def iterations_per_epoch(self) -> int | None:
        """Optimizer steps per epoch, as most iterations saw them (steps_per_epoch); None when a loader the
        steps read has no length (an IterableDataset without __len__) or no iteration read one."""
        common = self.epoch_steps.most_common(1)
        return common[0][0] if common else None

    def follow(self, optimizer) -> None:
        """Time the steps of `optimizer`: each one ends an iteration."""
        self.optimizer_id = id(optimizer)
        try:
            self.optimizer_ref = weakref.ref(optimizer)
        except TypeError:  # an object without weak references: taken as alive for good
            self.optimizer_ref = lambda: optimizer

    def choose_clock(self, optimizer) -> None:
        """CUDA events on the device of the optimizer's parameters, if there is one (never before the first
        step: an event on the wrong device would start a CUDA context there)."""
        device = next((p.device for group in optimizer.param_groups for p in group["params"]), None)
        if self.use_cuda_events and device is not None and device.type == "cuda":
            self.device_clock = self.event_clock(device)
            self.stamp = self.device_clock.stamp

    def settle(self) -> None:
        """The durations of the iterations stamped since the last settle (one wait for the device)."""
        if not self.pending:
            return
        self.device_clock.settle(self.pending[-1][1])
        seconds = self.device_clock.seconds
        for start, end, data_pairs, forward_pairs, optimizer_start in self.pending:
            total_s = seconds(start, end)
            data_s = sum(seconds(a, b) for a, b in data_pairs)
            forward_s = sum(seconds(a, b) for a, b in forward_pairs)
            optimizer_s = seconds(optimizer_start, end) if optimizer_start is not None else 0.0
            self.iteration_s.append(total_s)
            self.parts["data_s"].append(data_s)
            self.parts["forward_s"].append(forward_s)
            self.parts["optimizer_s"].append(optimizer_s)
            self.parts["backward_s"].append(total_s - data_s - forward_s - optimizer_s)
        self.pending = []


def steps_per_epoch(step_reads) -> int | None:
    """The optimizer steps per epoch one step's reads give: each loader's batches per epoch over the batches
    the step read from it (gradient accumulation), the fewest over loaders read together (zip ends with the
    shortest); None where a loader has no length, or reads more batches than an epoch holds."""
    steps = [length // read if length >= read else 0 for length, read in step_reads]
    return min(steps) if steps and all(steps) else None


def loader_length(iterator) -> int | None:
    """Batches per epoch of a DataLoader's iterator; None where it has none (an IterableDataset without
    __len__) or where the script's sampler cannot say (its error is the script's, not raised here)."""
    try:
        length = len(iterator)
    except Exception:  # TypeError for no __len__; a user's sampler may raise anything
        return None
    return length if isinstance(length, int) and length > 0 else None


def install(clock: StepClock, replay: bool, replay_batches: int = REPLAY_BATCHES) -> Callable[[], None]:
    """Install the hooks; returns the function that removes them."""
    handles = [
        register_optimizer_step_pre_hook(lambda optimizer, args, kwargs: clock.step_started(optimizer)),
        register_optimizer_step_post_hook(lambda optimizer, args, kwargs: clock.boundary(optimizer)),
    ]
    remove_forward = time_forward(clock)
    remove_backward = count_backwards(clock)
    original_next = _BaseDataLoaderIter.__next__
    original_iter = DataLoader.__iter__
    original_fetch = _MapDatasetFetcher.fetch
    samples = SampleReplay(replay_batches)

    def timed_next(self):
        start = clock.stamp()
        clock.in_loader = True
        try:
            batch = original_next(self)
        finally:
            clock.in_loader = False
            clock.data_pairs.append((start, clock.stamp()))
            clock.read_workers = self._num_workers
        # This iterator's batches read in the step. Its token (its length, found once per iterator, an
        # epoch) is kept on it and held by the step's entry, so no other token takes its id in the step.
        token = self.__dict__.get(_TOKEN)
        if token is None:
            token = self.__dict__[_TOKEN] = (loader_length(self) or 0, object())
        reads = clock.step_reads.get(id(token))
        if reads is None:
            reads = clock.step_reads[id(token)] = [token, 0]
        reads[1] += 1
        clock.batch_read(batch)
        return batch

    def replay_iter(self):
        if isinstance(self.dataset, IterableDataset):
            return BatchReplay(self, original_iter, clock, replay_batches)
        clock.in_loader = True  # a transform that is a module, called by the read, is no forward pass
        try:
            warning = samples.prefill(self)  # read here, once: the workers this iteration starts replay them
        finally:
            clock.in_loader = False
        if warning:
            clock.warnings.append(warning)
        return original_iter(self)  # its fetches are replayed per sample (script_replay.py)

    def replay_fetch(self, possibly_batched_index):
        return samples.fetch(self, possibly_batched_index)

    _BaseDataLoaderIter.__next__ = timed_next
    if replay:
        DataLoader.__iter__ = replay_iter
        _MapDatasetFetcher.fetch = replay_fetch

    def remove() -> None:
        for handle in handles:
            handle.remove()
        remove_forward()
        remove_backward()
        _BaseDataLoaderIter.__next__ = original_next
        DataLoader.__iter__ = original_iter
        _MapDatasetFetcher.fetch = original_fetch

    return remove
