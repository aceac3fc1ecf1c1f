import pytest

from stash_core.analysis.epochs import iterations_per_epoch
from stash_core.data.loader import iterations_per_epoch as loader_iterations_per_epoch
from stash_core.errors import UsageError


def test_an_epoch_is_the_full_batches_of_each_workers_shard():
    assert iterations_per_epoch(2000, 32, 2) == 31  # 1000 per worker / 32 = 31.25
    assert iterations_per_epoch(1281167, 64, 8) == 2502  # 160145 per worker / 64 = 2502.3
    assert iterations_per_epoch(10, 32, 2) == 1  # fewer images than a batch still makes one step


def test_the_loader_uses_the_same_definition():
    assert loader_iterations_per_epoch is iterations_per_epoch


@pytest.mark.parametrize("images, batch, workers", [(0, 32, 2), (100, 0, 2), (100, 32, 0), (100.0, 32, 2)])
def test_bad_sizes_are_refused(images, batch, workers):
    with pytest.raises(UsageError):
        iterations_per_epoch(images, batch, workers)
