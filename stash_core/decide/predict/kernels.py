"""A per-kernel compute model learned from measured GPU kernels (kernel_table.py: NeuSight's data set),
held out by GPU.

The model (per class, a handful of parameters, the GPU entering only through its datasheet row):

  time = max(flops / (peak x eff_compute), bytes / (bandwidth x eff_memory)) + launch_s
  eff_compute = c_max x clock x lanes^-wide x utilisation^w x fill^p_fill x x/(1+x),  x = flops/(SMs f_half)
  eff_memory  = m_max x y/(1+y),  y = bytes / (SMs x b_half)
  clock = base/boost + boost_share (1 - base/boost); lanes = FP32 lanes per SM / 64 (roofline.py's terms)
  utilisation = tiles / (ceil(tiles / SMs) x SMs)   (128x128 output tiles; 1 for tiles = 0)
  fill = output elements / (tiles x 128 x 128): the share of the padded tiles that is real output
  wide is not fitted (FIXED: roofline.PRIOR's 0.3); p_fill is GEMM_PARAMS' "fill"

Memory-bound classes (elementwise, softmax, layernorm) fit only m_max, b_half and launch_s; their nominal
FLOPs run at the FP32 peak and never bind. Fitted by Levenberg-Marquardt on log time (numpy; scipy is not in
the environment), every GPU weighted equally within a class.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from stash_core.catalog.accelerators import Accelerator
from stash_core.decide.predict.kernel_table import (
    CLASSES,
    GEMM_CLASSES,
    NEUSIGHT_TEST,
    NEUSIGHT_TRAIN,
    TILE,
    accelerator_for,
    load_kernels,
)
from stash_core.decide.predict.roofline import PRIOR as ROOFLINE_PRIOR

# Parameter names, how each is kept positive or in (0, 1), and where the fit starts.
GEMM_PARAMS = ("c_max", "w", "fill", "f_half", "boost_share", "m_max", "b_half", "launch_s")
# Not fitted: the FP32 lane term keeps the step model's prior (roofline.PRIOR["wide_fp32"]). Fitted, it ran
# to its bound of 1: the one training GPU with 128 FP32 lanes an SM is the 75 W P4, whose power limit the lane
# term then absorbed, and the H100's linear kernels came out 2.4 times too slow under NeuSight's split.
FIXED = {"wide": ROOFLINE_PRIOR["wide_fp32"]}
MEMORY_PARAMS = ("m_max", "b_half", "launch_s")
FRACTION = frozenset({"c_max", "w", "fill", "boost_share", "m_max", "wide"})
START = {
    "c_max": 0.8, "w": 0.5, "fill": 0.3, "f_half": 2e7, "boost_share": 0.5, "wide": 0.3, "m_max": 0.8,
    "b_half": 2e5,
    "launch_s": 1e-5,
}  # fmt: skip
FIT_ROWS_PER_GPU = 1500


@dataclass(frozen=True)
class KernelParams:
    """Fitted parameters per op class (GEMM_PARAMS or MEMORY_PARAMS), and what they were fitted on."""

    values: dict[str, dict[str, float]] = field(default_factory=dict)
    fitted_on: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KernelParams:
        raw = json.loads(text)
        return cls(
            {c: {k: float(v) for k, v in p.items()} for c, p in raw["values"].items()}, raw["fitted_on"]
        )


def _gpu_features(accelerators: list[Accelerator]) -> dict[str, np.ndarray]:
    def arr(values):
        return np.array(values, dtype=float)

    return {
        "peak": arr([a.fp32_tflops * 1e12 for a in accelerators]),
        "bandwidth": arr([a.memory_gbs * 1e9 for a in accelerators]),
        "sms": arr([a.sm_count for a in accelerators]),
        "base_share": arr([a.base_clock_share for a in accelerators]),
        "lanes": arr([(a.fp32_lanes_per_sm or 64.0) / 64.0 for a in accelerators]),
    }


def _seconds(
    op_class: str, theta: dict[str, float], flops, bytes_, tiles, g: dict[str, np.ndarray], outputs=None
):
    sms = g["sms"]
    y = bytes_ / (sms * theta["b_half"])
    memory_s = bytes_ / (g["bandwidth"] * theta["m_max"] * y / (1 + y))
    if op_class in GEMM_CLASSES:
        waves = np.ceil(np.maximum(tiles, 1) / sms)
        util = np.where(tiles > 0, np.maximum(tiles, 1) / (waves * sms), 1.0)
        x = flops / (sms * theta["f_half"])
        clock = g["base_share"] + theta["boost_share"] * (1 - g["base_share"])
        fill = _fill(tiles, outputs)
        eff = theta["c_max"] * clock * g["lanes"] ** -theta["wide"] * util ** theta["w"] * x / (1 + x)
        eff = eff * fill ** theta["fill"]
        compute_s = flops / (g["peak"] * eff)
    else:
        compute_s = flops / g["peak"]
    return np.maximum(compute_s, memory_s) + theta["launch_s"]


def _fill(tiles, outputs):
    """Share of the 128x128 output tiles' area that is real output (1 when the output count is unknown)."""
    if outputs is None:
        return 1.0
    outputs = np.asarray(outputs, dtype=float)
    area = np.maximum(np.asarray(tiles, dtype=float), 1) * TILE * TILE
    return np.where(np.isfinite(outputs) & (outputs > 0), np.clip(outputs / area, 1e-6, 1.0), 1.0)


