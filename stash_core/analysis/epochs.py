"""What one epoch is, in synchronous steps: the one definition the profiler, costs and plans share; and a
per-iteration figure (a time or its interval) over an epoch."""

from __future__ import annotations

from stash_core.errors import UsageError


def iterations_per_epoch(
    dataset_images: int, batch_size: int, workers_total: int, drop_last: bool = True
) -> int:
    """Steps each worker takes per epoch, at least 1. `drop_last`: full batches of a shard of dataset_images
    // workers_total, the last partial batch dropped, as in the profiled loop. Else PyTorch's defaults (a
    DistributedSampler pads the shards to ceil(dataset_images / workers_total), the loader keeps the last
    partial batch): every sample seen each epoch, as a training a user rents for runs, so configurations of
    more workers are not credited with the part of the data set their larger steps leave out."""
    for value, what in (
        (dataset_images, "dataset images"),
        (batch_size, "batch size"),
        (workers_total, "workers"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"{what} must be a positive whole number, got {value!r}")
    if drop_last:
        return max(1, (dataset_images // workers_total) // batch_size)
    shard = -(-dataset_images // workers_total)
    return -(-shard // batch_size)


def per_epoch(seconds: float | None, iterations: int | None) -> float | None:
    """A per-iteration figure over an epoch of `iterations`: `iterations` times it; None without either.

    An epoch's time is estimated as its iterations times their mean time, so the same factor scales the
    mean's 95% half-width: the interval of that estimate (of the mean epoch, as the iterations measured
    give it; single epochs vary more)."""
    if seconds is None or not iterations:
        return None
    return seconds * iterations
