"""Recurrent layers (nn.LSTM, nn.GRU, nn.RNN) counted as the cuDNN calls a GPU runs (rnn.py). The meta trace
decomposed them into per-timestep operators, each dispatched from the host: a 2-layer LSTM of 1,024 units
over 64 timesteps at batch 32 was 4,742 kernels and predicted at 168 ms on a V100, host-bound, where cuDNN
makes one call a direction and its GEMMs take tens of milliseconds. The counting is checked against
DeepBench's measured cuDNN layers (rnn_validation.py), and a recurrent step states that check's error."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from stash_core.catalog.accelerators import find_accelerator
from stash_core.cli.main import main
from stash_core.decide.predict.rnn_costs import GEMM, layer_costs
from stash_core.decide.predict.rnn_validation import (
    check_all,
    load_rows,
    recurrent_error,
    summary,
    widened_for_recurrent,
)
from stash_core.decide.predict.roofline import compute_time
from stash_core.decide.predict.stated_error import StatedError, fitted_params
from stash_core.decide.predict.step_cost import step_cost
from stash_core.errors import UsageError

HIDDEN, STEPS, BATCH = 256, 16, 8


def _model_file(tmp_path, layer: str, name: str = "net") -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f"""
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = {layer}
                width = self.rnn.proj_size or self.rnn.hidden_size
                self.head = torch.nn.Linear(width * (2 if self.rnn.bidirectional else 1), 10)

            def forward(self, x):
                out, _ = self.rnn(x)
                return self.head(out[:, -1])

        def make():
            return Net()
    """))  # fmt: skip
    return f"{path}:make"


def _lstm(tmp_path, **extra) -> str:
    args = "".join(f", {key}={value}" for key, value in extra.items())
    return _model_file(tmp_path, f"torch.nn.LSTM({HIDDEN}, {HIDDEN}, 2, batch_first=True{args})")


def test_an_lstm_is_counted_as_its_cudnn_kernels_and_two_host_calls(tmp_path):
    cost = step_cost(_lstm(tmp_path), BATCH, (STEPS, HIDDEN))
    rnn_ops = [op for op in cost.ops if op.name.startswith("stash.rnn")]
    assert cost.recurrent
    assert not [op for op in cost.ops if "sigmoid" in op.name or "tanh" in op.name]  # the gates' operators
    forward = [op for op in rnn_ops if op.phase == "forward"]
    backward = [op for op in rnn_ops if op.phase == "backward"]
    # per layer: the inputs' GEMM, then a GEMM and a gates kernel per timestep
    assert sum(op.kernels for op in forward) == 2 * (1 + 2 * STEPS)
    # per layer: gates and GEMM per timestep, the inputs' GEMM, two weight GEMMs and the bias reduction
    assert sum(op.kernels for op in backward) == 2 * (2 * STEPS + 4)
    # the forward one call; the backward two: the data's gradients, then the weights'
    assert sum(op.host_dispatches for op in forward) == 1 and sum(op.host_dispatches for op in backward) == 2
    gates = 4 * HIDDEN
    expected = 2 * (2 * STEPS * BATCH * gates * HIDDEN * 2)  # two layers; input and hidden products
    assert sum(op.flops for op in forward if op.name == GEMM) == pytest.approx(expected)
    assert sum(op.flops for op in backward if op.name == GEMM) == pytest.approx(2 * expected)


def test_it_counts_cudnn_reserve_space_and_trains_every_weight(tmp_path):
    cost = step_cost(_lstm(tmp_path), BATCH, (STEPS, HIDDEN))
    weights = 2 * (4 * HIDDEN * HIDDEN * 2 + 2 * 4 * HIDDEN)
    assert cost.trained_count == cost.param_count == weights + HIDDEN * 10 + 10
    reserve = 2 * STEPS * BATCH * HIDDEN * (4 + 2) * 4  # every layer's gates, h and c, FP32
    assert cost.activation_bytes >= reserve


def test_a_bidirectional_gru_with_dropout_reads_both_directions_in_its_second_layer(tmp_path):
    model = _model_file(
        tmp_path, f"torch.nn.GRU({HIDDEN}, {HIDDEN}, 2, batch_first=True, bidirectional=True, dropout=0.1)"
    )
    cost = step_cost(model, BATCH, (STEPS, HIDDEN))
    gemms = [op for op in cost.ops if op.name == GEMM and op.phase == "forward" and op.kernels == 1]
    assert len(gemms) == 4  # the inputs' GEMM of each layer and direction
    first, second = 2 * STEPS * BATCH * 3 * HIDDEN * HIDDEN, 2 * STEPS * BATCH * 3 * HIDDEN * 2 * HIDDEN
    assert sorted(op.flops for op in gemms) == pytest.approx([first, first, second, second])
    assert [op for op in cost.ops if op.name == "stash.rnn_dropout"]
    assert sum(op.host_dispatches for op in cost.ops if op.name.startswith("stash.rnn")) == 3


def test_a_frozen_recurrent_layer_makes_no_weight_gradient_call(tmp_path):
    """Its weights frozen under a trained layer, PyTorch skips cuDNN's weight-gradient call: counted, it was
    half the backward's products."""
    path = tmp_path / "frozen.py"
    path.write_text(textwrap.dedent(f"""
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Linear({HIDDEN}, {HIDDEN})
                self.rnn = torch.nn.LSTM({HIDDEN}, {HIDDEN}, batch_first=True).requires_grad_(False)
                self.head = torch.nn.Linear({HIDDEN}, 10)

            def forward(self, x):
                out, _ = self.rnn(self.embed(x))
                return self.head(out[:, -1])

        def make():
            return Net()
    """))  # fmt: skip
    frozen = step_cost(f"{path}:make", BATCH, (STEPS, HIDDEN))
    backward = [op for op in frozen.ops if op.name.startswith("stash.rnn") and op.phase == "backward"]
    assert sum(op.host_dispatches for op in backward) == 1
    assert not [op for op in backward if op.name == "stash.rnn_bias_sum"]
    forward_flops = sum(op.flops for op in frozen.ops if op.name == GEMM and op.phase == "forward")
    assert sum(op.flops for op in backward if op.name == GEMM) == pytest.approx(forward_flops)


