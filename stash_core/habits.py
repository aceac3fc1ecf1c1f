"""The training habits of a job that the step model tells apart: memory format, optimizer and its
implementation, attention. Each changes the predicted step as it changes the published figures' (features.py).

The default is how `stash profile` trains the zoo's models: NCHW tensors, SGD with momentum for image models
and AdamW for token models in PyTorch's multi-tensor (foreach) implementation, fused attention
(scaled_dot_product_attention).
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.errors import UsageError

MEMORY_FORMATS = ("nchw", "channels_last")
OPTIMIZERS = ("sgd", "adamw", "rmsprop")
OPTIMIZER_IMPLS = ("foreach", "fused", "loop")
ATTENTIONS = ("fused", "eager")
# PyTorch's optimizers that take fused=True (torch.optim: SGD, Adam, AdamW, Adagrad; RMSprop has none).
FUSED_OPTIMIZERS = ("sgd", "adamw")


def layout_kind(kind: str, input_shape: tuple[int, ...] | list[int] | None) -> str:
    """The kind the habits are checked and restated for: "vectors" for a model of float inputs that are not
    images (C, H, W), an RNN's (L, F) or a 3-D convolution's (C, D, H, W) among them, which has no memory
    format to choose (channels_last is a layout of 4-D batches);
    otherwise `kind` ("image" or "tokens"; an image model's default shape when none is given)."""
    return "vectors" if kind == "image" and input_shape and len(input_shape) != 3 else kind


def optimizer_name(kind: str) -> str:
    """What a job of a model of this kind trains with, as profiled and as predicted: AdamW for token models
    (transformers), SGD with momentum for image models."""
    return "adamw" if kind == "tokens" else "sgd"


@dataclass(frozen=True)
class TrainingJob:
    memory_format: str = "nchw"
    optimizer: str | None = None  # None: the model's default (SGD for images, AdamW for tokens)
    optimizer_impl: str = "foreach"
    attention: str = "fused"

    def is_default(self, default_optimizer: str) -> bool:
        """Whether this is how `stash profile` trains the model (its profiles then measure this job)."""
        return (self.memory_format, self.optimizer_impl, self.attention) == ("nchw", "foreach", "fused") and (
            self.optimizer in (None, default_optimizer)
        )

    def check(self, kind: str, default_optimizer: str, attends: bool) -> None:
        """One line (UsageError) for a habit the model cannot have; `kind` is "image", "tokens" or "vectors"
        (layout_kind); `attends`: a token model calls scaled_dot_product_attention (a recurrent one does not,
        nor one that writes its attention out, whose operators are counted as it runs them; an image model
        may: a vision transformer)."""
        for value, allowed, flag in (
            (self.memory_format, MEMORY_FORMATS, "--memory-format"), (self.optimizer_impl, OPTIMIZER_IMPLS,
            "--optimizer-impl"), (self.attention, ATTENTIONS, "--attention"),
        ):  # fmt: skip
            if value not in allowed:
                raise UsageError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.memory_format != "nchw" and kind != "image":
            takes = "tokens" if kind == "tokens" else "inputs that are not images (C,H,W)"
            raise UsageError(f"--memory-format is for image models (convolutions); this model takes {takes}")
        if self.attention != "fused" and not attends:
            if kind != "tokens":
                raise UsageError("--attention is for transformers; this model has no attention")
            raise UsageError(
                "--attention is for models that call scaled_dot_product_attention; this one does not (its "
                "operators are counted as it runs them)"
            )
        optimizer = self.optimizer or default_optimizer
        if self.optimizer_impl == "fused" and optimizer not in FUSED_OPTIMIZERS:
            raise UsageError(
                f"--optimizer-impl fused: PyTorch's {optimizer} has no fused implementation "
                f"(fused: {', '.join(FUSED_OPTIMIZERS)}); use foreach or loop"
            )

    def feature_optimizer(self, default_optimizer: str) -> str:
        """The optimizer as features.py takes it: KIND, or KIND:fused / KIND:loop."""
        kind = self.optimizer or default_optimizer
        return kind if self.optimizer_impl == "foreach" else f"{kind}:{self.optimizer_impl}"

    @property
    def feature_memory_format(self) -> str:
        return "nhwc" if self.memory_format == "channels_last" else "nchw"

    @property
    def step_attention(self) -> str:
        return "decomposed" if self.attention == "eager" else "fused"

    def describe(self, kind: str, default_optimizer: str, attends: bool) -> str:
        """The job restated: 'channels_last, sgd (fused)' or 'adamw (foreach), eager attention' (attention
        for a model that calls it, a transformer of tokens or of images: check's `attends`)."""
        parts = [self.memory_format] if kind == "image" else []
        parts.append(f"{self.optimizer or default_optimizer} ({self.optimizer_impl})")
        if attends:
            parts.append(f"{self.attention} attention")
        return ", ".join(parts)

    def to_json(self, kind: str, default_optimizer: str, attends: bool) -> dict[str, str | None]:
        """The habits as JSON; null for one the model does not have (as describe leaves it out)."""
        return {
            "memory_format": self.memory_format if kind == "image" else None,
            "optimizer": self.optimizer or default_optimizer, "optimizer_impl": self.optimizer_impl,
            "attention": self.attention if attends else None,
        }  # fmt: skip
