"""How fast single convolutions and normalisations run on this machine's CUDA GPU, by kind, precision and
memory format: what the step model (stash_core/decide/predict) assumes per operator class, checked one
operator at a time.

- convolutions at shapes from ResNet-50 and VGG-16 (3x3 stride 1, which cuDNN may run by Winograd's
  algorithm with fewer multiplications; 1x1; 3x3 stride 2; the 7x7 stem), forward and both gradients, with
  cudnn.benchmark on (as training scripts set it): seconds, TFLOP/s counted as direct convolution
  (3 x 2 N K C R S P Q), and the share of GPU time in kernels whose names say Winograd, FFT or a layout
  conversion;
- batch norm (training mode) and layer norm, forward and backward: seconds and GB/s counted as the step model
  counts their bytes (every tensor argument and result read or written once).
Precisions: fp32 (TF32 off), tf32, fp16 (half tensors), and for the norms amp (half input under autocast);
memory formats nchw and nhwc (channels last).
Run (on a machine with a CUDA GPU): PYTHONPATH=. python bench/gpu_convs.py [--out DIR]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_args import bench_parser  # noqa: E402
from gpu_layouts import _write, cuda_out  # noqa: E402
from gpu_ops import kernel_times, mean_seconds  # noqa: E402
from gpu_steps import _set_precision  # noqa: E402

# (name, batch, in channels, height = width, out channels, kernel, stride)
CONV_SHAPES = [
    ("vgg16 conv3 3x3", 64, 256, 56, 256, 3, 1),
    ("vgg16 conv4 3x3", 64, 512, 28, 512, 3, 1),
    ("resnet50 layer1 3x3", 128, 64, 56, 64, 3, 1),
    ("resnet50 layer3 3x3", 128, 256, 14, 256, 3, 1),
    ("resnet50 layer1 1x1 up", 128, 64, 56, 256, 1, 1),
    ("resnet50 layer1 1x1 down", 128, 256, 56, 64, 1, 1),
    ("resnet50 layer2 3x3 s2", 128, 128, 56, 128, 3, 2),
    ("resnet50 stem 7x7 s2", 128, 3, 224, 64, 7, 2),
]
NORM_SHAPES = [("batch_norm resnet50 layer1", (128, 256, 56, 56)), ("layer_norm bert_large", (8192, 1024))]
PRECISIONS = ("fp32", "tf32", "fp16")
FORMATS = ("nchw", "nhwc")
REPEATS = 10


def _kernel_shares(step) -> dict[str, float]:
    """Share of the GPU time of one call in Winograd, FFT and layout-conversion kernels, by their names."""
    totals: dict[str, float] = defaultdict(float)
    for kernel, seconds in kernel_times(step).items():
        name = kernel.lower()
        kind = "winograd" if "winograd" in name else "fft" if "fft" in name else "other"
        if "nchwtonhwc" in name or "nhwctonchw" in name or "transpose" in name:
            kind = "layout"
        totals[kind] += seconds
    whole = sum(totals.values()) or 1.0
    return {kind: totals[kind] / whole for kind in ("winograd", "fft", "layout")}


def _tensor(shape: tuple, dtype: torch.dtype, layout: str, grad: bool = True) -> torch.Tensor:
    tensor = torch.randn(shape, device="cuda", dtype=dtype)
    if layout == "nhwc" and tensor.dim() == 4:
        tensor = tensor.to(memory_format=torch.channels_last)
    return tensor.requires_grad_(grad)


def conv_step(
    batch: int, cin: int, size: int, cout: int, kernel: int, stride: int, precision: str, layout: str
):
    dtype = torch.float16 if precision == "fp16" else torch.float32
    x = _tensor((batch, cin, size, size), dtype, layout)
    w = _tensor((cout, cin, kernel, kernel), dtype, layout)
    out = F.conv2d(x, w, stride=stride, padding=kernel // 2)
    grad = torch.randn_like(out)

    def step() -> None:
        F.conv2d(x, w, stride=stride, padding=kernel // 2).backward(grad)

    flops = 3 * 2 * out.numel() * cin * kernel * kernel
    return step, flops


def norm_step(kind: str, shape: tuple, precision: str, layout: str):
    """precision "amp": half input under autocast, as a mixed-precision step gives it (autocast runs layer
    norm in float32; batch norm in the input's type)."""
    dtype = torch.float32 if precision == "fp32" else torch.float16
    x = _tensor(shape, dtype, layout)
    channels = shape[1] if kind.startswith("batch") else shape[-1]
    weight = torch.ones(channels, device="cuda", requires_grad=True)
    bias = torch.zeros(channels, device="cuda", requires_grad=True)
    if kind.startswith("batch"):
        mean, var = torch.zeros(channels, device="cuda"), torch.ones(channels, device="cuda")

        def forward() -> torch.Tensor:
            return F.batch_norm(x, mean, var, weight, bias, training=True)
    else:
        if precision == "fp16":
            weight = weight.detach().to(dtype).requires_grad_()
            bias = bias.detach().to(dtype).requires_grad_()

        def forward() -> torch.Tensor:
            return F.layer_norm(x, (channels,), weight, bias)

    with torch.autocast("cuda", dtype=torch.float16, enabled=precision == "amp"):
        grad = torch.randn_like(forward())

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.float16, enabled=precision == "amp"):
            result = forward()
        result.backward(grad)

    # as the step model counts it: forward reads x, writes y; backward reads x and dy, writes dx
    moved = 5 * x.numel() * x.element_size()
    return step, moved


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--out", default=".", help="folder for the CSV files")
    args = parser.parse_args()
    found = cuda_out(args.out)
    if found is None:
        return 2
    out, name = found
    torch.backends.cudnn.benchmark = True
    rows = []
    for shape_name, batch, cin, size, cout, kernel, stride in CONV_SHAPES:
        for precision in PRECISIONS:
            _set_precision(precision)
            for layout in FORMATS:
                step, flops = conv_step(batch, cin, size, cout, kernel, stride, precision, layout)
                seconds = mean_seconds(step, REPEATS)
                shares = _kernel_shares(step)
                tflops = flops / seconds / 1e12
                rows.append([name, shape_name, precision, layout, f"{seconds:.6f}", f"{tflops:.1f}",
                             *(f"{shares[kind]:.2f}" for kind in ("winograd", "fft", "layout"))])  # fmt: skip
                print(f"{shape_name:26s} {precision} {layout}: {seconds * 1e3:7.3f} ms {tflops:6.1f} TFLOP/s "
                      f"winograd {shares['winograd']:.2f} fft {shares['fft']:.2f} "
                      f"layout {shares['layout']:.2f}", flush=True)  # fmt: skip
                torch.cuda.empty_cache()
    header = ["gpu", "shape", "precision", "layout", "seconds", "tflops", "winograd", "fft", "layout_share"]
    _write(out / "convolutions.csv", header, rows)
    rows = []
    for shape_name, shape in NORM_SHAPES:
        for precision in ("fp32", "fp16", "amp"):
            for layout in FORMATS if len(shape) == 4 else ("-",):
                step, moved = norm_step(shape_name, shape, precision, layout)
                seconds = mean_seconds(step, REPEATS)
                rows.append(
                    [name, shape_name, precision, layout, f"{seconds:.6f}", f"{moved / seconds / 1e9:.0f}"]
                )
                print(f"{shape_name:26s} {precision} {layout}: {seconds * 1e3:7.3f} ms "
                      f"{moved / seconds / 1e9:6.0f} GB/s (5 passes)", flush=True)  # fmt: skip
    _write(out / "normalisation.csv", ["gpu", "shape", "precision", "layout", "seconds", "gb_per_s"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
