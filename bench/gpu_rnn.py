"""Recurrent layers and recurrent training steps on this machine's GPU, against the step model's counting of
them as cuDNN calls (stash_core/decide/predict/rnn.py, rnn_costs.py). Until this bench, the counting was
checked only on DeepBench's V100 and P100 layers (bench/rnn_kernels.py); nothing here is fitted.

- layers: DeepBench's 53 training shapes (one unidirectional layer of H units over inputs of width H, batch N,
  T timesteps; kernel_data/deepbench_rnn.csv) as PyTorch runs them: nn.LSTM, nn.GRU or nn.RNN (relu),
  time-major, with the input matrix (PyTorch has no skip-input mode). Precisions: fp32 (TF32 off), tf32 and
  fp16 (the module and its input in half precision, what autocast hands cuDNN; the step model's "amp").
  Timed with CUDA events, the median of at least 5 calls after 2 warm-ups: the inference forward (the layer in
  eval mode, as DeepBench times it), the training forward (autograd recording, cuDNN's reserve space) and the
  backward (data and weights).
  Predicted: rnn_validation.layer_ms with the input matrix, for each forward.
- steps: examples/models/recurrent.py's models trained as bench/gpu_steps.py trains zoo models (autocast
  with a gradient scaler for amp), against `stash predict`'s roofline prediction and stated error (widened for
  recurrent layers).

Errors: a layer's is predicted time over measured less one (+ is predicted slower), as bench/rnn_kernels.py
gives it; a step's is measured time over predicted less one (+ is predicted faster), as bench/gpu_steps.py.

    PYTHONPATH=. python bench/gpu_rnn.py [--out DIR] [--quick]          # on a machine with a CUDA GPU
    PYTHONPATH=. python bench/gpu_rnn.py --predict-only --cpu-as "NVIDIA H200" --out DIR
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_args import bench_parser, positive_float, write_csv  # noqa: E402
from gpu_steps import _set_precision, add_target_args, measure, target_gpu  # noqa: E402

from stash_core.decide.predict.rnn_validation import layer_ms, load_rows  # noqa: E402

PRECISIONS = ("fp32", "tf32", "amp")
MODULES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_relu": torch.nn.RNN}
RECURRENT = "examples/models/recurrent.py"
# (factory, batch, input shape, precision): feature sequences of 64 steps of 1024, and 128 token ids
STEP_CONFIGS = [
    (f"{RECURRENT}:{factory}", batch, shape, precision)
    for factory, batch, shape in (
        ("lstm", 32, (64, 1024)),
        ("gru", 32, (64, 1024)),
        ("text_lstm", 64, (128,)),
    )
    for precision in PRECISIONS
]
QUICK_SHAPES = {("lstm", 1024, 32, 25), ("gru", 2048, 32, 375), ("rnn_relu", 2048, 32, 50)}
LAYER_HEADER = ["kind", "hidden", "batch", "steps", "precision", "inference_ms", "forward_ms", "backward_ms",
                "predicted_inference_ms", "predicted_forward_ms", "predicted_backward_ms",
                "inference_error_pct", "forward_error_pct", "backward_error_pct",
                "layer_error_pct"]  # fmt: skip
STEP_HEADER = ["model", "batch", "input", "precision", "measured_step_s", "spread_pct", "steps",
               "predicted_step_s", "error_pct", "stated_error_pct"]  # fmt: skip


def layer_shapes() -> list[tuple[str, int, int, int]]:
    """DeepBench's training shapes: (kind, hidden, batch, timesteps), each once."""
    return sorted({(row.kind, row.hidden, row.batch, row.steps) for row in load_rows()})


