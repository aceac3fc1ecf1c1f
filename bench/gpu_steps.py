"""Training steps of zoo models measured on this machine's GPU, against the step model's prediction for it.

Each configuration (model, batch, input, precision, memory format) is built from the zoo, warmed up, then
timed step by step with CUDA events: forward, loss, backward and the optimizer step (SGD with momentum for
images, AdamW for token models, PyTorch's default multi-tensor implementations), on synthetic data made on
the GPU. Precisions: fp32 (TF32 off for matrix products and cuDNN), tf32 (on for both), amp (float16
autocast with a gradient scaler). The prediction is `stash predict`'s roofline path: the fitted step model of
validation_summary.json on the accelerator row the GPU's NVML name finds, with the zoo's fused attention, the
job's optimizer and its memory format; the held-out stated error of that path and batch regime is printed
beside it. Nothing is fitted to these measurements.
Run (on a machine with a CUDA GPU): PYTHONPATH=. python bench/gpu_steps.py [--quick] [--csv FILE]
"""

from __future__ import annotations

import csv
import statistics
import sys
import time

import torch
from bench_args import bench_parser, positive_float

from stash_core.zoo import build_model, loss_fn, make_optimizer, synthetic_batch

# (model, batch, input shape or (), precision, memory format)
CONFIGS = [
    ("resnet50", 32, (), "amp", "nchw"),
    ("resnet50", 128, (), "amp", "nchw"),
    ("resnet50", 256, (), "amp", "nchw"),
    ("resnet50", 256, (), "amp", "nhwc"),
    ("resnet50", 128, (), "tf32", "nchw"),
    ("resnet50", 128, (), "fp32", "nchw"),
    ("resnet18", 16, (3, 32, 32), "fp32", "nchw"),
    ("vgg16", 64, (), "amp", "nchw"),
    ("bert_base", 32, (384,), "amp", ""),
    ("bert_base", 32, (384,), "tf32", ""),
    ("bert_large", 8, (512,), "fp32", ""),
    ("bert_large", 16, (512,), "amp", ""),
    ("gpt2", 8, (1024,), "amp", ""),
    ("gpt2_large", 4, (1024,), "fp32", ""),
    ("tinyllama_1b", 4, (1024,), "amp", ""),
]
QUICK = {0, 2, 8, 12}  # indices run with --quick
# Configurations no fit or choice has seen on any GPU Stash measured, written down with their predictions
# (docs/measurements/h200-unseen-predicted-2026-11-30.csv) before they were first timed: a held-out check of
# the step model on configurations, though not on a GPU it never saw.
UNSEEN_CONFIGS = [
    ("resnet18", 64, (3, 32, 32), "fp32", "nchw"),
    ("resnet34", 64, (3, 32, 32), "fp32", "nchw"),
    ("resnet101", 64, (3, 32, 32), "fp32", "nchw"),
    ("resnet101", 128, (), "amp", "nchw"),
    ("resnet152", 64, (), "amp", "nhwc"),
    ("resnet34", 256, (), "tf32", "nchw"),
    ("mobilenet_v2", 128, (), "amp", "nchw"),
    ("vgg11", 64, (), "tf32", "nchw"),
    ("alexnet", 256, (), "amp", "nchw"),
    ("shufflenet_v2", 128, (), "amp", "nchw"),
    ("squeezenet1_0", 128, (), "fp32", "nchw"),
    ("bert_base", 8, (128,), "amp", ""),
    ("bert_large", 16, (384,), "tf32", ""),
    ("gpt2_medium", 4, (1024,), "amp", ""),
    ("gpt2", 16, (512,), "tf32", ""),
]
# A second such set, written down with its predictions (docs/measurements/h200-fresh-predicted-2026-12-04.csv)
# before any was timed, after every change the step model had by then: models, batches, input sizes,
# precisions and memory formats that neither set above nor any fit holds.
FRESH_CONFIGS = [
    ("resnet18", 256, (), "amp", "nhwc"),
    ("resnet34", 128, (), "amp", "nchw"),
    ("resnet152", 32, (), "tf32", "nchw"),
    ("resnet50", 64, (3, 128, 128), "amp", "nhwc"),
    ("vgg19", 32, (), "amp", "nhwc"),
    ("vgg13", 64, (), "fp32", "nchw"),
    ("mobilenet_v2", 256, (), "tf32", "nhwc"),
    ("shufflenet_v2_x0_5", 256, (), "amp", "nchw"),
    ("alexnet", 128, (), "tf32", "nchw"),
    ("bert_base", 64, (128,), "tf32", ""),
    ("bert_large", 4, (512,), "amp", ""),
    ("gpt2", 4, (1024,), "fp32", ""),
    ("gpt2_medium", 8, (512,), "tf32", ""),
    ("gpt2_xl", 1, (1024,), "amp", ""),
    ("tinyllama_1b", 2, (2048,), "amp", ""),
]