def test_a_projected_lstm_multiplies_the_projected_state_and_adds_the_projection(tmp_path):
    projection = 64
    cost = step_cost(_lstm(tmp_path, proj_size=projection), BATCH, (STEPS, HIDDEN))
    assert cost.recurrent and not any("sigmoid" in op.name for op in cost.ops)
    rows, gates = STEPS * BATCH, 4 * HIDDEN
    first = 2 * rows * gates * (HIDDEN + projection) + 2 * rows * projection * HIDDEN  # inputs, state, W_hr
    second = 2 * rows * gates * (projection + projection) + 2 * rows * projection * HIDDEN  # P-wide input
    forward = [op for op in cost.ops if op.name == GEMM and op.phase == "forward"]
    assert sum(op.flops for op in forward) == pytest.approx(first + second)
    backward = [op for op in cost.ops if op.name == GEMM and op.phase == "backward"]
    assert sum(op.flops for op in backward) == pytest.approx(2 * (first + second))
    assert cost.param_count == cost.trained_count  # W_hr is trained too


def test_a_projected_lstm_s_dropout_is_counted_at_the_projected_width(tmp_path):
    projection = 64
    cost = step_cost(_lstm(tmp_path, proj_size=projection, dropout=0.5), BATCH, (STEPS, HIDDEN))
    dropout = [op for op in cost.ops if op.name == "stash.rnn_dropout"]
    assert len(dropout) == 2  # one each way, between the two layers
    assert [op.bytes for op in dropout] == pytest.approx([3 * 4 * STEPS * BATCH * projection] * 2)


def test_a_gru_s_bias_gradient_sums_b_hn_apart(tmp_path):
    cost = step_cost(_model_file(tmp_path, f"torch.nn.GRU({HIDDEN}, {HIDDEN}, batch_first=True)"), BATCH,
                     (STEPS, HIDDEN))  # fmt: skip
    sums = [op for op in cost.ops if op.name == "stash.rnn_bias_sum"]
    assert [op.flops for op in sums] == pytest.approx([STEPS * BATCH * (3 * HIDDEN + HIDDEN)])
    lstm = layer_costs("lstm", STEPS, BATCH, HIDDEN, HIDDEN, 4.0)["weights"][-1][1]
    assert lstm["flops"] == pytest.approx(STEPS * BATCH * 4 * HIDDEN)  # an LSTM's four biases sum alike


