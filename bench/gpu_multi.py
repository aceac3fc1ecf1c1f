"""All-reduce bus bandwidth and data-parallel steps on this machine's GPUs (two or more), measured as a user
measures them, against what Stash predicts for the same GPUs in the catalog's instance of them (--instance,
default p5en.48xlarge: 8 x H200 on NVSwitch). Nothing is fitted to these measurements.

- bus bandwidth: `stash probe --workers N --device cuda` (NCCL all-reduce, 4 KiB to 256 MiB), against the
  instance's interconnect class curve of published nccl-tests figures (decide/predict/collectives.py, the N
  GPUs' share of it): GB/s at each size. The probe times each all-reduce alone, synchronised, where
  nccl-tests averages back-to-back ones: below about 1 MiB it measures launch and synchronisation more than
  the links, so the model is judged from 1 MiB up.
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

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_args import bench_parser, choice_list, positive_float, write_csv

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


def predicted_bus(instance: dict, gpus: int) -> dict[int, float]:
    """GB/s the instance's interconnect class reaches for an all-reduce over `gpus` of its GPUs, by size
    (`instance`: catalog_instance's row)."""
    from stash_core.catalog.accelerators import find_accelerator
    from stash_core.decide.predict.collectives import intra_class, intra_curve, subset_share

    klass, _ = intra_class(instance["interconnect"], find_accelerator(instance["accelerator"]))
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
        prediction = predict_instances(
            Path(folder) / "none.duckdb", model, batch, instances=[instance], workers_per_instance=gpus,
            precision=precision, input_shape=shape,
        )  # fmt: skip
    if prediction.frame.empty:
        print(f"{model} on {gpus} GPUs not predicted: {'; '.join(prediction.not_predictable)}")
        return {}
    row = prediction.frame.iloc[0]
    step = float(row["iteration_s"])
    return {"compute": float(row["compute_s"]), "interconnect": float(row["interconnect_s"]),
            "efficiency": float(row["compute_s"]) / step}  # fmt: skip


def _stash(*args: str, timeout_s: float) -> subprocess.CompletedProcess:
    """A `stash` command's result; one that runs past `timeout_s` is stopped and fails (status 124)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return run_tree([sys.executable, "-m", "stash_core", *args], timeout_s, env)


def run_tree(command: list[str], timeout_s: float, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command's result, status 124 past `timeout_s`. Its whole tree (torchrun and its workers) is ended
    on the timeout and when the bench is stopped (Ctrl-C, SIGTERM): an orphaned worker would hold its GPU
    through the parts that follow."""
    from stash_core.proc import end_tree

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = process.communicate(timeout=max(timeout_s, 1))
    except subprocess.TimeoutExpired:
        end_tree(process.pid, popen=process)
        return subprocess.CompletedProcess(command, 124, "", f"timed out after {timeout_s:.0f} s")
    except BaseException:  # Ctrl-C, or SIGTERM raised as SystemExit by main
        end_tree(process.pid, popen=process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def measured_bus(gpus: int, device: str, timeout_s: float) -> dict[int, float]:
    """GB/s of NCCL's all-reduce over `gpus` GPUs by size (`stash probe`), {} with its error printed."""
    done = _stash("probe", "--workers", str(gpus), "--device", device, "--json", "--no-store",
                  timeout_s=timeout_s)  # fmt: skip
    try:
        rows = json.loads(done.stdout)["allreduce"] if done.returncode == 0 else None
    except (ValueError, KeyError):
        rows = None
    if rows is None:
        print(f"probe on {gpus} GPUs failed: {done.stderr.strip()[-300:]}")
        return {}
    return {int(row["size_bytes"]): float(row["busbw_gbps"]) / 8 for row in rows}  # Gbit/s to GB/s


def measured_step(
    model: str, batch: int, shape, gpus: int, folder: Path, device: str, timeout_s: float
) -> dict[str, float]:
    """Compute and interconnect stall a step (`stash profile`), {} with its error printed."""
    out = folder / f"profile-{model}-{gpus}.json"
    args = ["profile", "--model", model, "--batch-size", str(batch), "--workers", str(gpus), "--stalls",
            "compute,interconnect", "--device", device, "--max-phase-seconds", "10", "--progress", "none",
            "--no-store", "--out", str(out)]  # fmt: skip
    if shape:
        args += ["--input-shape", ",".join(map(str, shape))]
    done = _stash(*args, timeout_s=timeout_s)
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
    # SIGTERM (a session's time limit) as an exit, so that _stash ends the command it is waiting on
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = bench_parser(__doc__)
    parser.add_argument("--gpus", type=choice_list(("2", "3", "4", "5", "6", "7", "8")), default="2,4,8",
                        help="GPU counts (those over the machine's or the instance's skipped)")  # fmt: skip
    parser.add_argument("--instance", default="p5en.48xlarge", help="the catalog instance to predict for")
    parser.add_argument("--out", help="write bus.csv and steps.csv into this folder")
    parser.add_argument("--budget-s", type=positive_float, default=480,
                        help="seconds for all measurements (what would start later is not run)")  # fmt: skip
    parser.add_argument(
        "--predict-only", action="store_true", help="print the predictions only, time nothing"
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: check the bench with gloo workers and a small model (no GPU)")  # fmt: skip
    args = parser.parse_args()
    instance = catalog_instance(args.instance)
    if instance is None:
        parser.error(f"--instance {args.instance!r} is no instance of the built-in catalog")
    counts = [
        int(count) for count in args.gpus.split(",") if int(count) <= int(instance["accelerator_count"])
    ]
    jobs = CPU_JOBS if args.device == "cpu" else STEP_JOBS
    if not args.predict_only and args.device == "cuda":
        available = _gpu_count()
        if available < 2:
            print("fewer than 2 CUDA GPUs here: nothing to measure", file=sys.stderr)
            return 2
        _say_gpu(instance)
        counts = [count for count in counts if count <= available]
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="stash-gpu-multi-"))
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    bus_rows, step_rows = [], []
    with tempfile.TemporaryDirectory(prefix="stash-gpu-multi-") as profiles:  # the result files, not kept
        for gpus in counts:
            predicted = predicted_bus(instance, gpus)
            left = deadline - time.monotonic()
            measured = (
                {} if args.predict_only or left < 30 else measured_bus(gpus, args.device, min(left, 180))
            )
            for size in SIZES_BYTES:
                p, m = predicted.get(size), measured.get(size)
                error = f"{100 * (p / m - 1):+.1f}" if p and m else "-"
                bus_rows.append([gpus, size, _num(p), _num(m), error])
                print(" ".join(f"{str(cell):>12}" for cell in bus_rows[-1]), flush=True)
            for model, batch, shape, precision in jobs:
                p = predicted_step(args.instance, model, batch, shape, precision, gpus)
                if not p:
                    continue
                left = deadline - time.monotonic()
                m = {} if args.predict_only or left < 60 else measured_step(
                    model, batch, shape, gpus, Path(profiles), args.device, min(left, 240))  # fmt: skip
                points = f"{100 * (p['efficiency'] - m['efficiency']):+.1f}" if m else "-"
                step_rows.append([model, batch, precision, gpus, _num(p["compute"]), _num(p["interconnect"]),
                                  _num(p["efficiency"]), _num(m.get("compute")), _num(m.get("interconnect")),
                                  _num(m.get("ci95")), _num(m.get("efficiency")), points])  # fmt: skip
                print(" ".join(f"{str(cell):>12}" for cell in step_rows[-1]), flush=True)
            _write(out / "bus.csv", BUS_HEADER, bus_rows)  # after each count: a later failure keeps these
            _write(out / "steps.csv", STEP_HEADER, step_rows)
    if not args.predict_only and time.monotonic() > deadline:
        print(f"the {args.budget_s:.0f} s budget ran out: rows without a measurement were not run")
    return 0


def catalog_instance(name: str) -> dict | None:
    """The built-in catalog's row of `name` (its interconnect None where the catalog leaves it empty), or
    None for no such instance."""
    from stash_core.catalog.catalog import builtin_instances

    catalog = builtin_instances()
    found = catalog[catalog["name"] == name]
    if found.empty:
        return None
    row = found.iloc[0].to_dict()
    if not isinstance(row.get("interconnect"), str):
        row["interconnect"] = None
    return row


def _say_gpu(instance: dict) -> None:
    """The GPUs and their links, and whether they are the instance's GPU (a warning where not)."""
    import torch

    from stash_core.catalog.accelerators import find_accelerator

    subprocess.run(["nvidia-smi", "topo", "-m"], check=False)
    name = torch.cuda.get_device_name()
    found = find_accelerator(name)
    print(f"GPU {name!r} -> {found.name if found else 'no accelerator row'}; predicted for {instance['name']}"
          f" ({instance['accelerator']}, {instance['interconnect']})")  # fmt: skip
    if found is None or found.name != instance["accelerator"]:
        print(f"warning: these GPUs are not {instance['name']}'s {instance['accelerator']}: the predictions"
              " are for other GPUs")  # fmt: skip


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.5g}"


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    write_csv(path, header, rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
