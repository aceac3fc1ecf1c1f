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
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from stash_core.decide.predict.attention import fused_attention
from stash_core.decide.predict.op_classes import (
    FREE_OPS,
    gemm_dims,
    kernel_count,
    leading_alignment,
    op_class,
    pointwise_conv,
    tile_count,
)
from stash_core.decide.predict.step_cache import cached
from stash_core.errors import UsageError
from stash_core.zoo.compiler_guards import compiler_unimported

TRACE_BATCHES = (2, 4)  # the two batches every other batch is interpolated from
ATTENTION_KINDS = ("fused", "decomposed")


@dataclass(frozen=True)
class OpCost:
    name: str
    flops: float
    bytes: float
    phase: str  # "forward" | "backward"
    op_class: str = "elementwise"  # "matmul" | "attention" | "reduction" | "normalisation" | "elementwise"
    kernels: int = 1
    gemm: tuple[float, ...] = ()  # (rows, cols, groups) of a matrix operator's output
    alignment: float = 0.0  # elements every operand's leading dimension is a multiple of (cuBLAS products)
    pointwise: bool = False  # a 1x1 convolution: no NCHW to NHWC conversion (op_classes.pointwise_conv)

    @property
    def matrix(self) -> bool:
        return self.op_class in ("matmul", "attention")

    @property
    def tiles(self) -> float:
        return tile_count(self.gemm)


@dataclass(frozen=True)
class StepCost:
    """One training step of `model` at `batch_size` per worker (optimizer step not included in ops)."""

    model: str
    batch_size: int
    ops: tuple[OpCost, ...]
    param_count: int
    activation_bytes: float
    device: str  # "meta" or "cpu"
    note: str = ""
    extra: dict = field(default_factory=dict)
    input_shape: tuple[int, ...] = ()  # of one sample: (C, H, W) or (seq_len,)
    param_tensors: int = 0
    kind: str = "image"  # the zoo's input kind: "image" | "tokens"

    @property
    def forward_flops(self) -> float:
        return sum(op.flops for op in self.ops if op.phase == "forward")

    @property
    def total_flops(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def total_bytes(self) -> float:
        return sum(op.bytes for op in self.ops)

    @property
    def kernel_count(self) -> int:
        return sum(op.kernels for op in self.ops)

    @property
    def param_bytes(self) -> float:
        return 4.0 * self.param_count  # fp32 master weights (also under mixed precision)


class _OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpCost] = []
        self.phase = "forward"
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func._overloadpacket)
        if self.paused or func.is_view or name in FREE_OPS:
            return out
        formula = flop_registry.get(func._overloadpacket)
        flops = float(formula(*args, **kwargs, out_val=out)) if formula is not None else 0.0
        moved = sum(
            leaf.numel() * leaf.element_size()
            for leaf in tree_leaves((args, kwargs, out))
            if isinstance(leaf, torch.Tensor)
        )
        dims = gemm_dims(name, args, out)
        aligned = leading_alignment(name, args, out)
        self.ops.append(
            OpCost(
                name, flops, float(moved), self.phase, op_class(name), kernel_count(name), dims, aligned,
                pointwise_conv(name, args),
            )
        )  # fmt: skip
        return out

    def record(self, name: str, cost: dict) -> None:
        self.ops.append(
            OpCost(
                name,
                cost["flops"],
                cost["bytes"],
                self.phase,
                op_class(name),
                kernel_count(name),
                cost["gemm"],
            )
        )

    def pause(self, paused: bool) -> None:
        self.paused = paused


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
    if not interpolate:
        return _traced(str(model).strip(), batch_size, shape, attention)
    return _cached_step_cost(str(model).strip(), batch_size, shape, attention)


@functools.lru_cache(maxsize=64)
def default_input_shape(model: str) -> tuple[int, ...]:
    """The input shape a model takes when none is given (built on the meta device: no step traced)."""
    from stash_core.zoo import describe_model

    try:
        info = describe_model(model)  # (a zoo model without importing torch's compiler)
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - a user model that needs real tensors: its traced step says
        return step_cost(model, 1).input_shape
    return tuple(int(size) for size in info.input_shape)


@functools.lru_cache(maxsize=256)
def _cached_step_cost(model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str) -> StepCost:
    low, high = TRACE_BATCHES
    if batch_size in TRACE_BATCHES or batch_size < low:
        return _traced(model, batch_size, shape, attention)
    first, second = _traced(model, low, shape, attention), _traced(model, high, shape, attention)
    if first.device != "meta" or [op.name for op in first.ops] != [op.name for op in second.ops]:
        return _traced(model, batch_size, shape, attention)  # the operators change with the batch
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
def _traced(model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str = "fused") -> StepCost:
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
    with compiler_unimported():
        return _counted_here(model, batch_size, shape, attention)


def _counted_here(model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str) -> StepCost:
    from stash_core.zoo import build_model

    try:
        with torch.device("meta"):
            net, info = build_model(model, input_shape=shape)
        return _trace(model, net, info, batch_size, "meta", batch_size, "", attention)
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - a user model that needs real tensors: measure on the CPU at batch 1
        net, info = build_model(model, input_shape=shape)
        note = "counted on the CPU at batch 1, scaled"
        return _trace(model, net, info, 1, "cpu", batch_size, note, attention)


def _trace(
    model, net, info, run_batch: int, device: str, batch_size: int, note: str, attention: str = "fused"
) -> StepCost:
    from stash_core.zoo import loss_fn, synthetic_batch

    inputs, targets = synthetic_batch(info, run_batch, device)
    saved = {"bytes": 0.0}
    seen: dict[int, torch.Tensor] = {}  # a tensor saved by two operators is held once (kept alive: ids stay)
    weights = {id(parameter) for parameter in net.parameters()}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        # A weight saved as a view (a linear layer's transposed weight) is a weight, not an activation.
        base = tensor._base if tensor._base is not None else tensor
        if id(tensor) not in seen and id(base) not in weights:
            seen[id(tensor)] = tensor
            saved["bytes"] += tensor.numel() * tensor.element_size()
        return tensor

    recorder = _OpRecorder()
    counting = fused_attention(recorder.record, recorder.pause) if attention == "fused" else nullcontext()
    with counting, recorder:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss = loss_fn(info)(net(inputs), targets)
        recorder.phase = "backward"
        loss.backward()
    scale = batch_size / run_batch
    ops = recorder.ops
    if scale != 1:  # per-sample costs scale with the batch; weight-sized traffic is overstated slightly
        ops = [
            replace(op, flops=op.flops * scale, bytes=op.bytes * scale, gemm=_scaled_gemm(op.gemm, scale))
            for op in ops
        ]
    parameters = list(net.parameters())
    shape = tuple(int(size) for size in info.input_shape)
    params = int(sum(p.numel() for p in parameters))
    return StepCost(
        model, batch_size, tuple(ops), params, saved["bytes"] * scale, device, note, input_shape=shape,
        param_tensors=len(parameters), kind=str(getattr(info, "kind", "image")),
    )  # fmt: skip


def _scaled_gemm(dims: tuple[float, ...], scale: float) -> tuple[float, ...]:
    return (dims[0] * scale, *dims[1:]) if dims else dims
