"""The per-rank DataLoader of the real-data runs (R2, R3): a shard per rank, loader worker processes."""

from __future__ import annotations

import os
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

from stash_core.analysis.epochs import iterations_per_epoch  # noqa: F401  (re-exported for the loader's users)
from stash_core.errors import UsageError

# The cores a pinned trainer could use before it was pinned (measure/worker.py): its loader processes get
# them back.
LOADER_CORES_ENV = "STASH_LOADER_CORES"


def _seed_worker(worker_id: int) -> None:
    cores = os.environ.get(LOADER_CORES_ENV)
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(core) for core in cores.split(",")})
    # DataLoader already seeds torch (and `random`) per worker from its base seed; numpy it does not.
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def _accelerator_available() -> bool:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return torch.cuda.is_available()


def make_loader(
    dataset: Dataset,
    batch_size: int,
    loader_workers: int,
    rank: int,
    world_size: int,
    pin_memory: bool,
    seed: int = 0,
    drop_last: bool = True,
) -> DataLoader:
    """A shuffled DataLoader over this rank's shard. With world_size > 1 the sampler is a
    DistributedSampler: call `loader.sampler.set_epoch(epoch)` each epoch for a fresh order."""
    if batch_size < 1:
        raise UsageError(f"batch size must be >= 1 (got {batch_size})")
    if loader_workers < 0:
        raise UsageError(f"loader workers must be >= 0 (got {loader_workers})")
    if world_size < 1 or not 0 <= rank < world_size:
        raise UsageError(f"rank {rank} is not within world size {world_size}")
    dataset_size = len(dataset)  # type: ignore[arg-type]
    if drop_last and dataset_size // world_size < batch_size:
        raise UsageError(
            f"data set of {dataset_size} samples is too small for {world_size} ranks x batch {batch_size}"
        )
    if world_size > 1:
        # drop_last on the sampler too: no rank gets padded (repeated) samples.
        sampler: torch.utils.data.Sampler = DistributedSampler(
            dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=drop_last
        )
    else:
        sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    # Distinct, reproducible per-worker augmentation seeds on every rank.
    base_seed_generator = torch.Generator().manual_seed(seed * 100_003 + rank)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=loader_workers,
        pin_memory=pin_memory and _accelerator_available(),  # pinning without a device only warns
        drop_last=drop_last,
        persistent_workers=loader_workers > 0,
        worker_init_fn=_seed_worker if loader_workers > 0 else None,
        generator=base_seed_generator,
    )
