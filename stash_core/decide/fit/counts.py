"""The counts that the stall models predict from: gradient bytes, gradient-tensor count and layer count."""

from __future__ import annotations

import functools

from stash_core.zoo_names import model_file_stamp


def model_counts(
    model: str, num_classes: int | None = None, input_shape: tuple[int, ...] | None = None
) -> dict:
    """Gradient bytes, gradient-tensor count and layer count of a zoo model or FILE.py:FACTORY."""
    shape = None if input_shape is None else tuple(input_shape)
    return dict(_counts(model, num_classes, shape, model_file_stamp(model)))  # an edited file: counted afresh


@functools.lru_cache(maxsize=64)
def _counts(
    model: str, num_classes: int | None, input_shape: tuple[int, ...] | None, _stamp: tuple | None
) -> dict:
    # Built on the meta device (no weights allocated); cached, as a page may ask again on every rerun.
    from stash_core.zoo import describe_model

    info = describe_model(model, num_classes=num_classes, input_shape=input_shape)
    return {
        "name": info.name,
        "param_count": info.param_count,
        "grad_bytes": info.grad_bytes,
        "grad_tensor_count": info.grad_tensor_count,
        "layer_count": info.layer_count,
    }
