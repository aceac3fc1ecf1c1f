"""The measured GPU kernels (NeuSight's data set) the kernel model is fitted to, as one table.

Data: the kernel latencies NeuSight (sitar-lab/NeuSight, scripts/asplos/data/dataset) measured with PyTorch
2.1 / CUDA 12.1 in FP32 on P100, P4, T4, V100, A100 PCIe 40 GB (its training GPUs) and, on larger shapes,
on those and on H100 SXM, L4 and A100 PCIe 80 GB (its test GPUs). `build_kernel_data` turns the repository's
CSVs into the compact copy kept in kernel_data/ (README.md there says where every column came from);
`load_kernels` reads it and adds the class, the project's accelerator name and the FLOPs, bytes and GEMM
tiles computed from the shapes (FP32, 4 bytes an element):

  bmm      torch.bmm(A[b,m,n], B[b,n,k]): flops 2bmnk, bytes 4b(mn + nk + mk), tiles b ceil(m/128) ceil(k/128)
  linear   nn.Linear(n, k, bias)(X[b,m,n]): flops 2bmnk + bmk, bytes 4(bmn + nk + k + bmk),
           tiles ceil(bm/128) ceil(k/128)
  conv     nn.Conv2d(ci, co, ks, stride, pad, bias=False) on X[b,ci,s,s], output side o = (s + 2pad - ks)
           // stride + 1: flops 2 b co o^2 ci ks^2, bytes 4(b ci s^2 + co ci ks^2 + b co o^2), tiles (implicit
           GEMM) ceil(b o^2/128) ceil(co/128)
  elementwise (add, mul, div, pow on two [b,h] tensors; addu, mulu, divu, powu with a scalar; relu, gelu,
           tanh): flops bh (one a element, nominal), bytes 4bh x operands (3 binary, 2 unary), tiles 0
  softmax  over the last dim of [b,h]: flops 5bh (nominal), bytes 4 x 2bh, tiles 0
  layernorm nn.LayerNorm(h) on [b,h]: flops 8bh (nominal), bytes 4(2bh + 2h + 2b) (input, output, weight,
           bias, the saved mean and rstd), tiles 0
"""

from __future__ import annotations

import csv
import io
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from stash_core.catalog.accelerators import Accelerator, find_accelerator

KERNEL_DATA = Path(__file__).resolve().parent / "kernel_data"
DATA_FILE = KERNEL_DATA / "neusight_kernels.csv.gz"
EXTRA_ACCELERATORS = KERNEL_DATA / "extra_accelerators.csv"
NEUSIGHT_REPO = "sitar-lab/NeuSight"
NEUSIGHT_COMMIT = "6945927d9afcca2b9daf021f8395e53edc5b4eef"
NEUSIGHT_DIR = "scripts/asplos/data/dataset"

TILE = 128
CLASSES = ("bmm", "linear", "conv", "elementwise", "softmax", "layernorm")
GEMM_CLASSES = frozenset({"bmm", "linear", "conv"})
BINARY = ("add", "mul", "div", "pow")
UNARY = ("addu", "mulu", "divu", "powu", "relu", "gelu", "tanh")
OP_CLASS = {"bmm": "bmm", "linear": "linear", "conv": "conv", "softmax": "softmax", "ln": "layernorm"}
OP_CLASS.update({op: "elementwise" for op in BINARY + UNARY})
# NeuSight's training GPUs (its train/ set) and its unseen test GPUs, as named in its CSVs.
NEUSIGHT_TRAIN = (
    "Tesla P100-PCIE-16GB",
    "Tesla P4",
    "Tesla T4",
    "Tesla V100-PCIE-32GB",
    "NVIDIA A100-PCIE-40GB",
)
NEUSIGHT_TEST = ("NVIDIA H100 80GB HBM3", "NVIDIA L4", "NVIDIA A100 80GB PCIe")
# Rows kept of NeuSight's per-GPU training files per (op, GPU): all below the cap, else a deterministic
# sample (the shapes with the smallest hash, the same shapes on every GPU).
SAMPLE_CAP = {"bmm": 6000, "linear": 6500, "conv": 5000}
SAMPLE_CAP_DEFAULT = 900

# ----------------------------------------------------------------------------------------------- data


def _git_csv(git_dir: str | Path, path: str) -> pd.DataFrame | None:
    run = subprocess.run(["git", "-C", str(git_dir), "show", f"HEAD:{path}"], capture_output=True)
    if run.returncode != 0:
        return None  # absent from the snapshot (its largest blobs are listed but not stored)
    return pd.read_csv(io.BytesIO(run.stdout))


