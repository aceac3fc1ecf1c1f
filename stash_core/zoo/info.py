"""ModelInfo: what the rest of Stash needs to know about a built model, and how it is counted."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from torch import nn


@dataclass(frozen=True)
class ModelInfo:
    """Facts about one built model.

    kind: "image" (input_shape is (C, H, W)) or "tokens" (input_shape is (seq_len,), ids below vocab_size).
    param_count: all parameters (trainable or not); grad_tensor_count: parameter tensors with requires_grad,
    i.e. the tensors DDP all-reduces; grad_bytes: sum of numel * element_size over those tensors.
    layer_count: modules that directly own at least one parameter (conv, linear, norm, embedding,
    multi-head attention's packed projection...); containers, activations and pools are not counted.
    """

    name: str
    kind: str
    input_shape: tuple[int, ...]
    num_classes: int
    vocab_size: int | None
    param_count: int
    grad_tensor_count: int
    layer_count: int
    grad_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (input_shape as a list)."""
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelInfo:
        """Inverse of to_dict (extra keys are ignored, so older/newer result files still load)."""
        fields = cls.__dataclass_fields__
        values = {key: value for key, value in data.items() if key in fields}
        values["input_shape"] = tuple(int(size) for size in values["input_shape"])
        return cls(**values)


def describe(
    model: nn.Module,
    name: str,
    kind: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    vocab_size: int | None,
) -> ModelInfo:
    """Count a model's parameters, gradient tensors, layers and gradient bytes."""
    params = list(model.parameters())
    trainable = [param for param in params if param.requires_grad]
    layer_count = sum(
        1 for module in model.modules() if next(module.parameters(recurse=False), None) is not None
    )
    return ModelInfo(
        name=name,
        kind=kind,
        input_shape=tuple(input_shape),
        num_classes=num_classes,
        vocab_size=vocab_size,
        param_count=sum(param.numel() for param in params),
        grad_tensor_count=len(trainable),
        layer_count=layer_count,
        grad_bytes=sum(param.numel() * param.element_size() for param in trainable),
    )