def _eval_lstm(tmp_path, embed_trained: bool) -> str:
    path = tmp_path / "eval_lstm.py"
    path.write_text(textwrap.dedent(f"""
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Linear({HIDDEN}, {HIDDEN}).requires_grad_({embed_trained})
                self.rnn = torch.nn.LSTM({HIDDEN}, {HIDDEN}, batch_first=True).requires_grad_(False).eval()
                self.head = torch.nn.Linear({HIDDEN}, 10)

            def train(self, mode=True):  # a frozen encoder kept in eval mode
                super().train(mode)
                self.rnn.eval()
                return self

            def forward(self, x):
                out, _ = self.rnn(self.embed(x))
                return self.head(out[:, -1])

        def make():
            return Net()
    """))  # fmt: skip
    return f"{path}:make"


def test_a_layer_in_eval_mode_that_the_step_trains_through_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"nn.LSTM in eval mode.*cudnn RNN backward can only be called"):
        step_cost(_eval_lstm(tmp_path, embed_trained=True), BATCH, (STEPS, HIDDEN))
    # frozen with everything before it, the layer has no backward, which cuDNN can then skip
    cost = step_cost(_eval_lstm(tmp_path, embed_trained=False), BATCH, (STEPS, HIDDEN))
    assert not [op for op in cost.ops if op.name.startswith("stash.rnn") and op.phase == "backward"]


def test_a_model_its_factory_returns_in_eval_mode_is_counted_as_trained(tmp_path):
    """The worker trains what the factory returns in train mode (a loaded checkpoint comes in eval mode), so the
    count does too: it was refused as a layer cuDNN cannot train."""
    model = _lstm(tmp_path, dropout=0.5)
    path, factory = model.rsplit(":", 1)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n\ndef make_eval():\n    return make().eval()\n")
    cost = step_cost(f"{path}:make_eval", BATCH, (STEPS, HIDDEN))
    assert [op for op in cost.ops if op.name == "stash.rnn_dropout"]  # dropout between the layers, as trained


def test_the_eval_refusal_is_said_as_it_is_when_the_model_is_counted_on_the_cpu(tmp_path):
    path = tmp_path / "real_tensors.py"
    path.write_text(textwrap.dedent(f"""
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Linear({HIDDEN}, {HIDDEN})
                self.rnn = torch.nn.LSTM({HIDDEN}, {HIDDEN}, batch_first=True).requires_grad_(False).eval()
                self.head = torch.nn.Linear({HIDDEN}, 10)

            def train(self, mode=True):
                super().train(mode)
                self.rnn.eval()
                return self

            def forward(self, x):
                if x.abs().sum().item() < 0:  # a value: the meta device has none, so it runs on the CPU
                    x = -x
                out, _ = self.rnn(self.embed(x))
                return self.head(out[:, -1])

        def make():
            return Net()
    """))  # fmt: skip
    with pytest.raises(UsageError) as refused:
        step_cost(f"{path}:make", BATCH, (STEPS, HIDDEN))
    assert str(refused.value).startswith("the model trains through an nn.LSTM in eval mode")


def test_a_packed_sequence_is_counted_at_its_own_rows(tmp_path):
    path = tmp_path / "packed.py"
    path.write_text(textwrap.dedent(f"""
        import torch
        from torch.nn.utils.rnn import pack_padded_sequence

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = torch.nn.LSTM({HIDDEN}, {HIDDEN}, batch_first=True)
                self.head = torch.nn.Linear({HIDDEN}, 10)

            def forward(self, x):
                lengths = torch.linspace(x.shape[1], 1, x.shape[0]).long()  # longest first
                _, (h, _) = self.rnn(pack_padded_sequence(x, lengths, batch_first=True))
                return self.head(h[-1])

        def make():
            return Net()
    """))  # fmt: skip
    packed = step_cost(f"{path}:make", BATCH, (STEPS, HIDDEN))
    assert packed.recurrent
    rows = sum(int(length) for length in torch.linspace(STEPS, 1, BATCH).long())
    gemms = [op for op in packed.ops if op.name == GEMM and op.phase == "forward"]
    assert sum(op.flops for op in gemms) == pytest.approx(2 * 2 * rows * 4 * HIDDEN * HIDDEN)
    assert sum(op.kernels for op in gemms) == 1 + STEPS  # the longest sequence's timesteps