def time_layer(kind: str, hidden: int, batch: int, steps: int, precision: str, budget_s: float, device: str):
    """Median milliseconds of the inference forward, the training forward and the backward."""
    _set_precision(precision)
    dtype = torch.float16 if precision == "amp" else torch.float32
    layer_kwargs = {"nonlinearity": "relu"} if kind == "rnn_relu" else {}
    layer = MODULES[kind](hidden, hidden, 1, **layer_kwargs).to(device=device, dtype=dtype)
    inputs = torch.randn(steps, batch, hidden, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(steps, batch, hidden, device=device, dtype=dtype)
    runs: dict[str, list[float]] = {"inference": [], "forward": [], "backward": []}

    def once() -> None:
        layer.zero_grad(set_to_none=True)
        inputs.grad = None
        layer.eval()  # cuDNN's inference forward (no reserve space), as DeepBench times it: not no_grad alone
        with torch.no_grad():
            runs["inference"].append(_elapsed_ms(lambda: layer(inputs), device))
        layer.train()
        held = {}
        runs["forward"].append(_elapsed_ms(lambda: held.setdefault("out", layer(inputs)[0]), device))
        runs["backward"].append(_elapsed_ms(lambda: held["out"].backward(grad), device))

    for _ in range(2):
        once()
    for values in runs.values():
        values.clear()
    while len(runs["forward"]) < 5 or (
        sum(runs["inference"]) + sum(runs["forward"]) + sum(runs["backward"]) < 1e3 * budget_s
        and len(runs["forward"]) < 50
    ):
        once()
    return {phase: statistics.median(values) for phase, values in runs.items()}


def _attempt(timed, *args):
    """timed(*args), or None (said in one line) when the GPU refuses it: out of memory, or a shape cuDNN does
    not take; the other rows still run, and the memory is freed once the error is gone."""
    try:
        return timed(*args)
    except RuntimeError as exc:
        message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    print(f"failed: {message}")
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return None


def _elapsed_ms(call, device: str) -> float:
    if device != "cuda":
        import time

        began = time.perf_counter()
        call()
        return 1e3 * (time.perf_counter() - began)
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    call()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end)


def predicted_layer(shape: tuple[str, int, int, int], accelerator: str, precision: str, params) -> dict:
    kind, hidden, batch, steps = shape
    inference = layer_ms(kind, hidden, batch, steps, accelerator, precision, params, skip_input=False)
    training = layer_ms(
        kind, hidden, batch, steps, accelerator, precision, params, skip_input=False, training=True
    )
    return {
        "inference": inference["forward"],
        "forward": training["forward"],
        "backward": training["backward"],
    }


def _pct(predicted: float, measured: float) -> str:
    return f"{100 * (predicted / measured - 1):+.1f}"


def layer_rows(args, accelerator: str, params, device: str) -> list[list]:
    rows = []
    print(" ".join(f"{h:>13}" for h in LAYER_HEADER[:5] + LAYER_HEADER[11:]))
    for shape in layer_shapes():
        if args.quick and shape not in QUICK_SHAPES:
            continue
        for precision in PRECISIONS:
            predicted = predicted_layer(shape, accelerator, precision, params)
            row = [*shape, precision, "-", "-", "-"] + [f"{predicted[p]:.4f}" for p in predicted] + ["-"] * 4
            measured = (
                None if args.predict_only else _attempt(time_layer, *shape, precision, args.budget_s, device)
            )
            if measured:
                row[5:8] = [f"{measured[p]:.4f}" for p in ("inference", "forward", "backward")]
                row[11:14] = [_pct(predicted[p], measured[p]) for p in ("inference", "forward", "backward")]
                row[14] = _pct(
                    predicted["forward"] + predicted["backward"], measured["forward"] + measured["backward"]
                )
            elif not args.predict_only:
                print(f"{shape} {precision}: not timed, kept with its predictions")
            rows.append(row)
            print(" ".join(f"{str(cell):>13}" for cell in row[:5] + row[11:]), flush=True)
    return rows


