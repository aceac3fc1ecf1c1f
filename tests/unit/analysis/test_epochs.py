import pytest

from stash_core.analysis.epochs import iterations_per_epoch
from stash_core.data.loader import iterations_per_epoch as loader_iterations_per_epoch
from stash_core.errors import UsageError


def test_an_epoch_is_the_full_batches_of_each_workers_shard():
    assert iterations_per_epoch(2000, 32, 2) == 31  # 1000 per worker / 32 = 31.25
    assert iterations_per_epoch(1281167, 64, 8) == 2502  # 160145 per worker / 64 = 2502.3
    assert iterations_per_epoch(10, 32, 2) == 1  # fewer images than a batch still makes one step


def test_an_epoch_that_keeps_every_sample_pads_the_shards_and_keeps_the_last_batch():
    """A rental's epoch: 2,000 images on 16 workers of 64 was one step (1,024 images) and read as the
    cheapest; PyTorch's defaults take two (each shard of 125 padded, its last batch partial)."""
    assert iterations_per_epoch(2000, 64, 16, drop_last=False) == 2
    assert iterations_per_epoch(2000, 64, 8, drop_last=False) == 4  # 250 per worker: 3 full + 1 partial
    assert iterations_per_epoch(2000, 32, 2, drop_last=False) == 32  # 31.25 batches
    assert iterations_per_epoch(2048, 64, 16, drop_last=False) == iterations_per_epoch(2048, 64, 16) == 2
    assert iterations_per_epoch(3, 64, 16, drop_last=False) == 1  # fewer samples than workers: one padded step


def test_the_loader_uses_the_same_definition():
    assert loader_iterations_per_epoch is iterations_per_epoch


@pytest.mark.parametrize("images, batch, workers", [(0, 32, 2), (100, 0, 2), (100, 32, 0), (100.0, 32, 2)])
def test_bad_sizes_are_refused(images, batch, workers):
    with pytest.raises(UsageError):
        iterations_per_epoch(images, batch, workers)


def test_a_figure_over_an_epoch_is_its_iterations_times_it():
    from stash_core.analysis.epochs import per_epoch

    assert per_epoch(0.25, 8) == 2.0 and per_epoch(None, 8) is None and per_epoch(0.25, None) is None


def test_every_epoch_figure_of_a_breakdown_has_its_interval():
    """The README promised each stall's interval per epoch too: the epoch figures had none."""
    from stash_core.analysis.stalls import PhaseTime, breakdown

    times = {"R0": PhaseTime(0.10, 0.004), "R1": PhaseTime(0.15, 0.006)}
    result = breakdown(times, ["R0", "R1"], 31)
    assert result["epoch_s"] == pytest.approx(0.15 * 31)
    assert result["epoch_ci95_s"] == pytest.approx(0.006 * 31)
    for name in ("compute", "interconnect"):
        stall = result["stalls"][name]
        assert stall["epoch_ci95_s"] == pytest.approx(stall["ci95_s"] * 31)
    assert result["stalls"]["disk"]["epoch_ci95_s"] is None  # not measured: no figure, no interval
    assert breakdown(times, ["R0", "R1"], None)["epoch_ci95_s"] is None
