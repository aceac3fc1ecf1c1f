"""nn.LSTM, nn.GRU and nn.RNN counted as the cuDNN calls a GPU runs, not as what the meta device does.

On the meta device (and the CPU) torch runs a recurrent layer as its per-timestep operators: a 2-layer LSTM
over 64 timesteps becomes thousands of small operators, each dispatched from the host. On a GPU PyTorch makes
one cuDNN call for the layers' forward and, backward, one for the data's gradients and one for the weights',
and cuDNN's standard algorithm launches, per layer and direction, with G gate blocks of H units (LSTM 4, GRU
3, plain RNN 1), T timesteps, batch N, input width I and element size e:

  forward   one GEMM of every timestep's input, x W_ih^T (T N x G H, depth I); then per timestep one GEMM of
            the hidden state, h W_hh^T (N x G H, depth H), and one element-wise kernel of the gates (reads the
            two pre-activations and the state, writes the state and keeps the gates for the backward:
            e N H (3 G + 2 s) bytes, s = 2 for an LSTM's h and c, else 1)
  backward  per timestep the gates' element-wise gradient (the same bytes) and one GEMM of the hidden state's
            gradient (N x H, depth G H); one GEMM of the inputs' gradient (T N x I, depth G H)
  weights   (a second call, made only when a weight of the layer is trained) one GEMM per weight matrix over
            every timestep (G H x I and G H x H, depth T N); one reduction of the biases' gradient (T N G H
            elements; a GRU's b_hn, scaled by its reset gate, adds T N H)

plus, between layers in training with dropout, one element-wise kernel each way. The host dispatches each
call once (dispatches=1 on its first operator, 0 on the rest): cuDNN's kernels pay the GPU's launch cost
(roofline's launch_s), not eager PyTorch's dispatch cost per kernel. What cuDNN keeps for the backward (its
reserve space: every layer's gates and states at every timestep) is counted as activations. A layer in eval
mode that the step trains through is refused in one line: cuDNN has no backward for it.

A packed sequence is counted at its mean batch a timestep. An LSTM with proj_size P multiplies the hidden
state's P values (depth P) and adds per timestep the projection's GEMM (N x P, depth H), its gradient and the
gradient of W_hr. Checked against DeepBench's measured cuDNN recurrent layers (bench/rnn_kernels.py,
docs/kernel-data.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from stash_core.decide.predict.rnn_costs import DROPOUT, GATES, layer_costs
from stash_core.errors import UsageError

Record = Callable[[str, dict], None]
_MODULES = {"lstm": "nn.LSTM", "gru": "nn.GRU", "rnn_tanh": "nn.RNN", "rnn_relu": "nn.RNN"}
EVAL_BACKWARD = (
    "the model trains through an {module} in eval mode, whose backward cuDNN cannot run on a GPU (PyTorch "
    "raises 'cudnn RNN backward can only be called in training mode'): keep the layer in train mode, or "
    "freeze it with every layer before it"
)


class _CudnnCalls(TorchFunctionMode):
    """Within the block, a recurrent layer's call (torch._VF.lstm, gru, rnn_tanh, rnn_relu) records its
    cuDNN operators through `record` and pauses the operator recorder while the decomposition runs."""

    def __init__(self, record: Record, paused: Callable[[bool], None]) -> None:
        super().__init__()
        self.record = record
        self.paused = paused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = getattr(func, "__name__", "")
        found = _layer_call(func, kind, args) if kind in GATES and not kwargs else None
        if found is None:
            return func(*args, **kwargs)
        return _run(kind, found, self.record, self.paused)


def _layer_call(func, kind: str, args: tuple) -> tuple | None:
    """(layer shape, input, hx, weights, call) of a layer's call, where call(input, hx, weights) makes it
    again; None for a call this counting does not know. A padded batch's call
    is (input, hx, weights, bias, layers, dropout, train, bidirectional, batch_first); a packed sequence's
    (data, batch_sizes, hx, weights, bias, layers, dropout, train, bidirectional), whose timesteps are
    counted at their mean batch (the total rows exact: cuDNN runs each timestep at its own batch)."""
    if len(args) != 9 or not isinstance(args[0], torch.Tensor):
        return None
    if isinstance(args[3], bool):
        data, hx, weights, bias, layers, dropout, train, bidirectional, batch_first = args
        if data.dim() != 3:
            return None
        steps, batch = (data.shape[1], data.shape[0]) if batch_first else (data.shape[0], data.shape[1])

        def call(data, hx, weights):
            return func(data, hx, weights, *args[3:])

    elif isinstance(args[1], torch.Tensor) and isinstance(args[4], bool):
        data, batch_sizes, hx, weights, bias, layers, dropout, train, bidirectional = args
        if data.dim() != 2 or batch_sizes.device.type == "meta" or len(batch_sizes) == 0:
            return None
        steps, batch = len(batch_sizes), data.shape[0] / len(batch_sizes)

        def call(data, hx, weights):
            return func(data, batch_sizes, hx, weights, *args[4:])

    else:
        return None
    directions = 2 if bidirectional else 1
    hidden = int(weights[0].shape[0]) // GATES[kind]
    # an LSTM's proj_size: its hidden matrix is G H x P and each layer and direction adds W_hr (P x H)
    projection = int(weights[1].shape[1]) if int(weights[1].shape[1]) != hidden else 0
    per_layer = ((4 if bias else 2) + (1 if projection else 0)) * directions
    if len(weights) != per_layer * layers or (projection and kind != "lstm"):
        return None
    layer = {
        "steps": int(steps), "batch": float(batch), "hidden": hidden, "layers": int(layers), "bias": bias,
        "directions": directions, "dropout": float(dropout) if train else 0.0, "projection": projection,
        "train": bool(train),
        "inputs": [int(weights[index * per_layer].shape[1]) for index in range(layers)],
        "element_bytes": data.element_size(),
    }  # fmt: skip
    return layer, data, hx, weights, call


def _call_ops(kind: str, layer: dict, call: str) -> list[tuple[str, dict]]:
    """The operators of one cuDNN call over every layer and direction (rnn_costs.layer_costs' "forward",
    "backward" or "weights"), the host dispatching the call once."""
    ops: list[tuple[str, dict]] = []
    for index, inputs in enumerate(layer["inputs"]):
        costs = layer_costs(
            kind,
            layer["steps"],
            layer["batch"],
            inputs,
            layer["hidden"],
            layer["element_bytes"],
            layer["bias"],
            projection=layer["projection"],
        )
        ops += costs[call] * layer["directions"]
        if call != "weights" and layer["dropout"] > 0 and index < len(layer["inputs"]) - 1:
            width = layer["projection"] or layer["hidden"]  # a layer's output: the projected state, if any
            elements = layer["steps"] * layer["batch"] * width * layer["directions"]
            ops.append(
                (DROPOUT, {"flops": 0.0, "bytes": 3.0 * layer["element_bytes"] * elements, "gemm": ()})
            )
    if call == "backward":
        ops.reverse()
    return [(name, {**cost, "dispatches": 1 if index == 0 else 0}) for index, (name, cost) in enumerate(ops)]


def _reserve_elements(kind: str, layer: dict) -> int:
    """cuDNN's reserve space: every layer's and direction's gates and state at every timestep."""
    state = 2 if kind == "lstm" else 1
    per_layer = (
        layer["steps"] * layer["batch"] * layer["hidden"] * (GATES[kind] + state) * layer["directions"]
    )
    return int(per_layer * len(layer["inputs"]))


