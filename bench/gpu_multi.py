"""All-reduce bus bandwidth and data-parallel steps on this machine's GPUs (two or more), measured as a user
measures them, against what Stash predicts for the same GPUs in the catalog's instance of them (--instance,
default p5en.48xlarge: 8 x H200 on NVSwitch). Nothing is fitted to these measurements.

- bus bandwidth: `stash probe --workers N --device cuda` (NCCL all-reduce, 4 KiB to 256 MiB), against the
  instance's interconnect class curve of published nccl-tests figures (decide/predict/collectives.py, the N
  GPUs' share of it): GB/s at each size.
- steps: `stash profile --model M --workers N --stalls compute,interconnect` of ResNet-50 at batch 64 per GPU
  (PyTorch's defaults, which the profile keeps: TF32 convolutions, so the `tf32` prediction) and BERT-base at
  batch 32 per GPU and 128 tokens (FP32), against `stash predict` on the instance with N workers: compute,
  interconnect stall (the exposed all-reduce a step) and scaling efficiency (compute over the step).

The interconnect a lent machine gives its GPUs (NVLink through NVSwitch, or PCIe in a virtual machine) is not
known in advance: `nvidia-smi topo -m` is printed first, and a machine whose GPUs do not share the instance's
links is measured against predictions for links it does not have (the comparison says so, it is not hidden).

    PYTHONPATH=. python bench/gpu_multi.py [--gpus 2,4,8] [--out DIR]          # on a machine with 2+ GPUs
    PYTHONPATH=. python bench/gpu_multi.py --predict-only --gpus 2,4,8 --out DIR   # the predictions only
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_args import bench_parser, choice_list

ROOT = Path(__file__).resolve().parent.parent
# (model, batch per GPU, input shape, the precision the profile's defaults train in on a GPU with TF32)
STEP_JOBS = [("resnet50", 64, None, "tf32"), ("bert_base", 32, (128,), "fp32")]
CPU_JOBS = [
    ("resnet18", 8, (3, 32, 32), "fp32")
]  # --device cpu: the bench checked with gloo, nothing measured
SIZES_BYTES = [2**k for k in range(12, 29, 2)]  # 4 KiB to 256 MiB, as the probe's defaults
BUS_HEADER = ["gpus", "size_bytes", "predicted_busbw_gbs", "measured_busbw_gbs", "error_pct"]
STEP_HEADER = ["model", "batch", "precision", "gpus", "predicted_compute_s", "predicted_interconnect_s",
               "predicted_efficiency", "measured_compute_s", "measured_interconnect_s", "measured_ci95_s",
               "measured_efficiency", "efficiency_points"]  # fmt: skip


def predicted_bus(instance: str, gpus: int) -> dict[int, float]:
    """GB/s the instance's interconnect class reaches for an all-reduce over `gpus` of its GPUs, by size."""
    from stash_core.catalog.accelerators import find_accelerator
    from stash_core.catalog.catalog import builtin_instances
    from stash_core.decide.predict.collectives import intra_class, intra_curve, subset_share

    catalog = builtin_instances()
    row = catalog[catalog["name"] == instance].iloc[0]
    klass, _ = intra_class(row["interconnect"], find_accelerator(row["accelerator"]))
    curve = intra_curve(klass) if klass else None
    if curve is None:
        return {}
    curve = curve.scaled(subset_share(klass, gpus))
    return {size: curve.at(size) for size in SIZES_BYTES}


def predicted_step(
    instance: str, model: str, batch: int, shape, precision: str, gpus: int
) -> dict[str, float]:
    from stash_core.decide.predict import predict_instances

    with tempfile.TemporaryDirectory() as folder:
        frame = predict_instances(
            Path(folder) / "none.duckdb", model, batch, instances=[instance], workers_per_instance=gpus,
            precision=precision, input_shape=shape,
        ).frame  # fmt: skip
    row = frame.iloc[0]
    step = float(row["iteration_s"])
    return {"compute": float(row["compute_s"]), "interconnect": float(row["interconnect_s"]),
            "efficiency": float(row["compute_s"]) / step}  # fmt: skip


def _stash(*args: str, timeout_s: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "stash_core", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
    )