def _shape_hash(frame: pd.DataFrame, dims: list[str]) -> np.ndarray:
    key = frame[dims].astype("int64").to_numpy()
    primes = np.array([1000003, 998244353, 1000000007, 91138233, 972663749, 97266353, 3][: len(dims)])
    return (key * primes).sum(axis=1) % 2_147_483_647


def build_kernel_data(git_dir: str | Path, out: Path = DATA_FILE) -> pd.DataFrame:
    """Read NeuSight's kernel CSVs from a git directory (fetched snapshot) and write the compact copy."""
    frames, missing = [], []
    train_ops = ["bmm", "linear", "conv", "softmax", "ln", *BINARY, *UNARY]
    for op in train_ops:
        for device in NEUSIGHT_TRAIN + ("NVIDIA A100 80GB PCIe",):
            path = f"{NEUSIGHT_DIR}/train/collect/{op}/p2.1.0/{device}.csv"
            frame = _git_csv(git_dir, path)
            if frame is None:
                a100 = "NVIDIA A100-PCIE-40GB" if op == "conv" else "NVIDIA A100 80GB PCIe"
                if device != a100:  # conv was timed on the A100 80 GB, everything else on the 40 GB
                    missing.append(path)
                continue
            frames.append(_compact(frame, op, "train", path))
    for name in ("bmm", "linear", "elem", "softmax", "ln"):
        path = f"{NEUSIGHT_DIR}/test/{name}.csv"
        frame = _git_csv(git_dir, path)
        if frame is None:
            missing.append(path)
            continue
        for op, part in frame.groupby("OPName"):
            frames.append(_compact(part, op, "test", path))
    data = pd.concat(frames, ignore_index=True)
    if missing:
        print("absent from the snapshot:", *missing, sep="\n  ")
    out.parent.mkdir(parents=True, exist_ok=True)
    data.to_csv(out, index=False, float_format="%.6g", compression={"method": "gzip", "mtime": 0})
    return data


DIM_COLUMNS = {
    "bmm": ["B", "M", "N", "K"],
    "linear": ["B", "M", "N", "K"],
    "conv": ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"],
}
COMPACT_DIMS = {"conv": ["B", "ci", "co", "ks", "s", "stride", "pad"]}


def _compact(frame: pd.DataFrame, op: str, split: str, path: str) -> pd.DataFrame:
    dims = DIM_COLUMNS.get(op, ["B", "H"])
    frame = frame.dropna(subset=["Latency", *dims])
    if split == "train":
        cap = SAMPLE_CAP.get(op, SAMPLE_CAP_DEFAULT)
        if len(frame) > cap:
            frame = frame.assign(_h=_shape_hash(frame, dims)).sort_values("_h").head(cap)
    out = pd.DataFrame({"op": op, "device": frame["Device"].to_numpy(), "split": split})
    names = COMPACT_DIMS.get(op, ["B", "M", "N", "K"] if op in ("bmm", "linear") else ["B", "H"])
    for src, dst in zip(dims, names, strict=True):
        out[dst] = frame[src].astype("int64").to_numpy()
    out["latency_ms"] = frame["Latency"].to_numpy()
    out["grid_blocks"] = (frame["Grid x"] * frame["Grid y"] * frame["Grid z"]).astype("int64").to_numpy()
    out["block_threads"] = (frame["Block x"] * frame["Block y"] * frame["Block z"]).astype("int64").to_numpy()
    out["kernel"] = frame["Kernel Name"].astype(str).str.slice(0, 60).to_numpy()
    if op in BINARY + UNARY:  # operand pointers of at::native's elementwise kernel: output + inputs
        pointers = frame["Kernel Name"].astype(str).str.extract(r"Array<char\*, (\d)>")[0]
        out["operands"] = pointers.astype(float).to_numpy()
    out["source"] = path.rsplit("/dataset/", 1)[-1]
    return out


