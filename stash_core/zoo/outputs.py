"""Model outputs from the ecosystem: a logits tensor, or a dict or dataclass (Hugging Face's ModelOutput is
both) with `logits` and perhaps `loss`. One reading of them for the zoo's checks and the timed loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch


def _field(output: object, name: str) -> object:
    if isinstance(output, Mapping):
        return output.get(name)
    return getattr(output, name, None)


def logits_of(output: object) -> torch.Tensor | None:
    """The logits of a model's output: the tensor itself, or its `logits` entry or attribute, or None."""
    if isinstance(output, torch.Tensor):
        return output
    logits = _field(output, "logits")
    return logits if isinstance(logits, torch.Tensor) else None


def loss_of(output: object) -> torch.Tensor | None:
    """The loss a model computed itself: its output's `loss` entry or attribute, or None."""
    if isinstance(output, torch.Tensor):
        return None
    loss = _field(output, "loss")
    return loss if isinstance(loss, torch.Tensor) else None


def has_loss(output: object) -> bool:
    return loss_of(output) is not None


def training_loss(output: object, targets: torch.Tensor, loss_fn: Callable) -> torch.Tensor:
    """The loss to back-propagate: the model's own `loss` when it computed one, else loss_fn on its logits."""
    if isinstance(output, torch.Tensor):
        return loss_fn(output, targets)
    loss = _field(output, "loss")
    if isinstance(loss, torch.Tensor):
        return loss
    logits = logits_of(output)
    if logits is None:
        raise TypeError(f"the model returned a {type(output).__name__} with neither logits nor loss")
    return loss_fn(logits, targets)


def config_vocab_size(model: torch.nn.Module, default: int | None) -> object:
    """The vocabulary size a model declares: `model.config.vocab_size` (Hugging Face), else
    `model.vocab_size`, else `default`."""
    config = getattr(model, "config", None)
    size = _field(config, "vocab_size") if config is not None else None
    return size if size is not None else getattr(model, "vocab_size", default)
