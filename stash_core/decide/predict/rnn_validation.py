"""The recurrent layers' counting (rnn.py) checked against cuDNN layers measured on GPUs: DeepBench's
training benchmark, which no fit of the step model ever saw.

Data (kernel_data/deepbench_rnn.csv, README.md there): Baidu DeepBench's results/train workbooks, one
unidirectional layer of H units, input width H in cuDNN's skip-input mode, batch N, T timesteps, timed by
rnn_bench.cu as the mean of 100 calls after a warm-up: the forward (an inference forward, which keeps no gates
for the backward), the backward with respect to the data and with respect to the weights. V100 (DGX-1, CUDA
10.1, cuDNN 7.6.2) in FP32 and in FP16 with tensor-core math (Stash's "amp": FP16 tensors on the FP16 matrix
units); P100 (cuDNN 6.0.21) in FP32.

Predicted: rnn_costs.layer_costs' operators (skip_input, an inference forward) through the step model's
roofline with the parameters fitted on the published end-to-end figures (fitted_params), each cuDNN call as
its GPU time and one host dispatch combined as the step model combines them. Nothing here is fitted.

A prediction of a step with recurrent layers states at least the 80th percentile of the layers' absolute
error here (widened_for_recurrent): the published figures behind the other stated errors hold no recurrent
model.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.features import features
from stash_core.decide.predict.rnn_costs import layer_costs
from stash_core.decide.predict.roofline import StepParams, op_seconds, soft_max
from stash_core.decide.predict.stated_error import STATED_QUANTILE, StatedError, fitted_params
from stash_core.decide.predict.step_types import StepCost, counted_op

DATA_FILE = Path(__file__).resolve().parent / "kernel_data" / "deepbench_rnn.csv"


@dataclass(frozen=True)
class RnnRow:
    gpu: str  # DeepBench's name
    accelerator: str  # the catalog's
    precision: str  # "fp32" | "amp"
    kind: str  # "lstm" | "gru" | "rnn_relu"
    hidden: int
    batch: int
    steps: int
    forward_ms: float
    backward_ms: float  # data + weights

    @property
    def label(self) -> str:
        return f"{self.kind} {self.hidden}x{self.batch}x{self.steps}"


def load_rows(path: Path = DATA_FILE) -> list[RnnRow]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [
            RnnRow(
                row["gpu"], row["accelerator"], row["precision"], row["kind"], int(row["hidden"]),
                int(row["batch"]), int(row["steps"]), float(row["forward_ms"]),
                float(row["backward_data_ms"]) + float(row["backward_weights_ms"]),
            )
            for row in csv.DictReader(handle)
        ]  # fmt: skip


def predicted_ms(row: RnnRow, params: StepParams) -> dict[str, float]:
    """Predicted milliseconds of the row's forward and backward as DeepBench times them (no input matrix, an
    inference forward)."""
    return layer_ms(row.kind, row.hidden, row.batch, row.steps, row.accelerator, row.precision, params)


def layer_ms(
    kind: str,
    hidden: int,
    batch: int,
    steps: int,
    accelerator_name: str,
    precision: str,
    params: StepParams,
    skip_input: bool = True,
    training: bool = False,
) -> dict[str, float]:
    """Predicted milliseconds of one unidirectional layer's forward and backward (its two calls), each cuDNN
    call its GPU time and one host dispatch combined, as the step model combines them. The defaults are
    DeepBench's (cuDNN's skip-input mode, an inference forward); PyTorch always has the input matrix."""
    accelerator = find_accelerator(accelerator_name)
    costs = layer_costs(kind, steps, batch, hidden, hidden, 4.0, skip_input=skip_input, training=training)
    modes = (" skip-input" if skip_input else "") + (" training" if training else "")
    label = f"{kind} {hidden}x{batch}x{steps}{modes}"
    call_ms = {}
    for call in ("forward", "backward", "weights"):
        ops = tuple(counted_op(name, cost, call) for name, cost in costs[call])
        step = StepCost(f"cudnn {label} {call}", batch, ops, 0, 0.0, "meta")
        feats = features(step, accelerator, precision, "none")
        gpu_s = float(op_seconds(feats, params).sum())
        call_ms[call] = 1e3 * float(soft_max(gpu_s, params["dispatch_s"]))
    return {"forward": call_ms["forward"], "backward": call_ms["backward"] + call_ms["weights"]}


@dataclass(frozen=True)
class Checked:
    row: RnnRow
    predicted: dict[str, float]

    def error(self, phase: str) -> float:
        """Signed relative error of the phase (predicted over measured, minus 1)."""
        measured = self.row.forward_ms if phase == "forward" else self.row.backward_ms
        return self.predicted[phase] / measured - 1.0

    @property
    def layer_error(self) -> float:
        """Signed relative error of the whole layer, forward and backward."""
        predicted = self.predicted["forward"] + self.predicted["backward"]
        return predicted / (self.row.forward_ms + self.row.backward_ms) - 1.0


def check_all(params: StepParams, rows: list[RnnRow] | None = None) -> list[Checked]:
    return [Checked(row, predicted_ms(row, params)) for row in (rows if rows is not None else load_rows())]


def summary(checked: list[Checked], key=lambda c: (c.row.gpu, c.row.precision)) -> list[dict]:
    """Per group: rows, mean absolute error of each phase and of the layer (forward + backward), the median
    signed error of the layer and the share of rows within 25%."""
    groups: dict = {}
    for item in checked:
        groups.setdefault(key(item), []).append(item)
    out = []
    for name, items in groups.items():
        layer = [c.layer_error for c in items]
        out.append({
            "group": name, "rows": len(items),
            "forward_mae": _mean([abs(c.error("forward")) for c in items]),
            "backward_mae": _mean([abs(c.error("backward")) for c in items]),
            "layer_mae": _mean([abs(e) for e in layer]),
            "layer_median": sorted(layer)[len(layer) // 2],
            "within_25": _mean([1.0 if abs(e) <= 0.25 else 0.0 for e in layer]),
        })  # fmt: skip
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


@functools.cache
def recurrent_error() -> float:
    """STATED_QUANTILE of the absolute error of the whole layer (forward and backward) over every DeepBench
    layer, with the shipped parameters."""
    errors = sorted(abs(checked.layer_error) for checked in check_all(fitted_params()))
    return errors[min(int(STATED_QUANTILE * len(errors)), len(errors) - 1)]


def widened_for_recurrent(stated: StatedError) -> StatedError:
    """A step with recurrent layers: its stated error no narrower than the counting's error on DeepBench (a
    path with no stated error keeps none; its notes are kept)."""
    error = recurrent_error()
    if stated.error is None or stated.error >= error:
        return stated
    note = (
        f"recurrent layers: counted as cuDNN runs them, {STATED_QUANTILE:.0%} of DeepBench's measured cuDNN "
        f"layers within {error:.0%} (bench/rnn_kernels.py), the stated error widened to that"
    )
    return StatedError(error, stated.validated, stated.regime, "; ".join(filter(None, (stated.note, note))))
