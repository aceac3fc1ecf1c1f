"""scaled_dot_product_attention counted as the fused kernel a GPU runs, not as what the meta device does.

On the meta device (and the CPU) torch decomposes scaled_dot_product_attention into matrix products, a
softmax and dropout whose S x S intermediate never exists on a GPU with flash or memory-efficient attention.
While a step is traced, the function is replaced by one fused operator per direction: forward FLOPs
4 B H Sq Sk D (Q K^T and P V; half of it under a causal mask, whose masked blocks are skipped), bytes of Q,
K, V and the output (grouped-query attention: the queries' heads, the keys' and values' own bytes);
backward 2.5 x the forward FLOPs (it recomputes Q K^T: five products against two) and
the bytes of Q, K, V, the output, its gradient and the three input gradients. nn.MultiheadAttention calls
the same function, so BERT-style encoders are counted fused too (they run fused on the GPU in training).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_PATCH_LOCK = threading.Lock()
BACKWARD_FLOPS_RATIO = 2.5


def attention_cost(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool) -> dict:
    """FLOPs, bytes and tile dims of the fused forward (B, H, Sq, D query; Sk keys)."""
    *batch, seq_q, head_dim = query.shape
    seq_k = key.shape[-2]
    heads = 1
    for size in batch:
        heads *= int(size)
    flops = 4.0 * heads * seq_q * seq_k * head_dim * (0.5 if causal else 1.0)
    moved = (
        sum(t.numel() * t.element_size() for t in (query, key, value)) + query.numel() * query.element_size()
    )
    return {"flops": flops, "bytes": float(moved), "gemm": (float(seq_q), float(head_dim), float(heads))}


@contextlib.contextmanager
def fused_attention(record: Callable[[str, dict], None], paused: Callable[[bool], None]) -> Iterator[None]:
    """Within the block, F.scaled_dot_product_attention records one fused operator per direction through
    `record(name, cost)` and pauses the operator recorder (`paused(True)`) while the decomposition runs."""

    original = F.scaled_dot_product_attention
    inside: list[bool] = []  # non-empty while a fused call runs

    class _Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, query, key, value, attn_mask, dropout_p, is_causal, scale, gqa):
            paused(True)
            try:
                extra = {"enable_gqa": True} if gqa else {}  # keys and values with fewer heads than queries
                out = original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, **extra)
            finally:
                paused(False)
            ctx.cost = attention_cost(query, key, value, bool(is_causal))
            ctx.save_for_backward(query, key, value, out)  # what a flash kernel keeps (and its logsumexp)
            record("stash.attention", ctx.cost)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            query, key, value, _out = ctx.saved_tensors
            cost = ctx.cost
            record(
                "stash.attention_backward",
                {
                    "flops": BACKWARD_FLOPS_RATIO * cost["flops"],
                    "bytes": 2.0 * cost["bytes"],
                    "gemm": cost["gemm"],
                },
            )
            paused(True)
            try:  # the gradients' shapes are what matters here, not their values
                grads = (torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value))
            finally:
                paused(False)
            return (*grads, None, None, None, None, None)

    def fused(
        query,
        key,
        value,
        attn_mask=None,
        dropout_p=0.0,
        is_causal=False,
        scale=None,
        enable_gqa=False,
        **kwargs,
    ):
        if kwargs or inside:  # an argument this counter does not know: counted as decomposed; or the
            # fused operator's own call of the original (seen again by _ImportedName), not counted twice
            return original(
                query,
                key,
                value,
                attn_mask,
                dropout_p,
                is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
                **kwargs,
            )
        inside.append(True)
        try:
            return _Fused.apply(query, key, value, attn_mask, dropout_p, is_causal, scale, bool(enable_gqa))
        finally:
            inside.pop()

    with _PATCH_LOCK:
        F.scaled_dot_product_attention = fused
        try:
            with _ImportedName(original, fused):
                yield
        finally:
            F.scaled_dot_product_attention = original


class _ImportedName(TorchFunctionMode):
    """Sends a call of the original function to `fused`: a model that imported scaled_dot_product_attention by
    name (`from torch.nn.functional import ...`) holds the function itself, which the patch of
    F.scaled_dot_product_attention does not replace (the patch still serves torch's own callers, such as
    nn.MultiheadAttention, whose calls this mode would not see)."""

    def __init__(self, original: Callable, fused: Callable) -> None:
        super().__init__()
        self.original, self.fused = original, fused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return self.fused(*args, **kwargs) if func is self.original else func(*args, **kwargs)
