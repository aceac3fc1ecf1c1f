"""Replay of a script's data in the synthetic runs (R0, R1, R1n), so that R3 - R1 differs in loading only.

A map-style dataset (the usual case) is replayed per sample: the samples of REPLAY_BATCHES batches are read
once, in the script's process as its loader starts its first epoch (before the first optimizer step, so in
the warm-up), and from then on handed out again in place of new reads. Those are the first batches the
loader's batch sampler draws (from a copy of it, every random generator it may use put back as it was), and
they are handed out as those batches: a sampler that groups samples (by length, to pad less) keeps its
groups, where samples handed out by position padded each batch to nearly the longest. Each loader worker
reads its own at its first fetch instead where its workers are persistent (they start once: no more reads),
or where the dataset works only inside its workers (they start anew each epoch, and read them again: the
profile warns).
Everything else of the script's loader still runs as in the real-data runs: its sampler, its collate_fn
(dict batches, padding), its worker processes and pinning. So the synthetic runs skip the dataset's own work
only (file reads, decoding, augmentation): the CPU stall is the loading cost, not loading plus collation. An
IterableDataset cannot be read at chosen indices: its loader hands out its first batches again, cycled for
as long as the loader's epoch (endless when it has no length).
"""

from __future__ import annotations

import copy
import itertools
import operator
import random
import sys

import torch

from stash_core.measure.error_line import error_line

REPLAY_BATCHES = 8  # batches' worth of samples (or batches) read once per dataset for the synthetic runs


class SampleReplay:
    """The first samples of each map-style dataset, read once and handed out again: by the script's process
    before its loader's workers start (prefill), so that the workers, forked from it, replay them too; a
    worker that finds none fills its own: a loader of another start method, of persistent workers (they
    start once), or of a dataset that cannot be read outside its workers."""

    def __init__(self, batches: int = REPLAY_BATCHES) -> None:
        self.count = batches
        self.cache: dict[int, tuple[object, list, list[int]]] = {}  # id -> (dataset kept alive, samples, at)
        # id -> the sampler's first batches, as positions in the dataset's cached samples
        self.batches: dict[int, list[list[int]]] = {}
        # Datasets whose read raised in the script's process, left to their workers and not read there again
        # (id -> the dataset, kept alive so that no other dataset takes its id).
        self.worker_only: dict[int, object] = {}

    def fetch(self, fetcher, possibly_batched_index):
        """torch's _MapDatasetFetcher.fetch, with the dataset's samples replayed."""
        entry = self.cache.get(id(fetcher.dataset)) or self.fill(fetcher, possibly_batched_index)
        _, samples, at = entry
        batches = self.batches.get(id(fetcher.dataset))
        if fetcher.auto_collation and batches:  # the sampler's own batches, as many samples as asked
            count = len(possibly_batched_index)
            # a loader's workers take its batches in turn: worker k's n-th is batch k + n x workers
            worker = torch.utils.data.get_worker_info()
            drawn = at[0] if worker is None else worker.id + at[0] * worker.num_workers
            batch = batches[drawn % len(batches)]
            data = [samples[batch[k % len(batch)]] for k in range(count)]
            at[0] += 1
        elif fetcher.auto_collation:
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
        drawn = first_batches(loader, self.count) if loader._auto_collation else None
        if drawn is None:  # the samples by position: as many as the batches would hold
            batch = loader.batch_size or getattr(loader.batch_sampler, "batch_size", None)
            if not isinstance(batch, int) or batch <= 0:
                return None  # no batch size to read for: its workers fill their own, batch by batch
            count = min(size, batch * self.count)
            if count <= 0:
                return None
        try:
            if drawn is None:
                self.keep(dataset, list(range(count)), loader._auto_collation)
            else:
                self.keep_batches(dataset, drawn)
        except Exception as error:  # noqa: BLE001 - the user's dataset may raise anything
            if loader.num_workers == 0:
                raise
            self.worker_only[id(dataset)] = dataset
            return (
                f"the script's dataset ({type(dataset).__name__}) could not be read outside its loader's "
                f"workers, where Stash reads the samples the synthetic runs replay ({error_line(error)}): "
                f"its {loader.num_workers} workers read their own, {self.count} batches' worth each every "
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
            first + [(first[-1] + k) % size for k in range(1, len(first) * (self.count - 1) + 1)]
            if size
            else first
        )
        return self.keep(dataset, wanted, fetcher.auto_collation)

    def keep_batches(self, dataset, drawn: list[list[int]]) -> None:
        """Read the samples of the sampler's `drawn` batches (each index once) and keep the batches."""
        wanted = list(dict.fromkeys(index for batch in drawn for index in batch))
        self.keep(dataset, wanted, True)
        position = {index: at for at, index in enumerate(wanted)}
        self.batches[id(dataset)] = [[position[index] for index in batch] for batch in drawn if batch]

    def keep(self, dataset, wanted: list[int], batched: bool) -> tuple[object, list, list[int]]:
        """Read the samples at `wanted` (in one __getitems__ where a batched dataset has it) and keep them."""
        getitems = getattr(dataset, "__getitems__", None) if batched else None
        samples = list(getitems(wanted)) if getitems else [dataset[index] for index in wanted]
        entry = (dataset, samples, [0])
        self.cache[id(dataset)] = entry
        return entry


def first_batches(loader, count: int) -> list[list[int]] | None:
    """The first `count` index batches `loader`'s batch sampler draws, from a copy of it, with the random
    generators it may draw from (torch's, Python's, NumPy's, the sampler's and the loader's own) put back as
    they were: the script's run goes on as if they were never drawn. None when the sampler cannot be copied
    or drawn from (its batches are then not known; the samples are replayed by position)."""
    try:
        sampler = copy.copy(loader.batch_sampler)
        if hasattr(sampler, "sampler"):  # torch's BatchSampler: its sampler's own state stays the script's
            sampler.sampler = copy.copy(sampler.sampler)
    except Exception:  # noqa: BLE001 - the user's sampler may refuse copying
        return None
    owners = (loader, loader.batch_sampler, getattr(loader.batch_sampler, "sampler", None))
    found = (getattr(owner, "generator", None) for owner in owners)
    generators = [generator for generator in found if isinstance(generator, torch.Generator)]
    numpy = sys.modules.get("numpy")
    saved = (torch.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy else None,
             [g.get_state() for g in generators])  # fmt: skip
    try:
        # As the loader's iterator does: the sampler's iter() (a sampler that shuffles in it draws now), then
        # its workers' base seed (from the loader's generator, else torch's), then the batches (a generator
        # sampler, as a shuffling RandomSampler, draws its seed at its first): the copy shuffles as the
        # script's loader will.
        batches = iter(sampler)
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
        drawn = [[operator.index(i) for i in batch] for batch in itertools.islice(batches, count)]
    except Exception:  # noqa: BLE001 - the user's sampler may raise anything (or draw no whole numbers)
        return None
    finally:
        torch.set_rng_state(saved[0])
        random.setstate(saved[1])
        if numpy:
            numpy.random.set_state(saved[2])
        for generator, state in zip(generators, saved[3], strict=True):
            generator.set_state(state)
    return drawn or None


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
