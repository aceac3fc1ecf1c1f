"""Replay of a script's data in the synthetic runs (R0, R1, R1n), so that R3 - R1 differs in loading only.

A map-style dataset (the usual case) is replayed per sample: the samples of REPLAY_BATCHES batches are read
once, in the script's process as its loader starts its first epoch (before the first optimizer step, so in
the warm-up), and from then on handed out again in place of new reads. Each loader worker reads its own at
its first fetch instead where its workers are persistent (they start once: no more reads), or where the
dataset works only inside its workers (they start anew each epoch, and read them again: the profile warns).
Everything else of the script's loader still runs as in the real-data runs: its sampler, its collate_fn
(dict batches, padding), its worker processes and pinning. So the synthetic runs skip the dataset's own work
only (file reads, decoding, augmentation): the CPU stall is the loading cost, not loading plus collation. An
IterableDataset cannot be read at chosen indices: its loader hands out its first batches again, cycled for
as long as the loader's epoch (endless when it has no length).
"""

from __future__ import annotations

import itertools

import torch

from stash_core.measure.error_line import error_line

REPLAY_BATCHES = 8  # batches' worth of samples (or batches) read once per dataset for the synthetic runs


class SampleReplay:
    """The first samples of each map-style dataset, read once and handed out again: by the script's process
    before its loader's workers start (prefill), so that the workers, forked from it, replay them too; a
    worker that finds none fills its own: a loader of another start method, of persistent workers (they
    start once), or of a dataset that cannot be read outside its workers."""

    def __init__(self, batches: int = REPLAY_BATCHES) -> None:
        self.batches = batches
        self.cache: dict[int, tuple[object, list, list[int]]] = {}  # id -> (dataset kept alive, samples, at)
        # Datasets whose read raised in the script's process, left to their workers and not read there again
        # (id -> the dataset, kept alive so that no other dataset takes its id).
        self.worker_only: dict[int, object] = {}

    def fetch(self, fetcher, possibly_batched_index):
        """torch's _MapDatasetFetcher.fetch, with the dataset's samples replayed."""
        entry = self.cache.get(id(fetcher.dataset)) or self.fill(fetcher, possibly_batched_index)
        _, samples, at = entry
        if fetcher.auto_collation:
            count = len(possibly_batched_index)
            data = [samples[(at[0] + k) % len(samples)] for k in range(count)]
            at[0] += count
        else:
            data = samples[at[0] % len(samples)]
            at[0] += 1
        return fetcher.collate_fn(data)

    def prefill(self, loader) -> str | None:
        """Read `loader`'s dataset's first samples here, once, before its workers start. Without it each
        worker filled its own copy, and a loader whose workers are not persistent starts new ones every
        epoch: a synthetic run read real data every epoch, more samples than it trained on.

        A dataset that works only inside a loader worker (it opens its files in worker_init_fn) raises here:
        with workers, they fill their own as before, and the warning to report is returned (once per
        dataset); with none, this process is where the script reads anyway, so the error is the script's."""
        dataset = loader.dataset
        if id(dataset) in self.cache or id(dataset) in self.worker_only:
            return None
        if loader.num_workers > 0 and loader.persistent_workers:
            # its workers start once, so each fills its own copy once for the whole run: a copy read here
            # would save only those first reads
            return None
        try:
            size = len(dataset)
        except TypeError:
            return None  # a dataset of no length: its workers fill their own, from the indices they are given
        batch = loader.batch_size or getattr(loader.batch_sampler, "batch_size", None)
        if not isinstance(batch, int) or batch <= 0:
            return None  # a batch sampler of its own making: its workers fill their own, batch by batch
        count = min(size, batch * self.batches)
        if count <= 0:
            return None
        try:
            # not the sampler's order: drawing from it would move the script's RNG
            self.keep(dataset, list(range(count)), loader._auto_collation)
        except Exception as error:  # noqa: BLE001 - the user's dataset may raise anything
            if loader.num_workers == 0:
                raise
            self.worker_only[id(dataset)] = dataset
            return (
                f"the script's dataset ({type(dataset).__name__}) could not be read outside its loader's "
                f"workers, where Stash reads the samples the synthetic runs replay ({error_line(error)}): "
                f"its {loader.num_workers} workers read their own, {self.batches} batches' worth each every "
                "epoch, so the synthetic runs read some real data each epoch and the loading stalls may be "
                "understated"
            )
        return None

    def fill(self, fetcher, first_index) -> tuple[object, list, list[int]]:
        dataset = fetcher.dataset
        first = list(first_index) if fetcher.auto_collation else [first_index]
        try:
            size = len(dataset)
        except TypeError:
            size = 0
        # The first batch's indices, then the ones after them: REPLAY_BATCHES batches' worth in all.
        wanted = (
            first + [(first[-1] + k) % size for k in range(1, len(first) * (self.batches - 1) + 1)]
            if size
            else first
        )
        return self.keep(dataset, wanted, fetcher.auto_collation)

    def keep(self, dataset, wanted: list[int], batched: bool) -> tuple[object, list, list[int]]:
        """Read the samples at `wanted` (in one __getitems__ where a batched dataset has it) and keep them."""
        getitems = getattr(dataset, "__getitems__", None) if batched else None
        samples = list(getitems(wanted)) if getitems else [dataset[index] for index in wanted]
        entry = (dataset, samples, [0])
        self.cache[id(dataset)] = entry
        return entry


class BatchReplay:
    """One epoch of an IterableDataset's loader in replay: its first batches (read once per loader, kept),
    cycled for as many batches as the loader's epoch has (endless when it has no length)."""

    def __init__(self, loader, original_iter, clock, cached: int) -> None:
        clock.loader_used = True
        self.clock = clock
        if not hasattr(loader, "_stash_replay"):
            clock.in_loader = True
            try:
                source = original_iter(loader)
                loader._stash_replay = list(itertools.islice(source, cached))
                del source  # ends the loader's worker processes
            finally:
                clock.in_loader = False
        self.batches = loader._stash_replay
        self.workers = loader.num_workers  # the steps read this loader, though its workers no longer run
        try:
            self.remaining = len(loader)
        except TypeError:
            self.remaining = None
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        start = self.clock.stamp()
        try:
            if not self.batches or self.remaining == 0:
                raise StopIteration
            if self.remaining is not None:
                self.remaining -= 1
            batch = self.batches[self.index % len(self.batches)]
            self.index += 1
            self.clock.batch_read(batch)
            return batch
        finally:
            self.clock.data_pairs.append((start, self.clock.stamp()))
            self.clock.read_workers = self.workers

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
