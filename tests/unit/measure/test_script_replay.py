"""What a synthetic run of a user's script replays (measure/script_replay.py): eight batches' worth of each
map-style dataset's samples, read once in the script's process before its loader's workers start."""

from __future__ import annotations

import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset

from stash_core.measure.script_replay import REPLAY_BATCHES, SampleReplay


def _cached(loader: DataLoader) -> int:
    replay = SampleReplay()
    replay.prefill(loader)
    entry = replay.cache.get(id(loader.dataset))
    return len(entry[1]) if entry else 0


def test_eight_batches_are_read_whether_the_batch_size_is_the_loaders_or_its_batch_samplers():
    data = TensorDataset(torch.arange(1000.0))
    assert _cached(DataLoader(data, batch_size=32)) == REPLAY_BATCHES * 32
    # a batch_sampler: the loader's batch_size is None (the replay was 8 samples, each batch of 32 a repeat)
    sampler = BatchSampler(SequentialSampler(data), batch_size=32, drop_last=False)
    assert _cached(DataLoader(data, batch_sampler=sampler)) == REPLAY_BATCHES * 32


def test_a_batch_sampler_without_a_batch_size_leaves_the_read_to_the_workers():
    data = TensorDataset(torch.arange(100.0))
    batches = [[0, 1, 2], [3, 4]]  # a list of index lists: no batch size to read eight batches of
    assert _cached(DataLoader(data, batch_sampler=batches)) == 0
