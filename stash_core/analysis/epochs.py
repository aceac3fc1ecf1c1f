"""What one epoch is, in synchronous steps: the one definition the profiler, costs and plans share; and a
per-iteration figure (a time or its interval) over an epoch."""

from __future__ import annotations

from stash_core.errors import UsageError


def iterations_per_epoch(dataset_images: int, batch_size: int, workers_total: int) -> int:
    """Full batches each worker gets per epoch: its shard is dataset_images // workers_total and the last
    partial batch is dropped (drop_last), as in the profiled loop; at least 1."""
    for value, what in (
        (dataset_images, "dataset images"),
        (batch_size, "batch size"),
        (workers_total, "workers"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"{what} must be a positive whole number, got {value!r}")
    return max(1, (dataset_images // workers_total) // batch_size)


def per_epoch(seconds: float | None, iterations: int | None) -> float | None:
    """A per-iteration figure over an epoch of `iterations`: `iterations` times it; None without either.

    An epoch's time is estimated as its iterations times their mean time, so the same factor scales the
    mean's 95% half-width: the interval of that estimate (of the mean epoch, as the iterations measured
    give it; single epochs vary more)."""
    if seconds is None or not iterations:
        return None
    return seconds * iterations
