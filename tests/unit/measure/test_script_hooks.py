"""The instrumentation of a user's script, in this process: iteration boundaries at optimizer steps, data
wait inside DataLoader iterators, replay of the first batches, and the hooks removed afterwards."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info
from torch.utils.data.dataloader import _BaseDataLoaderIter

from stash_core.measure.script_hooks import StepClock, install, leading_dim


class Slow(Dataset):
    """Dict samples that each take `cost_s` of busy CPU."""

    def __init__(self, count: int, cost_s: float) -> None:
        self.count, self.cost_s = count, cost_s

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict:
        end = time.perf_counter() + self.cost_s
        while time.perf_counter() < end:
            pass
        return {"x": torch.full((4,), float(index)), "y": torch.tensor(index % 2)}


class Counting(Slow):
    """Slow, keeping the indices it read."""

    def __init__(self, count: int, cost_s: float) -> None:
        super().__init__(count, cost_s)
        self.reads: list[int] = []

    def __getitem__(self, index: int) -> dict:
        self.reads.append(index)
        return super().__getitem__(index)


def train(loader, epochs: int, accumulate: int = 1, step_s: float = 0.0) -> list[dict]:
    """A plain loop; step_s of sleep in each step stands for its compute."""
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    seen = []
    for _ in range(epochs):
        for step, batch in enumerate(loader):
            seen.append(batch)
            time.sleep(step_s)
            loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"]) / accumulate
            loss.backward()
            if (step + 1) % accumulate == 0:
                optimizer.step()
                optimizer.zero_grad()
    return seen


def test_an_iteration_is_an_optimizer_step_and_gradient_accumulation_counts_once() -> None:
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        train(DataLoader(Slow(48, 0.0), batch_size=4), epochs=1, accumulate=3)  # 12 batches, 4 steps
    finally:
        remove()
        clock.settle()
    assert len(clock.iteration_s) == 4 - 1  # the first step starts the clock
    # An iteration's batch is what it read between its optimizer steps: 3 batches of 4 (it was one, 4).
    assert clock.loader_used and clock.batch_size == 3 * 4


def test_the_batch_is_the_most_common_read_per_iteration_not_a_short_last_one_or_a_check_before() -> None:
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        for _ in DataLoader(Slow(6, 0.0), batch_size=6):  # a check before training: no step
            pass
        # 10 batches of 4 and one of 2 an epoch, a step every 2: the short batch joins the next epoch's first
        train(DataLoader(Slow(42, 0.0), batch_size=4), epochs=2, accumulate=2)
    finally:
        remove()
    assert clock.batch_size == 8 and dict(clock.samples_per_iteration) == {8: 4 + 4, 2 + 4 + 4: 1}


def test_the_data_wait_is_the_time_inside_the_loader() -> None:
    cost_s = 0.002
    clock = StepClock()
    remove = install(clock, replay=False)
    step_s = 0.02
    try:
        train(DataLoader(Slow(40, cost_s), batch_size=5), epochs=1, step_s=step_s)
    finally:
        remove()
        clock.settle()
    per_batch_s = 5 * cost_s
    assert len(clock.data_s) == 7
    # The wait holds the loading (at least its busy time) and none of the step's own time, however loaded
    # the machine: every iteration is its wait plus at least step_s.
    assert all(wait >= per_batch_s for wait in clock.data_s), clock.data_s
    pairs = zip(clock.data_s, clock.iteration_s, strict=True)
    assert all(wait <= total - step_s for wait, total in pairs), (clock.data_s, clock.iteration_s)


def test_replay_hands_out_the_first_batches_for_as_long_as_an_epoch_without_loading_cost() -> None:
    clock = StepClock()
    remove = install(clock, replay=True, replay_batches=3)
    try:
        loader = DataLoader(Counting(40, 0.003), batch_size=4)  # 10 batches per epoch
        seen = train(loader, epochs=2)
    finally:
        remove()
        clock.settle()
    assert len(seen) == 20  # the epochs keep their length
    firsts = [int(batch["x"][0, 0]) for batch in seen]
    assert set(firsts) == {0, 4, 8}  # only the first three batches, cycled
    assert len(loader.dataset.reads) == 12  # no sample is loaded again: three batches' worth, read once


def test_replay_skips_the_loading_only_and_keeps_the_collation() -> None:
    """R3 - R1 must differ in loading only: the synthetic runs still collate every batch (a cost of the
    step that is not loading), while the dataset reads only the samples it replays."""
    collated = []

    def collate(rows: list[dict]) -> dict:
        collated.append(len(rows))
        return {key: torch.stack([row[key] for row in rows]) for key in rows[0]}

    clock = StepClock()
    remove = install(clock, replay=True, replay_batches=2)
    try:
        dataset = Counting(40, 0.0)
        seen = train(DataLoader(dataset, batch_size=4, shuffle=True, collate_fn=collate), epochs=3)
    finally:
        remove()
    assert len(seen) == 30 and collated == [4] * 30  # every batch collated, as in a real-data run
    assert len(dataset.reads) == 8  # two batches' worth of samples, read once
    assert clock.batch_size == 4


class EagerShuffle:
    """A batch sampler that shuffles as its iter() is called (a generator would at its first batch)."""

    def __len__(self) -> int:
        return 8

    def __iter__(self):
        order = torch.randperm(64).tolist()
        return iter([order[at : at + 8] for at in range(0, 64, 8)])


@pytest.mark.parametrize(("workers", "eager"), [(0, False), (2, False), (0, True)])
def test_replay_of_a_shuffled_loader_hands_out_the_batches_the_script_draws_first(workers, eager) -> None:
    """The copy of a shuffling sampler drew its permutation from the seed the loader's iterator draws first
    (its workers' base seed): the synthetic runs replayed other samples than the script's first batches."""

    def first_two(replay: bool) -> tuple[list[list[int]], list[float]]:
        torch.manual_seed(7)
        clock = StepClock()
        remove = install(clock, replay=replay, replay_batches=2)
        order = {"batch_sampler": EagerShuffle()} if eager else {"batch_size": 8, "shuffle": True}
        try:
            seen = train(DataLoader(Counting(64, 0.0), num_workers=workers, **order), 1)
        finally:
            remove()
        return [batch["x"][:, 0].int().tolist() for batch in seen[:2]], torch.rand(2).tolist()

    plain, after_plain = first_two(replay=False)
    replayed, after_replay = first_two(replay=True)
    assert replayed == plain and after_replay == after_plain  # the same batches, the generator as it was


class WorkerOnly(Slow):
    """Slow, but only inside a loader worker (as a dataset that opens its file in worker_init_fn)."""

    def __getitem__(self, index: int) -> dict:
        if get_worker_info() is None:
            raise AssertionError("dataset used outside a DataLoader worker")
        return super().__getitem__(index)


def test_a_dataset_that_works_only_in_its_workers_is_replayed_by_them_with_a_warning() -> None:
    clock = StepClock()
    remove = install(clock, replay=True, replay_batches=2)
    try:
        seen = train(DataLoader(WorkerOnly(40, 0.0), batch_size=4, num_workers=2), epochs=2)
    finally:
        remove()
    assert len(seen) == 20
    # each worker replays the two batches' worth it read from its first batch on (batch 0, and batch 1)
    assert {int(batch["x"][0, 0]) for batch in seen} == {0, 4, 8}
    assert len(clock.warnings) == 1  # the read is not tried again at the second epoch
    assert "(AssertionError: dataset used outside a DataLoader worker)" in clock.warnings[0]


def test_without_workers_a_dataset_that_needs_them_fails_as_the_script_does() -> None:
    clock = StepClock()
    remove = install(clock, replay=True)
    try:
        with pytest.raises(AssertionError, match="outside a DataLoader worker"):
            train(DataLoader(WorkerOnly(40, 0.0), batch_size=4, num_workers=0), epochs=1)
    finally:
        remove()
    assert clock.warnings == []


def test_the_hooks_are_removed() -> None:
    from torch.utils.data._utils.fetch import _MapDatasetFetcher

    before_next = _BaseDataLoaderIter.__next__
    before_iter = DataLoader.__iter__
    before_fetch = _MapDatasetFetcher.fetch
    clock = StepClock()
    install(clock, replay=True)()
    assert (_BaseDataLoaderIter.__next__, DataLoader.__iter__) == (before_next, before_iter)
    assert _MapDatasetFetcher.fetch is before_fetch
    train(DataLoader(Slow(8, 0.0), batch_size=4), epochs=1)
    assert clock.iteration_s == [] and clock.first_step_at is None


def test_a_second_optimizer_of_the_same_iteration_is_not_a_boundary() -> None:
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        first, second = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
        for _ in range(5):
            (a(torch.ones(1, 2)).sum() + b(torch.ones(1, 2)).sum()).backward()
            first.step()
            second.step()
    finally:
        remove()
        clock.settle()
    assert len(clock.iteration_s) == 4


def stages(keep_old: bool, stages: int = 3, steps: int = 5) -> StepClock:
    """A new optimizer per stage (a learning-rate schedule by hand), the old ones kept or let go."""
    clock = StepClock()
    remove = install(clock, replay=False)
    kept = []
    try:
        model = torch.nn.Linear(2, 2)
        for stage in range(stages):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1 / (stage + 1))
            if keep_old:
                kept.append(optimizer)
            for _ in range(steps):
                model(torch.ones(1, 2)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    finally:
        remove()
        clock.settle()
    return clock


def test_a_new_optimizer_that_replaces_the_timed_one_is_timed_on() -> None:
    clock = stages(keep_old=False)
    assert len(clock.iteration_s) == 3 * 5 - 1 and clock.other_steps_after == 0  # it timed 4 before


def test_steps_of_another_optimizer_after_the_timed_one_stopped_are_counted() -> None:
    clock = stages(keep_old=True)  # the first one is still held: it may yet step (a GAN's would)
    assert len(clock.iteration_s) == 5 - 1 and clock.other_steps_after == 2 * 5


class Holder:
    def __init__(self) -> None:
        self.ids = torch.zeros(6, 3)


def test_the_batch_size_is_the_first_dimension_of_the_first_tensor() -> None:
    assert leading_dim({"mask": [torch.ones(7, 2)], "x": torch.ones(3)}) == 7
    assert leading_dim((torch.tensor(1.0), torch.ones(5, 1))) == 5
    assert leading_dim(Holder()) == 6
    assert leading_dim(["text"]) is None


def test_the_stopping_rules_own_check_is_not_an_iteration_of_the_script() -> None:
    check_s, step_s = 0.2, 0.005
    clock = StepClock()
    checks = []

    def check() -> bool:  # every third boundary a check that takes check_s (a sync, an all-reduce)
        if clock.iterations == 0 or clock.iterations % 3:
            return False
        checks.append(clock.iterations)
        time.sleep(check_s)
        return True

    clock.on_boundary = check
    remove = install(clock, replay=False)
    try:
        train(DataLoader(Slow(40, 0.0), batch_size=4), epochs=1, step_s=step_s)  # 10 steps, 9 iterations
    finally:
        remove()
        clock.settle()
    assert len(checks) == 3 and len(clock.iteration_s) == 9
    # However loaded the machine, an iteration that held a 0.2 s check would be at least that long.
    assert max(clock.iteration_s) < check_s, clock.iteration_s


def test_an_epoch_is_the_loaders_batches_over_the_batches_a_step_reads() -> None:
    """A script's epoch in optimizer steps: 12 batches an epoch, a step every 3 batches: 4 steps an epoch."""
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        for _ in DataLoader(Slow(6, 0.0), batch_size=2):  # a check before training: no step, not the epoch
            pass
        train(DataLoader(Slow(48, 0.0), batch_size=4), epochs=2, accumulate=3)
    finally:
        remove()
        clock.settle()
    assert clock.iterations_per_epoch == 4
    plain = StepClock()
    remove = install(plain, replay=False)
    try:
        train(DataLoader(Slow(42, 0.0), batch_size=4), epochs=1)  # 10 batches and a short one: 11 steps
    finally:
        remove()
    assert plain.iterations_per_epoch == 11


def test_a_loader_without_a_length_has_no_epoch() -> None:
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            for index in range(40):
                yield {"x": torch.full((4,), float(index)), "y": torch.tensor(index % 2)}

    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        train(DataLoader(Stream(), batch_size=4), epochs=1)
    finally:
        remove()
    assert clock.loader_used and clock.iterations_per_epoch is None


def test_an_epoch_is_the_training_loaders_beside_a_validation_loader_and_two_zipped() -> None:
    """A freed validation iterator's id, taken by the next training one, kept the validation loader's length
    (3 steps an epoch for 10); two loaders read together counted both loaders' batches a step (5 for 10)."""
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    train_loader = DataLoader(Slow(40, 0.0), batch_size=4)
    val_loader = DataLoader(Slow(12, 0.0), batch_size=4)

    def step(batch) -> None:
        torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"]).backward()
        optimizer.step()
        optimizer.zero_grad()

    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        for _ in range(3):
            for _ in val_loader:  # each epoch's validation first, its iterator freed before training
                pass
            for batch in train_loader:
                step(batch)
    finally:
        remove()
    assert clock.iterations_per_epoch == 10
    zipped = StepClock()
    remove = install(zipped, replay=False)
    try:
        for _ in range(2):
            for batch, _other in zip(train_loader, DataLoader(Slow(40, 0.0), batch_size=4), strict=True):
                step(batch)
    finally:
        remove()
    assert zipped.iterations_per_epoch == 10


def test_two_loaders_of_different_lengths_read_together_end_with_the_shorter() -> None:
    """zip(10 batches, 20 batches) ends after 10 steps; with a step every 2 batches, after 5."""
    from stash_core.measure.script_hooks import steps_per_epoch

    assert steps_per_epoch([(10, 1), (20, 1)]) == 10 and steps_per_epoch([(10, 2), (20, 2)]) == 5
    assert steps_per_epoch([(10, 1), (0, 1)]) is None  # a loader of no length: not known
    assert steps_per_epoch([(3, 4)]) is None and steps_per_epoch([]) is None
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        for _ in range(2):
            labelled = DataLoader(Slow(40, 0.0), batch_size=4)
            for batch, _other in zip(labelled, DataLoader(Slow(80, 0.0), batch_size=4), strict=False):
                torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"]).backward()
                optimizer.step()
                optimizer.zero_grad()
    finally:
        remove()
    assert clock.iterations_per_epoch == 10
