"""What a GPU does with a training step that the step model has to assume: measured, not fitted.

Three measurements on this machine's CUDA GPU, printed and written as CSV:
- layouts: a zoo model's step (forward, loss, backward, optimizer; gpu_steps.measure) in each precision
  (fp32 with TF32 off, tf32, amp) in NCHW and in channels last, to see which precisions' convolutions pay
  a conversion between the two;
- kernels: how many kernels one step launches (torch.profiler, CUDA runtime launches) as a source's loop ran
  it: gradients zeroed to None or filled with zeros (PyTorch before 2.0), the model cast to half
  (model.half()) or autocast, the optimizer multi-tensor or parameter by parameter; and the host's wall time
  per launch of a small-batch step, synchronised every step;
- matrix rates: a large square product (8192^3) in each precision, the TFLOP/s its units reach.
Run (on a machine with a CUDA GPU): PYTHONPATH=. python bench/gpu_layouts.py [--out DIR]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_args import bench_parser, positive_float  # noqa: E402
from bench_args import write_csv as _write  # noqa: E402  (gpu_ops, gpu_convs import it here)
from gpu_steps import _set_precision, measure  # noqa: E402

from stash_core.zoo import build_model, loss_fn, synthetic_batch  # noqa: E402

LAYOUT_CONFIGS = [("resnet50", 128, ()), ("vgg16", 64, ())]
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
# (model, batch, input shape, how the step is written)
KERNEL_CONFIGS = [
    ("resnet50", 12, (), "fwd-bwd tf32 grads-none"),
    ("resnet50", 12, (), "fwd-bwd tf32 grads-zeroed"),
    ("resnet50", 12, (), "fwd-bwd half grads-zeroed"),
    ("resnet50", 12, (), "fwd-bwd amp grads-none"),
    ("resnet50", 12, (), "step tf32 sgd-foreach"),
    ("resnet50", 12, (), "step tf32 sgd-loop"),
    ("resnet50", 12, (), "step amp sgd-foreach"),
    ("bert_base", 8, (384,), "fwd-bwd tf32 grads-none"),
    ("bert_base", 8, (384,), "step tf32 adamw-foreach"),
    ("bert_base", 8, (384,), "step tf32 adamw-loop"),
    ("bert_base", 8, (384,), "step amp adamw-foreach"),
]


def _step_fn(model: str, batch: int, shape: tuple, how: str, device: str = "cuda"):
    words = how.split()
    precision = words[1]
    _set_precision("tf32" if precision == "half" else precision)
    torch.backends.cudnn.benchmark = True
    net, info = build_model(model, input_shape=shape or None)
    half = torch.float16 if device == "cuda" else torch.bfloat16
    net = net.to(device)
    inputs, targets = synthetic_batch(info, batch, device)
    if precision == "half":
        net = net.to(half)
        if inputs.is_floating_point():
            inputs = inputs.to(half)
    optimizer = None
    if words[0] == "step":
        foreach = words[2].endswith("foreach")
        if words[2].startswith("adamw"):
            optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=foreach)
        else:
            optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, foreach=foreach)
    set_to_none = "grads-zeroed" not in how
    amp = precision == "amp"
    scaler = torch.amp.GradScaler(device, enabled=amp and device == "cuda")
    criterion = loss_fn(info)

    def step() -> None:
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        else:
            net.zero_grad(set_to_none=set_to_none)
        with torch.autocast(device, dtype=half, enabled=amp):
            out = net(inputs)
            loss = criterion(out.float() if precision == "half" else out, targets)
        scaler.scale(loss).backward()
        if optimizer is not None:
            scaler.step(optimizer)
            scaler.update()

    return step


def count_kernels(model: str, batch: int, shape: tuple, how: str) -> tuple[int, int, float]:
    """(kernel launches, device kernels, host wall seconds per step synchronised)."""
    step = _step_fn(model, batch, shape, how)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = prof.events()
    launches = sum(1 for e in events if e.name in LAUNCHES)
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    walls = []
    for _ in range(30):
        began = time.perf_counter()
        step()
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - began)
    return launches, kernels, statistics.median(walls)


def matrix_tflops(precision: str, size: int = 8192, repeats: int = 20) -> float:
    _set_precision("tf32" if precision == "tf32" else "fp32")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(repeats):
        a @ b
    end.record()
    end.synchronize()
    seconds = begin.elapsed_time(end) / 1000.0 / repeats
    return 2 * size**3 / seconds / 1e12


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--out", default=".", help="folder for the CSV files")
    parser.add_argument(
        "--budget-s", type=positive_float, default=1.5, help="timed seconds per layout configuration"
    )
    args = parser.parse_args()
    found = cuda_out(args.out)
    if found is None:
        return 2
    out, name = found
    rows = []
    for precision in ("fp32", "tf32", "fp16", "bf16"):
        rate = matrix_tflops(precision)
        rows.append([name, precision, f"{rate:.1f}"])
        print(f"matrix 8192^3 {precision}: {rate:.1f} TFLOP/s", flush=True)
    _write(out / "matrix.csv", ["gpu", "precision", "tflops"], rows)
    rows = []
    for model, batch, shape in LAYOUT_CONFIGS:
        for precision in ("fp32", "tf32", "amp"):
            for layout in ("nchw", "nhwc"):
                times = measure(model, batch, shape, precision, layout, args.budget_s)
                median = statistics.median(times)
                rows.append([name, model, batch, precision, layout, f"{median:.5f}", len(times)])
                print(f"layout {model} b{batch} {precision} {layout}: {median * 1e3:.2f} ms", flush=True)
                torch.cuda.empty_cache()
    _write(out / "layouts.csv", ["gpu", "model", "batch", "precision", "layout", "step_s", "steps"], rows)
    rows = []
    for model, batch, shape, how in KERNEL_CONFIGS:
        launches, kernels, wall_s = count_kernels(model, batch, shape, how)
        rows.append([name, model, batch, how, launches, kernels, f"{wall_s:.5f}"])
        print(f"kernels {model} b{batch} {how}: {launches} launches, {kernels} kernels, "
              f"{wall_s * 1e3:.2f} ms a synchronised step", flush=True)  # fmt: skip
        torch.cuda.empty_cache()
    _write(out / "kernels.csv", ["gpu", "model", "batch", "step", "launches", "kernels", "wall_s"], rows)
    return 0


def cuda_out(folder: str) -> tuple[Path, str] | None:
    """The CSV folder (made) and this machine's GPU name, said with torch's and cuDNN's versions; None (said
    on stderr) without a CUDA GPU."""
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to measure", file=sys.stderr)
        return None
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name()
    print(f"GPU {name!r}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}", flush=True)
    return out, name


if __name__ == "__main__":
    raise SystemExit(main())
