"""What the step model needs to know of one aten operator besides its FLOPs and bytes: its class, its kernel
count and the shape of its output tiles (for wave effects).

Classes (each gets its own fitted efficiency, roofline.py): "matmul" (convolutions and matrix products, on
the matrix units), "attention" (fused scaled_dot_product_attention, attention.py), "reduction" (sums, means,
softmax, losses: a reduction tree is slower per byte than a streaming kernel), "normalisation" (batch, layer
and group norm: statistics, then the normalised tensor, several passes over their input; measured on an H200
at 24-37% of the bandwidth their bytes need, docs/measurements/h200-convolutions.txt) and "elementwise"
(everything else: streaming kernels bound by memory bandwidth).

The output of a matrix product is computed in tiles of TILE x TILE elements, one thread block each, spread
over the GPU's streaming multiprocessors (SMs); gemm dims (rows, cols, groups) give the tile count.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

MATMUL_OPS = frozenset(
    {"aten.convolution", "aten.convolution_backward", "aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm",
     "aten._convolution", "aten.cudnn_convolution", "aten._slow_conv2d_forward", "stash.rnn_gemm"}
)  # fmt: skip
# The fused attention kernels torch may dispatch to on a GPU (counted by attention.py when traced on meta).
ATTENTION_OPS = frozenset(
    {"aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_flash_attention",
     "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_efficient_attention_backward",
     "aten._scaled_dot_product_flash_attention_backward", "aten._scaled_dot_product_cudnn_attention_backward",
     "aten._flash_attention_forward", "aten._efficient_attention_forward", "aten._flash_attention_backward",
     "aten._efficient_attention_backward", "stash.attention", "stash.attention_backward"}
)  # fmt: skip
_REDUCTION_WORDS = ("sum", "mean", "softmax", "nll_loss", "amax", "amin", "argmax", "var", "std", "norm.")
_NORMALISATION_WORDS = ("layer_norm", "batch_norm", "group_norm")
# Ops that create, describe or reinterpret tensors without a kernel worth timing.
FREE_OPS = frozenset(
    {"aten.detach", "aten.t", "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.zeros",
     "aten.ones_like", "aten.zeros_like", "aten._unsafe_view", "aten.lift_fresh", "aten.alias"}
)  # fmt: skip
TILE = 128


def op_class(name: str) -> str:
    if name in MATMUL_OPS:
        return "matmul"
    if name in ATTENTION_OPS:
        return "attention"
    if any(word in name for word in _NORMALISATION_WORDS):
        return "normalisation"
    if any(word in name for word in _REDUCTION_WORDS):
        return "reduction"
    return "elementwise"


def kernel_count(name: str) -> int:
    """Kernels one call launches: a convolution's backward computes the input's and the weight's gradients
    separately; a fused attention backward runs a pre-pass, the main kernel and a conversion."""
    if name == "aten.convolution_backward":
        return 2
    if name.endswith("attention_backward"):
        return 3
    return 1


def gemm_dims(name: str, args: tuple, out: object) -> tuple[float, float, float]:
    """(rows, cols, groups) of a matrix operator's output as a GEMM; () for any other operator."""
    import torch  # loaded by the tracer already; here only to tell tensors apart

    tensors = [leaf for leaf in args if isinstance(leaf, torch.Tensor)]
    if name in ("aten.mm", "aten.addmm") and isinstance(out, torch.Tensor) and out.dim() == 2:
        return (float(out.shape[0]), float(out.shape[1]), 1.0)
    if name in ("aten.bmm", "aten.baddbmm") and isinstance(out, torch.Tensor) and out.dim() == 3:
        return (float(out.shape[1]), float(out.shape[2]), float(out.shape[0]))
    if name in MATMUL_OPS and "convolution" in name and len(tensors) >= 2:
        groups = _conv_groups(args)
        if name == "aten.convolution_backward":  # grad_output, input, weight: the input's gradient
            grad_out, inputs = tensors[0], tensors[1]
            return (_rows(grad_out), float(max(inputs.shape[1], grad_out.shape[1])) / groups, float(groups))
        if isinstance(out, torch.Tensor) and out.dim() >= 3:
            return (_rows(out), float(out.shape[1]) / groups, float(groups))
    return ()


GEMM_OPS = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm"})
MAX_ALIGNMENT = 16  # elements: beyond 16 (16 bytes of FP8, 32 of FP16) no kernel asks for more


def leading_alignment(name: str, args: tuple, out: object) -> float:
    """Of a cuBLAS matrix product: the largest power of two, up to MAX_ALIGNMENT elements, that divides the
    leading dimension (the stride between rows or columns in memory) of every operand and of the output; 0
    for any other operator. A vocabulary of 50,257 tokens makes it 1; the hidden sizes of common models 16."""
    import torch  # loaded by the tracer already; here only to tell tensors apart

    if name not in GEMM_OPS:
        return 0.0
    tensors = [leaf for leaf in (*args, out) if isinstance(leaf, torch.Tensor) and leaf.dim() >= 2]
    return float(min((_aligned(tensor) for tensor in tensors), default=MAX_ALIGNMENT))


def _aligned(tensor: torch.Tensor) -> int:
    rows, cols = tensor.shape[-2], tensor.shape[-1]
    row_stride, col_stride = tensor.stride()[-2], tensor.stride()[-1]
    if rows == 1 or cols == 1:
        return MAX_ALIGNMENT  # a vector: no leading dimension to align
    if col_stride == 1:
        leading = row_stride
    elif row_stride == 1:
        leading = col_stride
    else:
        return MAX_ALIGNMENT  # neither dimension contiguous: the library copies it first
    alignment = 1
    while alignment < MAX_ALIGNMENT and leading % (2 * alignment) == 0:
        alignment *= 2
    return alignment


def tile_count(dims: tuple[float, ...]) -> float:
    if len(dims) != 3:
        return 0.0
    rows, cols, groups = dims
    return max(groups, 1.0) * math.ceil(max(rows, 1.0) / TILE) * math.ceil(max(cols, 1.0) / TILE)


def _rows(tensor: torch.Tensor) -> float:
    """An image tensor (N, C, H, W) as GEMM rows: every output position of every sample."""
    return float(tensor.numel() // max(int(tensor.shape[1]), 1))


def pointwise_conv(name: str, args: tuple) -> bool:
    """A convolution (or its backward) with a 1x1 kernel: cuDNN runs it on NCHW tensors as a matrix product,
    without converting them to NHWC first (measured on an H200, docs/measurements/h200-convolutions.txt).
    The weight is the second tensor of convolution(input, weight, ...) and the third of
    convolution_backward(grad_output, input, weight, ...)."""
    import torch  # loaded by the tracer already; here only to tell tensors apart

    if name not in ("aten.convolution", "aten.convolution_backward"):
        return False
    tensors = [leaf for leaf in args if isinstance(leaf, torch.Tensor)]
    index = 1 if name == "aten.convolution" else 2
    if len(tensors) <= index or tensors[index].dim() < 3:
        return False
    return all(int(size) == 1 for size in tensors[index].shape[2:])


def _conv_groups(args: tuple) -> int:
    # convolution(..., groups) and convolution_backward(..., groups, output_mask): the last int
    ints = [leaf for leaf in args if isinstance(leaf, int) and not isinstance(leaf, bool)]
    return max(int(ints[-1]), 1) if ints else 1
