"""Counting one training step: the model built on the meta device (the CPU at batch 1 when it needs real
tensors), its forward and backward run under a dispatch mode that records every operator's FLOPs (torch's
formulas), bytes, GEMM shape and kernels (op_classes.py), fused attention counted as one kernel
(attention.py) and recurrent layers as their cuDNN calls (rnn.py). Loaded only when a step is counted
(step_cost.py keeps counted steps on disk), so that a prediction from a counted step needs no torch.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

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
)
from stash_core.decide.predict.rnn import cudnn_rnns
from stash_core.decide.predict.step_types import OpCost, StepCost, counted_op
from stash_core.errors import UsageError, first_line


class OpRecorder(TorchDispatchMode):
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
        """An operator counted as the GPU runs it (attention.py, rnn.py; step_types.counted_op)."""
        self.ops.append(counted_op(name, cost, self.phase))

    def pause(self, paused: bool) -> None:
        self.paused = paused


def counted_here(model: str, batch_size: int, shape: tuple[int, ...] | None, attention: str) -> StepCost:
    from stash_core.zoo import build_model

    try:
        with torch.device("meta"):
            net, info = build_model(model, input_shape=shape)
        return _trace(model, net, info, batch_size, "meta", batch_size, "", attention)
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - a user model that needs real tensors: measure on the CPU at batch 1
        net, info = build_model(model, input_shape=shape)
    # Batch 1 where it trains, else 2 (batch 1 of a small image leaves a BatchNorm one value per channel);
    # where the smallest batch the job has fails too, PyTorch would not train the job either.
    for run_batch in sorted({1, min(batch_size, 2)}):
        try:
            note = f"counted on the CPU at batch {run_batch}, scaled"
            return _trace(model, net, info, run_batch, "cpu", batch_size, note, attention)
        except UsageError:  # what the counting itself refuses, said as it is
            raise
        except Exception as error:  # noqa: BLE001 - the step itself fails
            failed = error
    given = "" if shape is None else f", input {','.join(map(str, shape))}"
    raise UsageError(
        f"{model} cannot take a training step at batch {min(batch_size, 2)}{given}: "
        f"{type(failed).__name__}: {first_line(failed)}"
    ) from None


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

    net.train()  # as the worker trains it (a factory may return a model in eval mode, a loaded checkpoint)
    recorder = OpRecorder()
    counting = fused_attention(recorder.record, recorder.pause) if attention == "fused" else nullcontext()
    with counting, cudnn_rnns(recorder.record, recorder.pause), recorder:
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
    frozen = [p for p in parameters if not p.requires_grad]
    return StepCost(
        model, batch_size, tuple(ops), params, saved["bytes"] * scale, device, note, input_shape=shape,
        param_tensors=len(parameters), kind=str(getattr(info, "kind", "image")),
        frozen_count=int(sum(p.numel() for p in frozen)), frozen_tensors=len(frozen),
        parameter_bytes=_bytes(parameters), frozen_bytes=_bytes(frozen),
        bfloat16=2 * _bytes([p for p in parameters if p.dtype == torch.bfloat16]) > _bytes(parameters),
    )  # fmt: skip


def _bytes(parameters: list[torch.Tensor]) -> float:
    return float(sum(parameter.numel() * parameter.element_size() for parameter in parameters))


def _scaled_gemm(dims: tuple[float, ...], scale: float) -> tuple[float, ...]:
    return (dims[0] * scale, *dims[1:]) if dims else dims