def predict_kernel_s(
    op_class: str,
    flops: float,
    bytes: float,
    tiles: float,
    accelerator: Accelerator,
    params: KernelParams,
    outputs: float | None = None,
) -> float:
    """Predicted seconds of one kernel of a class on an accelerator (its datasheet row only). outputs: the
    GEMM's output elements, for the share of its padded tiles that is real work (None: taken as full)."""
    g = _gpu_features([accelerator])
    seconds = _seconds(op_class, params.values[op_class], np.float64(flops), np.float64(bytes),
                       np.float64(tiles), g, None if outputs is None else np.float64(outputs))  # fmt: skip
    return float(np.asarray(seconds).reshape(-1)[0])


def predict_frame(frame: pd.DataFrame, params: KernelParams) -> np.ndarray:
    """Predicted seconds of every row of a load_kernels() table."""
    out = np.full(len(frame), np.nan)
    for op_class, part in frame.groupby("op_class"):
        if op_class not in params.values:
            continue
        g = _gpu_features([accelerator_for(d) for d in part["device"]])
        idx = frame.index.get_indexer(part.index)
        out[idx] = _seconds(op_class, params.values[op_class], part["flops"].to_numpy(),
                            part["bytes"].to_numpy(), part["tiles"].to_numpy(), g,
                            part["outputs"].to_numpy())  # fmt: skip
    return out


def _to_theta(names: tuple[str, ...], z: np.ndarray) -> dict[str, float]:
    return {
        n: float(1 / (1 + np.exp(-v)) if n in FRACTION else np.exp(v)) for n, v in zip(names, z, strict=True)
    }


def _from_theta(names: tuple[str, ...], theta: dict[str, float]) -> np.ndarray:
    return np.array(
        [math.log(theta[n] / (1 - theta[n])) if n in FRACTION else math.log(theta[n]) for n in names]
    )


def _fit_class(op_class: str, part: pd.DataFrame, iterations: int = 40) -> dict[str, float]:
    names = GEMM_PARAMS if op_class in GEMM_CLASSES else MEMORY_PARAMS
    g = _gpu_features([accelerator_for(d) for d in part["device"]])
    flops, bytes_, tiles, outputs = (
        part[c].to_numpy(dtype=float) for c in ("flops", "bytes", "tiles", "outputs")
    )
    log_measured = np.log(part["latency_s"].to_numpy())
    counts = part["gpu"].map(part["gpu"].value_counts()).to_numpy(dtype=float)
    sqrt_w = np.sqrt(1.0 / counts)  # every GPU weighs the same in the class

    def residual(z):
        theta = {**_to_theta(names, z), **FIXED}
        return sqrt_w * (np.log(_seconds(op_class, theta, flops, bytes_, tiles, g, outputs)) - log_measured)

    best = None
    for launch in (5e-6, 2e-5):
        start = dict(START, launch_s=launch)
        z = _from_theta(names, start)
        z, cost = _levenberg_marquardt(residual, z, iterations)
        if best is None or cost < best[1]:
            best = (z, cost)
    theta = _to_theta(names, best[0])
    return {**theta, **FIXED} if op_class in GEMM_CLASSES else theta


