"""The synthetic batch of runs R0/R1, the loss and the optimizer: made once, reused every iteration."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from stash_core.errors import UsageError
from stash_core.habits import optimizer_name
from stash_core.zoo.info import ModelInfo
from stash_core.zoo.outputs import training_loss


def _generator(device: torch.device, seed: int) -> torch.Generator | None:
    try:
        generator = torch.Generator(device=device)
    except RuntimeError:  # a backend without its own generator: fall back to the global one, seeded
        torch.manual_seed(seed)
        return None
    generator.manual_seed(seed)
    return generator


def synthetic_batch(
    info: ModelInfo, batch_size: int, device: torch.device | str, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) created directly on device, so no host-to-device copy enters the timed loop.

    Images: float32 N(0, 1) of shape (batch, *input_shape); tokens: int64 ids in [0, vocab_size) of shape
    (batch, seq_len); targets: int64 classes in [0, num_classes) of shape (batch,). Same seed, same batch.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise UsageError(f"batch size must be a positive whole number; got {batch_size!r}")
    device = torch.device(device)
    shape = (batch_size, *info.input_shape)
    if (
        device.type == "meta"
    ):  # shapes only: random fills on meta import torch's compiler (seconds) for nothing
        if info.kind not in ("tokens", "image"):
            raise UsageError(f"unknown model kind {info.kind!r}; expected 'image' or 'tokens'")
        dtype = torch.int64 if info.kind == "tokens" else torch.float32
        return torch.empty(shape, dtype=dtype, device=device), torch.empty(
            batch_size, dtype=torch.int64, device=device
        )
    generator = _generator(device, seed)
    if info.kind == "tokens":
        inputs = torch.randint(0, info.vocab_size or 1, shape, generator=generator, device=device)
    elif info.kind == "image":
        inputs = torch.randn(shape, generator=generator, device=device)
    else:
        raise UsageError(f"unknown model kind {info.kind!r}; expected 'image' or 'tokens'")
    targets = torch.randint(0, info.num_classes, (batch_size,), generator=generator, device=device)
    return inputs, targets


def loss_fn(info: ModelInfo) -> Callable[[Any, torch.Tensor], torch.Tensor]:
    """Cross-entropy between logits (batch, num_classes) and class targets, for images and tokens alike; a
    model that returns its own loss (a causal language model's next-token loss) is trained on that."""
    if info.kind not in ("image", "tokens"):
        raise UsageError(f"unknown model kind {info.kind!r}; expected 'image' or 'tokens'")
    return functools.partial(training_loss, loss_fn=nn.CrossEntropyLoss())


def make_optimizer(model: nn.Module, kind: str) -> torch.optim.Optimizer:
    """The optimizer optimizer_name names, over the model's parameters (PyTorch's default implementation)."""
    if optimizer_name(kind) == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-4)
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