def test_the_step_is_no_longer_host_bound_on_per_timestep_kernels(tmp_path):
    cost = step_cost(_model_file(tmp_path, "torch.nn.LSTM(1024, 1024, 2, batch_first=True)"), 32, (64, 1024))
    compute = compute_time(cost, find_accelerator("V100"), "fp32", fitted_params())
    assert compute.host_s < compute.gpu_s
    assert compute.kernels < 50  # the host's calls: the LSTM's two, the head's and the optimizer's


def test_layer_costs_in_skip_input_mode_leave_out_the_input_matrix():
    full = layer_costs("gru", 10, 4, 32, 64, 4.0)
    skipped = layer_costs("gru", 10, 4, 32, 64, 4.0, skip_input=True)
    assert len(full["forward"]) - len(skipped["forward"]) == 1
    assert len(full["backward"]) - len(skipped["backward"]) == 1
    assert len(full["weights"]) - len(skipped["weights"]) == 1
    inference = layer_costs("gru", 10, 4, 32, 64, 4.0, training=False)  # DeepBench's forward: no gates kept
    assert inference["forward"][-1][1]["bytes"] == full["forward"][-1][1]["bytes"] - 4.0 * 4 * 64 * 3 * 10
    recurrent = [cost for name, cost in skipped["forward"] if name == GEMM]
    assert recurrent[0]["flops"] == 2 * 4 * 3 * 64 * 64 * 10 and recurrent[0]["kernels"] == 10


def test_deepbench_layers_are_loaded_and_predicted():
    rows = load_rows()
    assert len(rows) == 159
    assert {(row.gpu.split()[0], row.precision) for row in rows} == {("V100", "fp32"), ("V100", "amp"),
                                                                      ("P100", "fp32")}  # fmt: skip
    assert all(row.forward_ms > 0 and row.backward_ms > 0 for row in rows)
    checked = check_all(fitted_params(), rows[:12])
    assert all(item.predicted["forward"] > 0 and item.predicted["backward"] > 0 for item in checked)
    (group,) = summary(checked, key=lambda item: "all")
    assert group["rows"] == 12 and 0 <= group["within_25"] <= 1


def test_a_recurrent_prediction_states_the_deepbench_error(tmp_path, capsys):
    error = recurrent_error()
    assert 0 < error < 10
    narrow = StatedError(0.1, True, "mid")
    widened = widened_for_recurrent(narrow)
    assert widened.error == error and "DeepBench" in widened.note
    wide = StatedError(error + 1, True, "mid")
    assert widened_for_recurrent(wide) is wide
    unstated = StatedError(None, False, "mid", "no held-out validation of this path")
    assert widened_for_recurrent(unstated) is unstated  # no figure made up where the path has none
    unvalidated = widened_for_recurrent(StatedError(0.1, False, "mid", "unvalidated: no published figure"))
    assert unvalidated.note.startswith("unvalidated") and "DeepBench" in unvalidated.note
    model = _lstm(tmp_path)
    rc = main(["predict", "--model", model, "--input-shape", f"{STEPS},{HIDDEN}", "--batch-size", str(BATCH),
               "--instances", "p3.2xlarge", "--format", "json"])  # fmt: skip
    assert rc == 0
    row = json.loads(capsys.readouterr().out)["predictions"][0]
    assert row["expected_error"] == pytest.approx(max(error, row["expected_error"]))
    assert any("DeepBench" in note for note in row["notes"])


@pytest.mark.parametrize(
    ("factory", "shape"), [("lstm", "64,1024"), ("gru", "64,1024"), ("text_lstm", "128")]
)
def test_the_recurrent_example_models_are_predicted_as_their_docstring_says(factory, shape, capsys):
    from support import REPO

    model = f"{REPO / 'examples' / 'models' / 'recurrent.py'}:{factory}"
    rc = main(["predict", "--model", model, "--input-shape", shape, "--batch-size", "16",
               "--instances", "p4d.24xlarge", "--format", "json"])  # fmt: skip
    assert rc == 0
    row = json.loads(capsys.readouterr().out)["predictions"][0]
    assert row["step_s"] > 0 and any("DeepBench" in note for note in row["notes"])
