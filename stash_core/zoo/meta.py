"""Models built on the meta device (describe_model) skip weight initialisation."""

from torch import nn


def is_meta(model: nn.Module) -> bool:
    """True when the model's weights live on the meta device: initialising them there changes nothing, yet
    costs seconds (the meta kernels of normal_ and friends import torch._dynamo on first use)."""
    first = next(model.parameters(), None)
    return first is not None and first.is_meta
