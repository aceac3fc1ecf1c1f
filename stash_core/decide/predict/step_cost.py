"""FLOPs and bytes of one training step of a model, per operator, from torch's FLOP formulas.

The step (forward, loss, backward) runs once on the meta device: shapes only, no arithmetic, so even
BERT-large at a large batch takes well under a second. Each aten operator's FLOPs come from
torch.utils.flop_counter's formulas (the ones FlopCounterMode uses: a multiply-add counts as 2 FLOPs) and its
bytes are the sizes of its tensor inputs and outputs (what a kernel reads and writes at least). Views move
nothing and are left out. Activation memory is what autograd saves for backward (saved_tensors_hooks).
A model that cannot run on meta (a user factory that needs real tensors) runs on the CPU at batch 1 and its
figures are scaled by the batch, which is exact for per-sample costs and said in `note`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from stash_core.errors import UsageError

# Operators that run on tensor cores (matrix engines); everything else is bandwidth-bound elementwise work.
MATRIX_OPS = frozenset(
    {
        "aten.convolution", "aten.convolution_backward", "aten.mm", "aten.addmm", "aten.bmm",
        "aten.baddbmm", "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention_backward",
        "aten._scaled_dot_product_flash_attention_backward",
    }
)  # fmt: skip
# Ops that only create or describe tensors (no kernel worth timing).
_FREE_OPS = frozenset(
    {"aten.detach", "aten.t", "aten.empty", "aten.zeros", "aten.ones_like", "aten.zeros_like"}
)


@dataclass(frozen=True)
class OpCost:
    name: str
    flops: float
    bytes: float
    phase: str  # "forward" | "backward"

    @property
    def matrix(self) -> bool:
        return self.name in MATRIX_OPS


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
    def param_bytes(self) -> float:
        return 4.0 * self.param_count  # fp32 master weights (also under mixed precision)


class _OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpCost] = []
        self.phase = "forward"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func._overloadpacket)
        if func.is_view or name in _FREE_OPS:
            return out
        formula = flop_registry.get(func._overloadpacket)
        flops = float(formula(*args, **kwargs, out_val=out)) if formula is not None else 0.0
        moved = sum(
            leaf.numel() * leaf.element_size()
            for leaf in tree_leaves((args, kwargs, out))
            if isinstance(leaf, torch.Tensor)
        )
        self.ops.append(OpCost(name, flops, float(moved), self.phase))
        return out


def step_cost(model: str, batch_size: int, input_shape: Sequence[int] | None = None) -> StepCost:
    """The per-operator FLOPs and bytes of one training step; UsageError for an unknown model or batch.

    input_shape is one sample as `stash profile --input-shape` gives it: (C, H, W) for an image model,
    (seq_len,) for a token model; None (or empty) is the model's default (3x224x224 images, 128 tokens)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise UsageError(f"batch size must be a positive whole number, got {batch_size!r}")
    shape = tuple(int(size) for size in input_shape) if input_shape else None
    return _cached_step_cost(str(model).strip(), batch_size, shape)


@functools.lru_cache(maxsize=64)
def _cached_step_cost(model: str, batch_size: int, shape: tuple[int, ...] | None) -> StepCost:
    from stash_core.zoo import build_model

    try:
        with torch.device("meta"):
            net, info = build_model(model, input_shape=shape)
        return _trace(model, net, info, batch_size, "meta", batch_size, "")
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - a user model that needs real tensors: measure on the CPU at batch 1
        net, info = build_model(model, input_shape=shape)
        cost = _trace(model, net, info, 1, "cpu", batch_size, "counted on the CPU at batch 1, scaled")
        return cost


def _trace(model, net, info, run_batch: int, device: str, batch_size: int, note: str) -> StepCost:
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
    with recorder:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss = loss_fn(info)(net(inputs), targets)
        recorder.phase = "backward"
        loss.backward()
    scale = batch_size / run_batch
    ops = recorder.ops
    if scale != 1:  # per-sample costs scale with the batch; weight-sized traffic is overstated slightly
        ops = [OpCost(op.name, op.flops * scale, op.bytes * scale, op.phase) for op in ops]
    params = sum(p.numel() for p in net.parameters())
    shape = tuple(int(size) for size in info.input_shape)
    return StepCost(
        model, batch_size, tuple(ops), int(params), saved["bytes"] * scale, device, note, input_shape=shape
    )