def layer_summary(rows: list[list]) -> None:
    """Per precision and kind, and over all: mean absolute error of each phase and of the training layer, the
    median signed layer error, the share within 25% and within the stated recurrent error."""
    from stash_core.decide.predict.rnn_validation import recurrent_error

    stated = recurrent_error()
    timed = [row for row in rows if row[14] != "-"]
    groups: dict = {"all": timed}
    for row in timed:
        groups.setdefault(f"{row[4]} {row[0]}", []).append(row)
        groups.setdefault(f"{row[4]} (all kinds)", []).append(row)
    print(f"\n{'group':<22} {'rows':>5} {'inf MAE':>8} {'fwd MAE':>8} {'bwd MAE':>8} {'layer MAE':>9} "
          f"{'median':>7} {'<=25%':>6} {f'<={stated:.0%}':>6}")  # fmt: skip
    for name in sorted(groups, key=lambda g: (g == "all", g)):
        items = groups[name]
        if not items:
            continue
        columns = [[abs(float(row[col])) for row in items] for col in (11, 12, 13, 14)]
        signed = sorted(float(row[14]) for row in items)
        within = sum(value <= 25 for value in columns[3]) / len(items)
        covered = sum(value <= 100 * stated for value in columns[3]) / len(items)
        print(f"{name:<22} {len(items):>5} " + " ".join(f"{statistics.mean(c):>7.1f}%" for c in columns[:3])
              + f" {statistics.mean(columns[3]):>8.1f}% {signed[len(signed) // 2]:>+6.1f}% {within:>6.0%}"
              f" {covered:>6.0%}")  # fmt: skip


def step_rows(args, accelerator: str, params, device: str) -> list[list]:
    from stash_core.decide.predict.calibration import Point, predicted_s
    from stash_core.decide.predict.rnn_validation import widened_for_recurrent
    from stash_core.decide.predict.stated_error import stated_error

    rows = []
    print("\n" + " ".join(f"{h:>16}" for h in STEP_HEADER))
    for model, batch, shape, precision in STEP_CONFIGS:
        point = Point(model, batch, accelerator, precision, 1.0, "device", input_shape=shape)
        predicted = predicted_s(point, params)
        stated = widened_for_recurrent(stated_error("roofline", batch, accelerator)).error
        row = [model.split(":")[-1], batch, "x".join(map(str, shape)), precision, "-", "-", 0,
               f"{predicted:.5f}", "-", f"{100 * stated:.1f}" if stated is not None else "-"]  # fmt: skip
        timing = (model, batch, shape, precision, "", args.budget_s, device)
        times = None if args.predict_only else _attempt(measure, *timing)
        if times:
            measured = statistics.median(times)
            deciles = statistics.quantiles(times, n=10)
            row[4:7] = [f"{measured:.5f}", f"{100 * (deciles[-1] - deciles[0]) / measured:.1f}", len(times)]
            row[8] = f"{100 * (measured / predicted - 1):+.1f}"
        rows.append(row)
        print(" ".join(f"{str(cell):>16}" for cell in row), flush=True)
    judged = [row for row in rows if row[8] != "-"]
    if judged:
        errors = [abs(float(row[8])) for row in judged]
        covered = sum(abs(float(row[8])) <= float(row[9]) for row in judged if row[9] != "-")
        print(f"steps: mean absolute throughput error {statistics.mean(errors):.1f}% over {len(judged)}; "
              f"{covered} of {len(judged)} within the stated error")  # fmt: skip
    return rows


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    write_csv(path, header, rows)
    print(f"wrote {path}")


def main() -> int:
    from stash_core.decide.predict.stated_error import fitted_params

    parser = bench_parser(__doc__)
    parser.add_argument("--out", help="write layers.csv and steps.csv into this folder")
    parser.add_argument("--quick", action="store_true", help="three layer shapes only")
    parser.add_argument("--part", choices=["all", "layers", "steps"], default="all")
    parser.add_argument(
        "--budget-s",
        type=positive_float,
        default=0.3,
        help="timed seconds per layer or step (at least 5 runs)",
    )
    add_target_args(parser)
    args = parser.parse_args()
    target = target_gpu(parser, args)
    if target is None:
        return 2
    device, accelerator = target
    params = fitted_params()
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    if args.part in ("all", "layers"):
        rows = layer_rows(args, accelerator.name, params, device)
        layer_summary(rows)
        if out:
            _write(out / "layers.csv", LAYER_HEADER, rows)
    if args.part in ("all", "steps"):
        rows = step_rows(args, accelerator.name, params, device)
        if out:
            _write(out / "steps.csv", STEP_HEADER, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
