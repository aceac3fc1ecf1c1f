"""What a synthetic run of a user's script replays (measure/script_replay.py): eight batches' worth of each
map-style dataset's samples, read once in the script's process before its loader's workers start, or by the
workers themselves where they are persistent or the dataset works only inside them."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    SequentialSampler,
    TensorDataset,
    get_worker_info,
)

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


class WorkerOnly(Dataset):
    """A dataset that works only inside a loader worker (as one that opens its file in worker_init_fn)."""

    def __init__(self, count: int) -> None:
        self.count, self.reads = count, 0

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> torch.Tensor:
        self.reads += 1
        if get_worker_info() is None:  # a script's assert, as Python raises it (no pytest rewrite here)
            raise AssertionError("dataset used outside a DataLoader worker")
        return torch.tensor([float(index)])


def test_a_dataset_that_works_only_in_its_workers_is_left_to_them_once_with_a_warning():
    dataset = WorkerOnly(100)
    loader = DataLoader(dataset, batch_size=4, num_workers=2)
    replay = SampleReplay()
    warning = replay.prefill(loader)
    assert warning is not None and "\n" not in warning
    assert "(WorkerOnly) could not be read outside its loader's workers, where Stash reads" in warning
    assert "(AssertionError: dataset used outside a DataLoader worker)" in warning
    assert "its 2 workers read their own, 8 batches' worth each every epoch" in warning
    assert id(dataset) not in replay.cache
    assert replay.prefill(loader) is None and dataset.reads == 1  # not tried again at the next epoch


def test_without_workers_the_datasets_error_is_the_scripts():
    with pytest.raises(AssertionError, match="outside a DataLoader worker"):
        SampleReplay().prefill(DataLoader(WorkerOnly(100), batch_size=4, num_workers=0))


def test_loaders_with_workers_are_prefilled_unless_their_workers_are_persistent():
    data = TensorDataset(torch.arange(1000.0))
    assert _cached(DataLoader(data, batch_size=32, num_workers=2)) == REPLAY_BATCHES * 32
    # persistent workers start once: each fills its own once, so nothing is read here
    assert _cached(DataLoader(data, batch_size=32, num_workers=2, persistent_workers=True)) == 0
