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


def test_a_batch_sampler_without_a_batch_size_is_replayed_as_its_batches():
    data = TensorDataset(torch.arange(100.0))
    batches = [[0, 1, 2], [3, 4]]  # a list of index lists: no batch size, its batches drawn as they are
    replay = SampleReplay()
    replay.prefill(DataLoader(data, batch_sampler=batches))
    assert len(replay.cache[id(data)][1]) == 5 and replay.batches[id(data)] == [[0, 1, 2], [3, 4]]


class ByLength(Dataset):
    """Token sequences of lengths 5 to 100, as a text data set holds them."""

    def __len__(self) -> int:
        return 400

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.ones(5 + (index * 37) % 96)


class LengthGroups:
    """A batch sampler that groups samples of similar length (to pad less), the groups in random order."""

    def __init__(self, dataset: ByLength, batch_size: int) -> None:
        order = sorted(range(len(dataset)), key=lambda i: len(dataset[i]))
        self.groups = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]

    def __iter__(self):
        for g in torch.randperm(len(self.groups)).tolist():
            yield self.groups[g]

    def __len__(self) -> int:
        return len(self.groups)


def _padded(batch: list[torch.Tensor]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)


def test_a_sampler_that_groups_by_length_keeps_its_groups_and_the_scripts_random_state():
    """Handed out by position, each replayed batch mixed lengths and padded to nearly the longest (57 tokens
    against the script's 38); and drawing the sampler's batches must not move the script's generators."""
    dataset = ByLength()
    loader = DataLoader(dataset, batch_sampler=LengthGroups(dataset, 16), collate_fn=_padded)
    torch.manual_seed(5)
    replay = SampleReplay()
    replay.prefill(loader)
    after_prefill = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(torch.rand(3), after_prefill)  # the script's generator as if nothing was drawn

    class Fetcher:  # torch's _MapDatasetFetcher as SampleReplay.fetch reads it
        auto_collation, collate_fn = True, staticmethod(_padded)

    Fetcher.dataset = dataset
    widths = [replay.fetch(Fetcher, list(range(16))).shape[1] for _ in range(REPLAY_BATCHES)]
    real = [_padded([dataset[i] for i in group]).shape[1] for group in LengthGroups(dataset, 16).groups]
    # each replayed batch is one of the sampler's groups: padded as little as the script's own batches
    assert set(widths) <= set(real) and sum(widths) / len(widths) < 0.8 * 100


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