def _levenberg_marquardt(residual, z: np.ndarray, iterations: int) -> tuple[np.ndarray, float]:
    r = residual(z)
    cost = float(r @ r)
    lam = 1e-2
    for _ in range(iterations):
        jac = np.empty((len(r), len(z)))
        for i in range(len(z)):
            step = np.zeros_like(z)
            step[i] = 1e-6
            jac[:, i] = (residual(z + step) - r) / 1e-6
        jtj, jtr = jac.T @ jac, jac.T @ r
        improved = False
        for _ in range(10):
            delta = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-9), -jtr)
            candidate = z + np.clip(delta, -3, 3)
            rc = residual(candidate)
            cc = float(rc @ rc)
            if np.isfinite(cc) and cc < cost:
                z, r, lam, improved = candidate, rc, lam / 3, True
                break
            lam *= 4
        if not improved or abs(cost - cc) < 1e-10 * max(cost, 1e-30):
            cost = min(cost, cc) if improved else cost
            break
        cost = cc
    return z, cost


def _fit_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """At most FIT_ROWS_PER_GPU rows per (class, GPU), chosen by a fixed seed (keeps every fit fast)."""
    parts = []
    for _, part in frame.groupby(["op_class", "gpu"]):
        parts.append(part.sample(n=min(len(part), FIT_ROWS_PER_GPU), random_state=0))
    return pd.concat(parts)


def fit(frame: pd.DataFrame, classes: tuple[str, ...] = CLASSES) -> KernelParams:
    """Least squares on log time, per op class, over every GPU in the frame."""
    rows = _fit_rows(frame)
    values = {c: _fit_class(c, part) for c, part in rows.groupby("op_class") if c in classes}
    gpus = ", ".join(sorted(frame["gpu"].unique()))
    return KernelParams(values, f"{len(frame)} NeuSight kernels on {gpus}")


def _held_out(test: pd.DataFrame, params: KernelParams, label: str) -> pd.DataFrame:
    out = test.copy()
    out["predicted_s"] = predict_frame(out, params)
    out["ape"] = (out["predicted_s"] - out["latency_s"]).abs() / out["latency_s"]
    out["held_out"] = label
    return out


def leave_one_gpu_out(frame: pd.DataFrame) -> pd.DataFrame:
    """Every GPU's kernels predicted by a fit on the other GPUs' kernels (held_out: that GPU)."""
    parts = []
    for gpu in sorted(frame["gpu"].unique()):
        train = frame[frame["gpu"] != gpu]
        test = frame[frame["gpu"] == gpu]
        classes = tuple(c for c in test["op_class"].unique() if c in set(train["op_class"]))
        parts.append(_held_out(test[test["op_class"].isin(classes)], fit(train, classes), gpu))
    return pd.concat(parts, ignore_index=True)


def neusight_split(frame: pd.DataFrame) -> pd.DataFrame:
    """NeuSight's split: fit on its training GPUs' kernels, predict its test GPUs' (H100, L4, A100 80 GB)."""
    train = frame[frame["device"].isin(NEUSIGHT_TRAIN) & (frame["split"] == "train")]
    test = frame[frame["device"].isin(NEUSIGHT_TEST)]
    test = test[test["op_class"].isin(set(train["op_class"]))]
    return _held_out(test, fit(train), "neusight-test")


def error_table(held: pd.DataFrame, by: tuple[str, ...] = ("op_class", "gpu")) -> pd.DataFrame:
    """Mean and median absolute percentage error and the count, per group of held-out rows."""
    grouped = held.groupby(list(by))["ape"]
    table = pd.DataFrame({"mape_%": grouped.mean() * 100, "median_%": grouped.median() * 100,
                          "n": grouped.size()})  # fmt: skip
    return table.round(1)


@functools.lru_cache(maxsize=16)
def elementwise_terms(exclude: tuple[str, ...] = ()) -> dict[str, float]:
    """The element-wise class's fitted bandwidth share and half-saturation bytes per SM (m_max, b_half), as
    the step model takes them (roofline.KERNEL_TERMS): fitted on NeuSight's element-wise kernels of every GPU
    but those named in `exclude` (accelerator names), so that a step held out by its GPU die is predicted
    without that die's kernels too."""
    frame = load_kernels()
    frame = frame[(frame["op_class"] == "elementwise") & ~frame["gpu"].isin(exclude)]
    theta = fit(frame, ("elementwise",)).values["elementwise"]
    return {"elementwise_m_max": theta["m_max"], "elementwise_b_half": theta["b_half"]}


@functools.lru_cache(maxsize=1)
def kernel_gpus() -> tuple[str, ...]:
    """The accelerator names of the GPUs whose kernels the data set holds."""
    return tuple(sorted(load_kernels()["gpu"].unique()))