@cache
def _extra_accelerators() -> dict[str, Accelerator]:
    """NeuSight's GPUs missing from accelerators.csv (the P4), from kernel_data/extra_accelerators.csv."""
    table = {}
    with open(EXTRA_ACCELERATORS, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            accelerator = Accelerator(
                row["name"], float(row["fp32_tflops"]), None, None, None, float(row["memory_gbs"]),
                float(row["memory_gb"]), None, int(row["pcie_gen"]), row["source"], int(row["sm_count"]),
                (row["neusight_name"],), (), (), float(row["base_mhz"]), float(row["boost_mhz"]),
            )  # fmt: skip
            table[row["neusight_name"]] = accelerator
    return table


def accelerator_for(device: str) -> Accelerator | None:
    """The project's accelerator row for a NeuSight device name (or kernel_data's extra row)."""
    return _extra_accelerators().get(device) or find_accelerator(device)


def shape_cost(frame: pd.DataFrame) -> pd.DataFrame:
    """FLOPs, bytes and 128x128 output tiles of each row from its op and shape (formulas: module doc)."""
    f = frame
    op = f["op"].to_numpy()
    num = {c: f[c].to_numpy(dtype=float) if c in f else np.full(len(f), np.nan) for c in
           ("B", "M", "N", "K", "H", "ci", "co", "ks", "s", "stride", "pad", "operands")}  # fmt: skip
    b, m, n, k, h = num["B"], num["M"], num["N"], num["K"], num["H"]
    flops = np.full(len(f), np.nan)
    bytes_ = np.full(len(f), np.nan)
    tiles = np.zeros(len(f))
    outputs = np.full(len(f), np.nan)
    is_bmm, is_lin, is_conv = op == "bmm", op == "linear", op == "conv"
    flops = np.where(is_bmm, 2 * b * m * n * k, flops)
    bytes_ = np.where(is_bmm, 4 * b * (m * n + n * k + m * k), bytes_)
    tiles = np.where(is_bmm, b * np.ceil(m / TILE) * np.ceil(k / TILE), tiles)
    outputs = np.where(is_bmm | is_lin, b * m * k, outputs)
    flops = np.where(is_lin, 2 * b * m * n * k + b * m * k, flops)
    bytes_ = np.where(is_lin, 4 * (b * m * n + n * k + k + b * m * k), bytes_)
    tiles = np.where(is_lin, np.ceil(b * m / TILE) * np.ceil(k / TILE), tiles)
    o = np.floor((num["s"] + 2 * num["pad"] - num["ks"]) / num["stride"]) + 1
    ci, co, ks, s = num["ci"], num["co"], num["ks"], num["s"]
    flops = np.where(is_conv, 2 * b * co * o**2 * ci * ks**2, flops)
    bytes_ = np.where(is_conv, 4 * (b * ci * s**2 + co * ci * ks**2 + b * co * o**2), bytes_)
    tiles = np.where(is_conv, np.ceil(b * o**2 / TILE) * np.ceil(co / TILE), tiles)
    outputs = np.where(is_conv, b * co * o**2, outputs)
    elem = np.isin(op, BINARY + UNARY)
    default_operands = np.where(np.isin(op, BINARY), 3.0, 2.0)
    operands = np.where(np.isnan(num["operands"]), default_operands, num["operands"])
    flops = np.where(elem, b * h, flops)
    bytes_ = np.where(elem, 4 * b * h * operands, bytes_)
    flops = np.where(op == "softmax", 5 * b * h, flops)
    bytes_ = np.where(op == "softmax", 4 * 2 * b * h, bytes_)
    flops = np.where(op == "ln", 8 * b * h, flops)
    bytes_ = np.where(op == "ln", 4 * (2 * b * h + 2 * h + 2 * b), bytes_)
    return pd.DataFrame({"flops": flops, "bytes": bytes_, "tiles": tiles, "outputs": outputs}, index=f.index)


def load_kernels(path: Path = DATA_FILE) -> pd.DataFrame:
    """NeuSight's measured kernels as one table: op, op_class, gpu (the project's accelerator name), device
    (NeuSight's), split, shape columns, flops, bytes, tiles, latency_s."""
    data = pd.read_csv(path)
    data["op_class"] = data["op"].map(OP_CLASS)
    names = {d: accelerator_for(d) for d in data["device"].unique()}
    data["gpu"] = data["device"].map(lambda d: names[d].name if names[d] else None)
    data = data[data["gpu"].notna()].copy()
    data = pd.concat([data, shape_cost(data)], axis=1)
    data["latency_s"] = data["latency_ms"] * 1e-3
    # A shape measured twice on a GPU (NeuSight's training and test files overlap a little): keep the mean.
    keys = ["op", "gpu", "B", "M", "N", "K", "H", "ci", "co", "ks", "s", "stride", "pad"]
    keys = [k for k in keys if k in data]
    firsts = data.groupby(keys, dropna=False, sort=False).first()
    firsts["latency_s"] = data.groupby(keys, dropna=False, sort=False)["latency_s"].mean()
    return firsts.reset_index()[list(data.columns)]
