"""FLOPs, bytes, kernels and GEMM tiles of one training step of a model, per operator.

The step (forward, loss, backward) runs on the meta device: shapes only, no arithmetic. Each aten operator's
FLOPs come from torch.utils.flop_counter's formulas (a multiply-add counts as 2 FLOPs) and its bytes are the
sizes of its tensor inputs and outputs (what a kernel reads and writes at least). Views move nothing and are
left out. scaled_dot_product_attention is counted as the fused kernel a GPU runs (attention.py). Each operator
also has its class, its kernel launches and its output tiles (op_classes.py). Activation memory is what
autograd saves for backward (saved_tensors_hooks).

Every count is linear in the batch (or constant), so where many batches of one model are asked (the
validation over published figures) a step is traced at two small batches and any other batch is the line
through them: a model's cost at every batch costs two traces. A single prediction traces its own batch.
A model that cannot run on meta (a user factory that needs real tensors) runs on the CPU at batch 1 and is
scaled, said in `note`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from stash_core.decide.predict.step_cache import cached
from stash_core.decide.predict.step_types import ModelInput, OpCost, StepCost
from stash_core.errors import UsageError
from stash_core.zoo_names import model_file_stamp

__all__ = [
    "ATTENTION_KINDS", "ModelInput", "OpCost", "StepCost", "calls_attention", "default_input_shape",
    "model_input", "step_cost",
]  # fmt: skip

TRACE_BATCHES = (2, 4)  # the two batches every other batch is interpolated from
ATTENTION_KINDS = ("fused", "decomposed")


def step_cost(
    model: str,
    batch_size: int,
    input_shape: Sequence[int] | None = None,
    interpolate: bool = False,
    attention: str = "fused",
) -> StepCost:
    """The per-operator FLOPs and bytes of one training step; UsageError for an unknown model or batch.

    input_shape is one sample as `stash profile --input-shape` gives it: (C, H, W) for an image model,
    (seq_len,) for a token model; None (or empty) is the model's default (3x224x224 images, 128 tokens).
    interpolate: from the two traced batches (for many batches of one model, as the validation asks);
    otherwise one trace at this batch. attention: "fused" (scaled_dot_product_attention as the one kernel a
    GPU runs, what the zoo's models do) or "decomposed" (its matrix products, softmax and dropout, as a model
    that writes attention out by hand runs it)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise UsageError(f"batch size must be a positive whole number, got {batch_size!r}")
    shape = tuple(int(size) for size in input_shape) if input_shape else None
    if attention not in ATTENTION_KINDS:
        raise UsageError(f"attention must be one of {', '.join(ATTENTION_KINDS)}, got {attention!r}")
    stamp = model_file_stamp(model)  # a user's file edited since: counted afresh
    if not interpolate:
        return _traced(str(model).strip(), batch_size, shape, attention, stamp)
    return _cached_step_cost(str(model).strip(), batch_size, shape, attention, stamp)


def calls_attention(model: str, kind: str, batch_size: int, shape: tuple[int, ...] | None) -> bool:
    """Whether a model calls scaled_dot_product_attention: the zoo's token models all do, its image models
    none (no trace needed); a file's as its fused trace says (a recurrent text model does not, a vision
    transformer does). A file Stash cannot count is taken to, if it takes tokens. `kind`: "image" or
    "tokens", what the model takes."""
    if ":" not in model:
        return kind == "tokens"
    try:
        return step_cost(model, batch_size, shape).fused_attention
    except UsageError:
        return kind == "tokens"


def default_input_shape(model: str) -> tuple[int, ...]:
    """The input shape a model takes when none is given (built on the meta device: no step traced)."""
    return _default_input_shape(model, model_file_stamp(model))  # a user's file edited since: built afresh


@functools.lru_cache(maxsize=64)
def _default_input_shape(model: str, _stamp: tuple | None) -> tuple[int, ...]:
    try:
        return model_input(model).input_shape
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - a user model that needs real tensors: its traced step says
        return step_cost(model, 1).input_shape


