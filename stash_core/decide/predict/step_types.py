"""What counting a training step gives: each operator's cost (OpCost) and the step's (StepCost)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from stash_core.decide.predict.op_classes import kernel_count, op_class, tile_count
from stash_core.decide.predict.rnn_costs import GEMM as RNN_GEMM


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
    # Calls the host makes for the operator: one per kernel in eager PyTorch (-1: as many as kernels); a
    # library launches several kernels from one call (cuDNN's recurrent layers, rnn.py: 1 or 0)
    dispatches: int = -1

    @property
    def host_dispatches(self) -> int:
        return self.kernels if self.dispatches < 0 else self.dispatches

    @property
    def matrix(self) -> bool:
        return self.op_class in ("matmul", "attention")

    @property
    def tiles(self) -> float:
        return tile_count(self.gemm)

    @property
    def on_cudnn(self) -> bool:
        """Whether cuDNN runs it (a convolution, a recurrent layer's products): TF32 by PyTorch's default on
        a GPU with TF32 units, where cuBLAS's matrix products stay FP32 (profile_arithmetic.py)."""
        return self.matrix and ("convolution" in self.name or self.name == RNN_GEMM)


def counted_op(name: str, cost: dict, phase: str) -> OpCost:
    """An operator counted as the GPU runs it (attention.py, rnn.py): `cost` gives its FLOPs, bytes and GEMM
    shape, and may give its kernels and host dispatches (else those of `name`)."""
    kernels = int(cost.get("kernels", kernel_count(name)))
    dispatches = int(cost.get("dispatches", -1))
    return OpCost(name, cost["flops"], cost["bytes"], phase, op_class(name), kernels, cost["gemm"],
                  dispatches=dispatches)  # fmt: skip


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
    # Of param_count and param_tensors, those with requires_grad=False (a frozen backbone): held in memory
    # and used by the forward, but given no gradient, no optimizer state and no all-reduce.
    frozen_count: int = 0
    frozen_tensors: int = 0
    # Bytes of the parameters as the model holds them, and of its frozen ones: a model built in bfloat16 or
    # float16 has 16-bit weights, gradients and optimizer state (0: not counted, taken as FP32).
    parameter_bytes: float = 0.0
    frozen_bytes: float = 0.0
    bfloat16: bool = False  # most of the parameters' bytes are bfloat16 (float16 otherwise, when 16-bit)

    @property
    def forward_flops(self) -> float:
        return sum(op.flops for op in self.ops if op.phase == "forward")

    @property
    def total_flops(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def total_bytes(self) -> float:
        return sum(op.bytes for op in self.ops)

    @functools.cached_property
    def recurrent(self) -> bool:
        """The step has recurrent layers counted as cuDNN calls (rnn.py); asked once per configuration."""
        return any(op.name == RNN_GEMM for op in self.ops)

    @functools.cached_property
    def fused_attention(self) -> bool:
        """The step calls scaled_dot_product_attention (counted fused, attention.py)."""
        return any(op.op_class == "attention" for op in self.ops)

    @property
    def kernel_count(self) -> int:
        return sum(op.kernels for op in self.ops)

    @property
    def trained_count(self) -> int:
        """The parameters the step trains: those given a gradient, all-reduced and stepped."""
        return self.param_count - self.frozen_count

    @property
    def trained_tensors(self) -> int:
        return self.param_tensors - self.frozen_tensors

    @property
    def weight_bytes(self) -> float:
        """Every parameter's bytes: FP32 unless the model was built in another type."""
        return self.parameter_bytes or 4.0 * self.param_count

    @property
    def trained_bytes(self) -> float:
        """The trained parameters' bytes, which their gradients and each optimizer state buffer have too."""
        return self.parameter_bytes - self.frozen_bytes if self.parameter_bytes else 4.0 * self.trained_count

    @property
    def element_bytes(self) -> float:
        """Bytes of one parameter on average: 4 for an FP32 model (also under mixed precision, which keeps
        FP32 master weights), 2 for one built in bfloat16 or float16."""
        return self.weight_bytes / self.param_count if self.param_count else 4.0

    @property
    def trained_element_bytes(self) -> float:
        """Bytes of one trained parameter on average: its gradient's and each optimizer state buffer's."""
        return self.trained_bytes / self.trained_count if self.trained_count else 4.0

    @property
    def half_weights(self) -> bool:
        """The model was built in 16 bits (most of its weights): it trains on the 16-bit matrix units as it
        is, without autocast's casts and with no FP32 master copy."""
        return self.element_bytes < 3.0

    @property
    def gradient_bytes(self) -> float:
        return self.trained_bytes  # a gradient has its parameter's type: FP32 under mixed precision


@dataclass(frozen=True)
class ModelInput:
    """What a model takes, as the zoo builds it: its kind ("image" | "tokens") and the shape of one sample."""

    kind: str
    input_shape: tuple[int, ...]