def measured_bus(gpus: int, device: str) -> dict[int, float]:
    """GB/s of NCCL's all-reduce over `gpus` GPUs by size (`stash probe`), {} with its error printed."""
    done = _stash("probe", "--workers", str(gpus), "--device", device, "--json", "--no-store", timeout_s=300)
    if done.returncode != 0:
        print(f"probe on {gpus} GPUs failed: {done.stderr.strip()[-300:]}")
        return {}
    probe = json.loads(done.stdout)
    return {int(row["size_bytes"]): float(row["busbw_gbps"]) / 8 for row in probe["allreduce"]}  # Gbit/s


def measured_step(model: str, batch: int, shape, gpus: int, folder: Path, device: str) -> dict[str, float]:
    """Compute and interconnect stall a step (`stash profile`), {} with its error printed."""
    out = folder / f"profile-{model}-{gpus}.json"
    args = ["profile", "--model", model, "--batch-size", str(batch), "--workers", str(gpus), "--stalls",
            "compute,interconnect", "--device", device, "--max-phase-seconds", "10", "--progress", "none",
            "--no-store", "--out", str(out)]  # fmt: skip
    if shape:
        args += ["--input-shape", ",".join(map(str, shape))]
    done = _stash(*args, timeout_s=240)
    if done.returncode != 0 or not out.exists():
        print(f"profile of {model} on {gpus} GPUs failed: {done.stderr.strip()[-300:]}")
        return {}
    stalls = json.loads(out.read_text())["breakdown"]["stalls"]
    compute, interconnect = stalls["compute"]["seconds"], stalls["interconnect"]["seconds"]
    if compute is None or interconnect is None:
        return {}
    return {"compute": compute, "interconnect": interconnect, "ci95": stalls["interconnect"]["ci95_s"] or 0.0,
            "efficiency": compute / (compute + interconnect)}  # fmt: skip


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--gpus", type=choice_list(("2", "3", "4", "5", "6", "7", "8")), default="2,4,8",
                        help="GPU counts to run on (those over the machine's count are skipped)")  # fmt: skip
    parser.add_argument("--instance", default="p5en.48xlarge", help="the catalog instance to predict for")
    parser.add_argument("--out", help="write bus.csv and steps.csv into this folder")
    parser.add_argument(
        "--predict-only", action="store_true", help="print the predictions only, time nothing"
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: check the bench with gloo workers and a small model (no GPU)")  # fmt: skip
    args = parser.parse_args()
    from stash_core.catalog.catalog import builtin_instances

    if args.instance not in set(builtin_instances()["name"]):
        parser.error(f"--instance {args.instance!r} is no instance of the built-in catalog")
    counts = [int(count) for count in args.gpus.split(",")]
    available = 0 if args.predict_only or args.device == "cpu" else _gpu_count()
    jobs = CPU_JOBS if args.device == "cpu" else STEP_JOBS
    if not args.predict_only and args.device == "cuda":
        if available < 2:
            print("fewer than 2 CUDA GPUs here: nothing to measure", file=sys.stderr)
            return 2
        subprocess.run(["nvidia-smi", "topo", "-m"], check=False)
        counts = [count for count in counts if count <= available]
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="stash-gpu-multi-"))
    out.mkdir(parents=True, exist_ok=True)
    profiles = Path(tempfile.mkdtemp(prefix="stash-gpu-multi-profiles-"))  # the result files, not kept
    bus_rows, step_rows = [], []
    for gpus in counts:
        predicted = predicted_bus(args.instance, gpus)
        measured = {} if args.predict_only else measured_bus(gpus, args.device)
        for size in SIZES_BYTES:
            p, m = predicted.get(size), measured.get(size)
            error = f"{100 * (p / m - 1):+.1f}" if p and m else "-"
            bus_rows.append([gpus, size, _num(p), _num(m), error])
        for model, batch, shape, precision in jobs:
            p = predicted_step(args.instance, model, batch, shape, precision, gpus)
            m = {} if args.predict_only else measured_step(model, batch, shape, gpus, profiles, args.device)
            points = f"{100 * (p['efficiency'] - m['efficiency']):+.1f}" if m else "-"
            step_rows.append([model, batch, precision, gpus, _num(p["compute"]), _num(p["interconnect"]),
                              _num(p["efficiency"]), _num(m.get("compute")), _num(m.get("interconnect")),
                              _num(m.get("ci95")), _num(m.get("efficiency")), points])  # fmt: skip
            print(" ".join(f"{str(cell):>12}" for cell in step_rows[-1]), flush=True)
    _write(out / "bus.csv", BUS_HEADER, bus_rows)
    _write(out / "steps.csv", STEP_HEADER, step_rows)
    return 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.5g}"


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
