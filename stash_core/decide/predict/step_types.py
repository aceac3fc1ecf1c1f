"""What counting a training step gives: each operator's cost (OpCost) and the step's (StepCost)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stash_core.decide.predict.op_classes import tile_count


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
    # Of param_count and param_tensors, those with requires_grad=False (a frozen backbone): held in memory
    # and used by the forward, but given no gradient, no optimizer state and no all-reduce.
    frozen_count: int = 0
    frozen_tensors: int = 0

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
    def trained_count(self) -> int:
        """The parameters the step trains: those given a gradient, all-reduced and stepped."""
        return self.param_count - self.frozen_count

    @property
    def trained_tensors(self) -> int:
        return self.param_tensors - self.frozen_tensors

    @property
    def gradient_bytes(self) -> float:
        return 4.0 * self.trained_count  # fp32 gradients (also under mixed precision)


@dataclass(frozen=True)
class ModelInput:
    """What a model takes, as the zoo builds it: its kind ("image" | "tokens") and the shape of one sample."""

    kind: str
    input_shape: tuple[int, ...]
