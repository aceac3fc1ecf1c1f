"""Held-out error of the per-kernel model (stash_core/decide/predict/kernels.py) on NeuSight's kernels.

Two splits: leave one GPU out (fit every op class on the other GPUs' kernels, predict the held-out GPU's), and
NeuSight's own (fit on its training GPUs' training kernels: P100, P4, T4, V100, A100 PCIe 40 GB; predict its
test GPUs: H100 SXM, L4, A100 PCIe 80 GB). Prints mean and median absolute percentage error and the count per
op class and held-out GPU. Then the step model's own terms (roofline.py, the shipped validation_summary.json)
on the memory-bound kernels, none of which it was fitted to: element-wise (the kernel model's share of the
bandwidth, which the step model takes, with the step model's launch cost), softmax (its reduction share) and
layer norm (its normalisation share). --rebuild GIT_DIR first rewrites kernel_data/ from a fetched NeuSight
snapshot.
Run: PYTHONPATH=. .venv/bin/python bench/kernels.py [--rebuild GIT_DIR] [--params-json]
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pandas as pd
from bench_args import bench_parser

from stash_core.decide.predict.kernel_table import NEUSIGHT_DIR, build_kernel_data, load_kernels
from stash_core.decide.predict.kernels import error_table, fit, leave_one_gpu_out, neusight_split

SHORT = {
    "NVIDIA A100 PCIe 40 GB": "A100-40", "NVIDIA A100 PCIe 80 GB": "A100-80", "NVIDIA H100 SXM 80 GB": "H100",
    "NVIDIA L4 24 GB": "L4", "NVIDIA P100 PCIe 16 GB": "P100", "NVIDIA T4 16 GB": "T4",
    "NVIDIA Tesla P4 8 GB": "P4", "NVIDIA V100 PCIe 32 GB": "V100",
}  # fmt: skip


def _cells(table: pd.DataFrame) -> pd.DataFrame:
    """One 'mean / median (n)' cell per op class (rows) and GPU (columns)."""
    cell = table.apply(lambda r: f"{r['mape_%']:.1f} / {r['median_%']:.1f} ({int(r['n'])})", axis=1)
    wide = cell.unstack("gpu").rename(columns=SHORT).fillna("-")
    return wide[[c for c in SHORT.values() if c in wide.columns]]


def snapshot_problem(git_dir: str) -> str | None:
    """Why GIT_DIR cannot be rebuilt from (not a folder, or no NeuSight data at its HEAD), or None: said
    before anything is read, where the rebuild would end in a traceback with nothing to concatenate."""
    if not Path(git_dir).is_dir():
        return f"--rebuild {git_dir}: no such folder"
    found = subprocess.run(
        ["git", "-C", git_dir, "cat-file", "-e", f"HEAD:{NEUSIGHT_DIR}"], capture_output=True
    )
    if found.returncode != 0:
        return f"--rebuild {git_dir}: not a NeuSight git snapshot (no {NEUSIGHT_DIR} at its HEAD)"
    return None


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--rebuild", metavar="GIT_DIR", help="rewrite kernel_data/ from a NeuSight git dir")
    parser.add_argument("--params-json", action="store_true", help="print the fit on every GPU as JSON")
    args = parser.parse_args()
    if args.rebuild:
        problem = snapshot_problem(args.rebuild)
        if problem:
            parser.error(problem)
        build_kernel_data(args.rebuild)
    report(args.params_json)


def report(params_json: bool = False) -> None:
    """The held-out kernel errors, printed."""
    start = time.perf_counter()
    frame = load_kernels()
    print(
        f"{len(frame)} kernels, {frame['gpu'].nunique()} GPUs, classes {sorted(frame['op_class'].unique())}"
    )
    pd.set_option("display.width", 200)
    logo = leave_one_gpu_out(frame)
    print("\nLeave one GPU out: absolute % error, mean / median (count), per op class and held-out GPU")
    print(_cells(error_table(logo)).to_string())
    print("\nAll held-out GPUs together, per op class:")
    print(error_table(logo, ("op_class",)).to_string())
    split = neusight_split(frame)
    print(
        "\nNeuSight's split (fit on P100, P4, T4, V100, A100-40 training kernels; predict H100, L4, A100-80):"
    )
    print(_cells(error_table(split)).to_string())
    step_terms(frame)
    if params_json:
        print(fit(frame).to_json())
    print(f"\n({time.perf_counter() - start:.1f} s)")


def step_terms(frame: pd.DataFrame) -> None:
    """The step model's seconds for each memory-bound kernel (its bytes at the class's share of the bandwidth,
    no faster than sm_gbs per SM, plus launch_s), against the measured ones, per class and GPU."""
    import numpy as np

    from stash_core.decide.predict.kernel_table import accelerator_for
    from stash_core.decide.predict.roofline import memory_seconds
    from stash_core.decide.predict.stated_error import fitted_params

    params = fitted_params()
    rows = frame[frame["op_class"].isin(["elementwise", "softmax", "layernorm"])].copy()
    accelerators = {device: accelerator_for(device) for device in rows["device"].unique()}
    bandwidth = rows["device"].map(lambda d: accelerators[d].memory_gbs * 1e9).to_numpy()
    per_sm = rows["device"].map(lambda d: accelerators[d].memory_gbs / accelerators[d].sm_count).to_numpy()
    at_bandwidth = rows["bytes"].to_numpy() / bandwidth
    y = rows["bytes"].to_numpy() / (bandwidth / per_sm / 1e9) / params["elementwise_b_half"]
    share = np.select(
        [rows["op_class"] == "elementwise", rows["op_class"] == "softmax"],
        [params["elementwise_m_max"] * y / (1 + y), np.full(len(rows), params["reduction"])],
        params["normalisation"],
    )
    predicted = memory_seconds(at_bandwidth, share, per_sm, params) + params["launch_s"]
    rows["ape"] = np.abs(predicted - rows["latency_s"].to_numpy()) / rows["latency_s"].to_numpy()
    print(
        "\nThe step model's terms on the same kernels (its shares of the bandwidth, sm_gbs and launch_s; "
        "in no fit of the step model but the element-wise share):"
    )
    print(_cells(error_table(rows)).to_string())
    print(error_table(rows, ("op_class",)).to_string())


if __name__ == "__main__":
    main()