def _run(kind: str, found: tuple, record: Record, paused: Callable[[bool], None]):
    layer, data, hx, weights, call = found
    hx_list = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    tensors = [data, *hx_list, *weights]

    class _Layer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            paused(True)
            try:
                given_hx = list(inputs[1 : 1 + len(hx_list)])
                call_hx = given_hx if isinstance(hx, (list, tuple)) else given_hx[0]
                out = call(inputs[0], call_hx, list(inputs[1 + len(hx_list) :]))
                reserve = torch.empty(_reserve_elements(kind, layer), dtype=data.dtype, device=data.device)
            finally:
                paused(False)
            ctx.save_for_backward(inputs[0], *given_hx, out[0], reserve)  # as _cudnn_rnn keeps them
            ctx.inputs = [(t.shape, t.dtype, t.device) for t in inputs]
            for name, cost in _call_ops(kind, layer, "forward"):
                record(name, cost)
            return tuple(out)

        @staticmethod
        def backward(ctx, *grads):
            # cuDNN's backward of the data always (the weights' gradients need it), of the weights only when
            # one of them is trained (a frozen layer under a trained one skips that call)
            if not layer["train"]:
                raise UsageError(EVAL_BACKWARD.format(module=_MODULES[kind]))
            weights_trained = any(ctx.needs_input_grad[1 + len(hx_list) :])
            for cudnn_call in ("backward", "weights") if weights_trained else ("backward",):
                for name, cost in _call_ops(kind, layer, cudnn_call):
                    record(name, cost)
            paused(True)
            try:  # the gradients' shapes are what matters here, not their values
                return tuple(
                    torch.zeros(shape, dtype=dtype, device=device) if needed else None
                    for (shape, dtype, device), needed in zip(ctx.inputs, ctx.needs_input_grad, strict=True)
                )
            finally:
                paused(False)

    return _Layer.apply(*tensors)


@contextlib.contextmanager
def cudnn_rnns(record: Record, paused: Callable[[bool], None]) -> Iterator[None]:
    """Within the block, recurrent layers are counted as their cuDNN calls (the module's docstring)."""
    with _CudnnCalls(record, paused):
        yield
