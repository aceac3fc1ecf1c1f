"""What one epoch is, in synchronous steps: the one definition the profiler, costs and plans share."""

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
