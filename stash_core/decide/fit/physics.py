"""The alpha-beta model of DDP's gradient all-reduce: physics, not a fit on the model being predicted.

DDP packs gradients into buckets (the first 1 MiB, then 25 MiB each) and all-reduces each bucket. A ring
all-reduce of S bytes over n workers moves 2(n-1)/n x S bytes through every link, so one bucket costs
alpha + 2(n-1)/n x S_bucket x beta, where alpha is the per-call latency and beta the seconds per byte of the
slowest link. Summed over the buckets:

    comm_s = buckets x alpha + 2(n-1)/n x grad_bytes x beta

Part of that time hides behind the backward pass. Rather than guess the hidden fraction, it is calibrated
per configuration as one scalar `scale` = median(measured stall / comm_s) over the *other* models of the
configuration (never the one being predicted): predicted stall = scale x comm_s. scale < 1 means
overlap (overlap_fraction = 1 - scale); scale > 1 means the stall exceeds the wire time (contention, or a
link slower than the probe said), which is reported rather than hidden.

alpha and beta come from, in order: values given by the user; the `probes` table (least squares of
all-reduce time on message size, for the same world size / nodes / instance); the link's nominal bandwidth
(emulated-cluster setting or the catalog's network Gbps), with alpha = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

DDP_BUCKET_BYTES = 25 * 1024 * 1024
DDP_FIRST_BUCKET_BYTES = (
    1024 * 1024
)  # DDP's first (rebuilt) bucket is small so that communication starts early


def ring_factor(world_size: int) -> float:
    """2(n-1)/n: bytes through each link of a ring all-reduce per byte reduced (0 for one worker)."""
    if world_size <= 1:
        return 0.0
    return 2.0 * (world_size - 1) / world_size


def bucket_count(
    grad_bytes: float,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    first_bucket_bytes: int | None = DDP_FIRST_BUCKET_BYTES,
) -> int:
    """All-reduce calls DDP makes per iteration: ceil over the bucket size, after a small first bucket."""
    if grad_bytes <= 0:
        return 0
    if first_bucket_bytes is None or first_bucket_bytes <= 0:
        return math.ceil(grad_bytes / bucket_bytes)
    return 1 + math.ceil(max(0.0, grad_bytes - first_bucket_bytes) / bucket_bytes)


def allreduce_time_s(
    grad_bytes: float,
    world_size: int,
    alpha_s: float,
    beta_s_per_byte: float,
    bucket_bytes: int = DDP_BUCKET_BYTES,
) -> float:
    """Wire time of one iteration's gradient all-reduce: buckets x alpha + ring factor x bytes x beta."""
    if world_size <= 1:
        return 0.0
    buckets = bucket_count(grad_bytes, bucket_bytes)
    return buckets * alpha_s + ring_factor(world_size) * grad_bytes * beta_s_per_byte


def beta_from_gbps(gbps: float) -> float:
    """Seconds per byte of a link of `gbps` gigabits per second."""
    return 8.0 / (gbps * 1e9)


@dataclass(frozen=True)
class LinkParameters:
    """alpha (s per all-reduce call) and beta (s per byte through a link), with where they came from."""

    alpha_s: float
    beta_s_per_byte: float
    source: str  # "given" | "probe" | "nominal bandwidth"
    note: str = ""

    @property
    def bandwidth_gbps(self) -> float:
        return 8.0 / self.beta_s_per_byte / 1e9 if self.beta_s_per_byte > 0 else math.inf


def link_from_probes(probes: pd.DataFrame) -> LinkParameters | None:
    """alpha and beta from all-reduce probe rows (size_bytes, time_s, world_size) of one configuration.

    time_s = alpha + ring(n) x size_bytes x beta, fitted by least squares with each point weighted by
    1/time_s (so small and large messages both count, as relative errors). None when fewer than two sizes.
    p2p rows (kind 'p2p') give beta directly as time = alpha + size x beta.
    """
    if probes is None or probes.empty:
        return None
    rows = probes.dropna(subset=["size_bytes", "time_s"])
    rows = rows[(rows["time_s"] > 0) & (rows["size_bytes"] > 0)]
    if "kind" in rows.columns and (rows["kind"] == "allreduce").any():
        rows = rows[rows["kind"] == "allreduce"]
        world = int(rows["world_size"].iloc[0]) if "world_size" in rows.columns else 2
        factor = ring_factor(world) or 1.0
    else:
        factor = 1.0
    if rows["size_bytes"].nunique() < 2:
        return None
    size = rows["size_bytes"].to_numpy(dtype=float)
    time_s = rows["time_s"].to_numpy(dtype=float)
    weights = 1.0 / time_s
    design = np.column_stack([np.ones_like(size), size * factor]) * weights[:, None]
    (alpha_s, beta), *_ = np.linalg.lstsq(design, time_s * weights, rcond=None)
    note = ""
    if beta <= 0:
        return None
    if alpha_s < 0:
        note = "probe latency fitted below zero, taken as 0"
        alpha_s = 0.0
    return LinkParameters(float(alpha_s), float(beta), "probe", note)


def calibrate_scale(measured_s: np.ndarray, comm_s: np.ndarray) -> float | None:
    """median(measured / comm) over points with comm > 0; None when there are none."""
    measured_s = np.asarray(measured_s, dtype=float)
    comm_s = np.asarray(comm_s, dtype=float)
    usable = comm_s > 0
    if not usable.any():
        return None
    return float(np.median(measured_s[usable] / comm_s[usable]))