def model_input(model: str, input_shape: Sequence[int] | None = None) -> ModelInput:
    """A model's kind and the input shape a job trains it with (the one given, checked; else its default), as
    the zoo builds it on the meta device. A zoo model's is kept on disk beside its counted steps, so that a
    decision over cached steps imports no torch. UsageError for a model or shape the zoo cannot build."""
    shape = [int(size) for size in input_shape] if input_shape else None
    key = (str(model).strip(), "input", shape)
    return cached(key, lambda: _described_input(model, shape), _decoded_input)


def _described_input(model: str, shape: list[int] | None) -> ModelInput:
    from stash_core.zoo import describe_model  # torch: only when not kept

    info = describe_model(model, input_shape=tuple(shape) if shape else None)
    return ModelInput(info.kind, tuple(int(size) for size in info.input_shape))


def _decoded_input(data: dict) -> ModelInput:
    return ModelInput(str(data["kind"]), tuple(int(size) for size in data["input_shape"]))


@functools.lru_cache(maxsize=256)
def _cached_step_cost(
    model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str, stamp: tuple | None = None
) -> StepCost:
    low, high = TRACE_BATCHES
    if batch_size in TRACE_BATCHES or batch_size < low:
        return _traced(model, batch_size, shape, attention, stamp)
    first = _traced(model, low, shape, attention, stamp)
    second = _traced(model, high, shape, attention, stamp)
    if first.device != "meta" or [op.name for op in first.ops] != [op.name for op in second.ops]:
        return _traced(model, batch_size, shape, attention, stamp)  # the operators change with the batch
    return _interpolated(first, second, batch_size)


def _interpolated(first: StepCost, second: StepCost, batch_size: int) -> StepCost:
    """The cost at `batch_size` on the line through two traced batches (every count is affine in it)."""
    share = (batch_size - first.batch_size) / (second.batch_size - first.batch_size)

    def at(low: float, high: float) -> float:
        return max(low + share * (high - low), 0.0)

    ops = tuple(
        replace(a, flops=at(a.flops, b.flops), bytes=at(a.bytes, b.bytes),
                gemm=tuple(at(x, y) for x, y in zip(a.gemm, b.gemm, strict=True)))
        for a, b in zip(first.ops, second.ops, strict=True)
    )  # fmt: skip
    return replace(
        first,
        batch_size=batch_size,
        ops=ops,
        activation_bytes=at(first.activation_bytes, second.activation_bytes),
    )


@functools.lru_cache(maxsize=128)
def _traced(
    model: str,
    batch_size: int,
    shape: tuple[int, ...] | None,
    attention: str = "fused",
    stamp: tuple | None = None,
) -> StepCost:
    """The counted step; `stamp` (a user file's model_file_stamp) only keys this process's cache."""
    key = (model, batch_size, list(shape) if shape else None, attention)
    return cached(key, lambda: _counted(model, batch_size, shape, attention), _decoded)


def _decoded(data: dict) -> StepCost:
    ops = tuple(OpCost(**{**op, "gemm": tuple(op["gemm"])}) for op in data["ops"])
    return StepCost(**{**data, "ops": ops, "input_shape": tuple(data["input_shape"])})


def _counted(model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str) -> StepCost:
    if ":" in model:  # a user's factory: its code runs in a child process of its own (zoo/contained.py)
        from stash_core.zoo.contained import contained

        return contained(f"model factory {model}", _counted_quietly, model, batch_size, shape, attention)
    return _counted_quietly(model, batch_size, shape, attention)


def _counted_quietly(model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str) -> StepCost:
    # torch, the zoo and the tracer load here, when a step is counted: a cached step needs none of them
    from stash_core.decide.predict.step_trace import counted_here
    from stash_core.zoo.compiler_guards import compiler_unimported

    with compiler_unimported():
        return counted_here(model, batch_size, shape, attention)


def __getattr__(name: str):
    """The tracer's recorder, for those who reach it here (it loads torch: decide/predict/step_trace.py)."""
    if name == "_OpRecorder":
        from stash_core.decide.predict.step_trace import OpRecorder

        return OpRecorder
    raise AttributeError(name)
