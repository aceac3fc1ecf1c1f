"""The operators cuDNN runs for one recurrent layer and direction (rnn.py counts a traced layer with them,
rnn_validation.py checks them against DeepBench's measured layers); no torch, so that a prediction needs none.
The kernels and their bytes are listed in rnn.py's docstring.
"""

from __future__ import annotations

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
GEMM = "stash.rnn_gemm"
GATES_OP = "stash.rnn_gates"
BIAS_SUM = "stash.rnn_bias_sum"  # a reduction (op_classes' words)
DROPOUT = "stash.rnn_dropout"


def layer_costs(
    kind: str,
    steps: int,
    batch: float,
    inputs: int,
    hidden: int,
    element_bytes: float,
    bias: bool = True,
    skip_input: bool = False,
    training: bool = True,
    projection: int = 0,
) -> dict[str, list[tuple[str, dict]]]:
    """The operators of one layer and direction, per cuDNN call ("forward"; "backward": the data's gradients;
    "weights": the weights' gradients), as (name, cost) with cost as step_trace's recorder takes it.
    skip_input: cuDNN's CUDNN_SKIP_INPUT mode (no input matrix: the input enters the gates as it is), as
    DeepBench times a layer; training: the forward keeps the gates for the backward (an inference forward,
    which DeepBench times, does not); projection: an LSTM's proj_size (0: none)."""
    gates = GATES[kind] * hidden
    state = 2 if kind == "lstm" else 1
    e = float(element_bytes)
    rows = float(steps * batch)
    forward: list[tuple[str, dict]] = []
    backward: list[tuple[str, dict]] = []
    weights: list[tuple[str, dict]] = []
    if not skip_input:
        forward.append(_gemm(rows, gates, inputs, e, 1))
    state_width = projection or hidden  # what the hidden matrix multiplies: the projected state, if any
    forward.append(_gemm(batch, gates, state_width, e, steps))
    if projection:
        forward.append(_gemm(batch, projection, hidden, e, steps))
    kept = GATES[kind] if training else 0  # the gates written to the reserve space for the backward
    gate_bytes = e * batch * hidden * steps
    forward.append((GATES_OP, {"flops": 0.0, "bytes": gate_bytes * (2 * GATES[kind] + kept + 2 * state),
                               "gemm": (), "kernels": steps}))  # fmt: skip
    backward.append((GATES_OP, {"flops": 0.0, "bytes": gate_bytes * (3 * GATES[kind] + 2 * state), "gemm": (),
                                "kernels": steps}))  # fmt: skip
    backward.append(_gemm(batch, state_width, gates, e, steps))
    if projection:
        backward.append(_gemm(batch, hidden, projection, e, steps))
        weights.append(_gemm(projection, hidden, rows, e, 1))  # the projection's gradient
    if not skip_input:
        backward.append(_gemm(rows, inputs, gates, e, 1))
        weights.append(_gemm(gates, inputs, rows, e, 1))  # the input matrix's gradient
    weights.append(_gemm(gates, state_width, rows, e, 1))  # the hidden matrix's gradient
    if bias:  # a GRU's b_hn has a gradient of its own (its gate is scaled by r): one more sum of H a row
        summed = rows * (gates + (hidden if kind == "gru" else 0))
        weights.append((BIAS_SUM, {"flops": summed, "bytes": e * summed, "gemm": (), "kernels": 1}))
    return {"forward": forward, "backward": backward, "weights": weights}


def _gemm(rows: float, cols: float, depth: float, e: float, kernels: int) -> tuple[str, dict]:
    """`kernels` products of (rows x depth) by (depth x cols), each read and written once."""
    flops = 2.0 * rows * cols * depth * kernels
    moved = e * (rows * depth + depth * cols + rows * cols) * kernels
    return GEMM, {"flops": flops, "bytes": moved, "gemm": (float(rows), float(cols), 1.0), "kernels": kernels}