def _set_precision(precision: str) -> None:
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def measure(
    model: str, batch: int, shape: tuple, precision: str, layout: str, budget_s: float, device: str = "cuda"
) -> list[float]:
    """Seconds of each timed step (after warm-up). device "cpu" only checks that the bench runs."""
    _set_precision(precision)
    torch.backends.cudnn.benchmark = True
    net, info = build_model(model, input_shape=shape or None)
    net = net.to(device)
    inputs, targets = synthetic_batch(info, batch, device)
    if layout == "nhwc":
        net = net.to(memory_format=torch.channels_last)
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    optimizer = make_optimizer(net, info.kind)
    amp = precision == "amp"
    scaler = torch.amp.GradScaler(device, enabled=amp and device == "cuda")
    criterion = loss_fn(info)
    half = torch.float16 if device == "cuda" else torch.bfloat16

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=half, enabled=amp):
            loss = criterion(net(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    for _ in range(3):
        step()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - started < budget_s and len(times) < 200):
        times.append(_timed(step, device))
    return times


def _timed(step, device: str) -> float:
    """Seconds of one step: CUDA events on the GPU (the step's own kernels), the wall clock on the CPU."""
    if device != "cuda":
        began = time.perf_counter()
        step()
        return time.perf_counter() - began
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    step()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1000.0


def add_target_args(parser) -> None:
    """--predict-only and --cpu-as, which target_gpu reads."""
    parser.add_argument(
        "--predict-only", action="store_true", help="print the predictions for --cpu-as's GPU, time nothing"
    )
    parser.add_argument(
        "--cpu-as", help="run on the CPU as if it were this GPU (checks the bench, measures nothing)"
    )


def target_gpu(parser, args):
    """(device, accelerator row) the bench times on and predicts for, printed; None (said in one line) where
    there is no CUDA GPU to time or no accelerator row to predict for."""
    from stash_core.catalog.accelerators import find_accelerator

    if args.predict_only and not args.cpu_as:
        parser.error("--predict-only needs --cpu-as GPU (the GPU whose predictions to print)")
    device = "cpu" if args.cpu_as else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to measure", file=sys.stderr)
        return None
    name = args.cpu_as or torch.cuda.get_device_name()
    accelerator = find_accelerator(name)
    if accelerator is None:
        print(f"{name!r} has no row in the accelerator table: no prediction to compare", file=sys.stderr)
        return None
    cudnn = torch.backends.cudnn.version() if device == "cuda" else None
    print(f"GPU {name!r} -> accelerator row {accelerator.name!r}; torch {torch.__version__}, cuDNN {cudnn}")
    return device, accelerator


def main() -> int:
    # the predictor (and the database it reads through) only where a prediction is compared: measure() and
    # the other benches that reuse it need torch and the zoo alone
    from stash_core.decide.predict.calibration import Point, predicted_s
    from stash_core.decide.predict.stated_error import fitted_params, stated_error

    parser = bench_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="four configurations only")
    parser.add_argument(
        "--budget-s", type=positive_float, default=2.0, help="timed seconds per configuration"
    )
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    parser.add_argument(
        "--set", choices=["fitted", "unseen", "fresh"], default="fitted",
        help="fitted: the 15 configurations the step model was fitted on; unseen, fresh: 15 it never saw",
    )  # fmt: skip
    add_target_args(parser)
    args = parser.parse_args()
    target = target_gpu(parser, args)
    if target is None:
        return 2
    device, accelerator = target
    params = fitted_params()
    header = ["model", "batch", "input", "precision", "layout", "measured_step_s", "spread_pct", "steps",
              "predicted_step_s", "error_pct", "stated_error_pct"]  # fmt: skip
    rows = []
    print(" ".join(f"{h:>16}" for h in header))
    configs = {"unseen": UNSEEN_CONFIGS, "fresh": FRESH_CONFIGS}.get(args.set, CONFIGS)
    for index, (model, batch, shape, precision, layout) in enumerate(configs):
        if args.quick and index not in QUICK:
            continue
        point = Point(model, batch, accelerator.name, precision, 1.0, "device", input_shape=tuple(shape),
                      memory_format=layout)  # fmt: skip
        predicted = predicted_s(point, params)
        stated = stated_error("roofline", batch, accelerator.name).error
        row = [model, batch, "x".join(map(str, shape)) or "default", precision, layout or "-", "-", "-", 0,
               f"{predicted:.5f}", "-", f"{100 * stated:.1f}" if stated is not None else "-"]  # fmt: skip
        if not args.predict_only:
            try:
                times = measure(model, batch, shape, precision, layout, args.budget_s, device)
                if device == "cuda":
                    torch.cuda.empty_cache()
            except torch.OutOfMemoryError:  # a configuration bigger than this GPU: the others still run
                print(f"{model} batch {batch}: out of GPU memory, skipped")
                torch.cuda.empty_cache()
                continue
            measured = statistics.median(times)
            deciles = statistics.quantiles(times, n=10)
            spread = (deciles[-1] - deciles[0]) / measured  # p10 to p90
            error = measured / predicted - 1.0  # throughput error: predicted samples/s over measured less one
            row[5:8] = [f"{measured:.5f}", f"{100 * spread:.1f}", len(times)]
            row[9] = f"{100 * error:+.1f}"
        rows.append(row)
        print(" ".join(f"{str(cell):>16}" for cell in row), flush=True)
    errors = [abs(float(row[9])) for row in rows if row[9] != "-"]
    if errors:
        print(
            f"mean absolute throughput error {statistics.mean(errors):.1f}% over {len(errors)} configurations"
        )
        judged = [row for row in rows if row[9] != "-" and row[10] != "-"]
        covered = sum(abs(float(row[9])) <= float(row[10]) for row in judged)
        print(f"{covered} of {len(judged)} within the stated error")
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
