"""Where a training step's GPU time goes, by kernel, and how fast fused attention runs in each precision.

Two measurements on this machine's CUDA GPU, printed and written as CSV:
- attention: scaled_dot_product_attention forward and backward at BERT-base, BERT-large and GPT-2 shapes in
  fp32 (TF32 off), tf32 and fp16, with the backend PyTorch picks; seconds and TFLOP/s (forward 4 B H S^2 D,
  backward twice that);
- kernels: one ResNet-50 training step (batch 128, NCHW; fp32, tf32, amp) under torch.profiler, the GPU time
  of every kernel, summed by kernel name, so that convolutions, their layout conversions, normalisation and
  element-wise kernels can be told apart.
Run (on a machine with a CUDA GPU): PYTHONPATH=. python bench/gpu_ops.py [--out DIR]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_args import bench_parser  # noqa: E402
from gpu_layouts import _step_fn, _write, cuda_out  # noqa: E402
from gpu_steps import _set_precision  # noqa: E402

# (name, batch, heads, tokens, head size, causal)
ATTENTION_SHAPES = [
    ("bert_base", 32, 12, 384, 64, False),
    ("bert_large", 16, 16, 512, 64, False),
    ("gpt2", 8, 12, 1024, 64, True),
]


def attention_seconds(batch: int, heads: int, tokens: int, size: int, causal: bool, precision: str) -> float:
    _set_precision(precision)
    dtype = torch.float16 if precision == "fp16" else torch.float32
    shape = (batch, heads, tokens, size)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, heads, tokens, size, device="cuda", dtype=dtype)

    def step() -> None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(grad)

    return mean_seconds(step)


def mean_seconds(step, repeats: int = 10) -> float:
    """GPU seconds of one call of `step`, CUDA events over `repeats` calls after three to warm up."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(repeats):
        step()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1000.0 / repeats


def kernel_times(step) -> dict[str, float]:
    """GPU seconds of one call of `step`, by kernel name (torch.profiler)."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name] += event.time_range.elapsed_us() / 1e6
    return dict(totals)


def kernel_seconds(precision: str) -> dict[str, float]:
    """GPU seconds of one ResNet-50 step (batch 128, NCHW), by kernel name."""
    step = _step_fn("resnet50", 128, (), f"step {precision} sgd-foreach")
    for _ in range(3):
        step()
    return kernel_times(step)


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--out", default=".", help="folder for the CSV files")
    args = parser.parse_args()
    found = cuda_out(args.out)
    if found is None:
        return 2
    out, name = found
    rows = []
    for shape_name, batch, heads, tokens, size, causal in ATTENTION_SHAPES:
        for precision in ("fp32", "tf32", "fp16"):
            seconds = attention_seconds(batch, heads, tokens, size, causal, precision)
            flops = 3 * 4 * batch * heads * tokens**2 * size * (0.5 if causal else 1.0)
            rows.append([name, shape_name, precision, f"{seconds:.6f}", f"{flops / seconds / 1e12:.1f}"])
            print(f"attention {shape_name} {precision}: {seconds * 1e3:.2f} ms, "
                  f"{flops / seconds / 1e12:.1f} TFLOP/s", flush=True)  # fmt: skip
    _write(out / "attention.csv", ["gpu", "shape", "precision", "seconds", "tflops"], rows)
    rows = []
    for precision in ("fp32", "tf32", "amp"):
        totals = kernel_seconds(precision)
        total = sum(totals.values())
        print(f"resnet50 b128 {precision}: {total * 1e3:.2f} ms of kernels, {len(totals)} names", flush=True)
        largest_first = sorted(totals.items(), key=lambda item: -item[1])
        rows.extend([name, precision, f"{seconds:.6f}", kernel[:300]] for kernel, seconds in largest_first)
        for kernel, seconds in largest_first[:12]:
            print(f"  {seconds * 1e3:8.2f} ms  {kernel[:110]}", flush=True)
        torch.cuda.empty_cache()
    _write(out / "resnet50_kernels.csv", ["gpu", "precision", "seconds", "kernel"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
