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

alpha and beta come from, in order: values given by the user; the `probes` table (Stash's one estimator,
analysis.comm.fit_alpha_beta_rows, on the same world size / nodes / instance); the link's nominal bandwidth
(emulated-cluster setting or the catalog's network Gbps), with alpha = 0. The ring factor, DDP's bucket sizes
and the wire time live in analysis/comm.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stash_core.analysis.comm import (
    DDP_BUCKET_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    alpha_beta_allreduce_s,
    beta_from_gbps,
    bucket_count,
    fit_alpha_beta_rows,
    ring_factor,
)
from stash_core.units import finite_float

# One name for the wire time, as the fits and predictions call it.
allreduce_time_s = alpha_beta_allreduce_s

__all__ = [
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "LinkParameters",
    "allreduce_time_s",
    "beta_from_gbps",
    "bucket_count",
    "calibrate_scale",
    "link_from_probes",
    "ring_factor",
]


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
    """alpha and beta from probe rows (size_bytes, time_s[, time_min_s], world_size, kind) of one
    configuration, by Stash's one estimator (analysis.comm.fit_alpha_beta_rows). All-reduce rows are used
    when there are any; otherwise p2p rows, whose time is alpha + size x beta (ring factor 1).
    None when fewer than two sizes.
    """
    if probes is None or probes.empty:
        return None
    rows = probes.dropna(subset=["size_bytes", "time_s"])
    rows = rows[(rows["time_s"] > 0) & (rows["size_bytes"] > 0)]
    world = 2  # a ring factor of 1: what p2p rows need
    if "kind" in rows.columns and (rows["kind"] == "allreduce").any():
        rows = rows[rows["kind"] == "allreduce"]
        world = int(rows["world_size"].iloc[0]) if "world_size" in rows.columns else 2
    records = [
        {
            "size_bytes": float(row["size_bytes"]),
            "time_s": float(row["time_s"]),
            "time_min_s": finite_float(row.get("time_min_s")),
        }
        for row in rows.to_dict(orient="records")
    ]
    fit = fit_alpha_beta_rows(records, world)
    if fit is None:
        return None
    return LinkParameters(fit[0], fit[1], "probe", _probe_sets_text(rows))


def _probe_sets_text(rows: pd.DataFrame) -> str:
    """Which probe sets a link came from: every set of the configuration is pooled, a `stash probe` run
    later among them, so the fit says so ("link from 3 probe sets: 2 from profiles, 1 from stash probe")."""
    if "probe_id" not in rows.columns or rows["probe_id"].isna().all():
        return ""
    sets = rows.drop_duplicates("probe_id")
    of_runs = int(sets["run_id"].notna().sum()) if "run_id" in sets.columns else 0
    counts = ((of_runs, "profiles"), (len(sets) - of_runs, "stash probe"))
    parts = [f"{count} from {what}" for count, what in counts if count]
    head = f"link from {len(sets)} probe set{'s' * (len(sets) != 1)}"
    if len(parts) == 1:  # "6 probe sets: 6 of profiles" read as garbled
        source = counts[0][1] if of_runs else counts[1][1]
        return f"{head} ({'all ' if len(sets) > 1 else ''}from {source})"
    return f"{head}: {', '.join(parts)}"


def calibrate_scale(measured_s: np.ndarray, comm_s: np.ndarray) -> float | None:
    """median(measured / comm) over points with comm > 0; None when there are none."""
    measured_s = np.asarray(measured_s, dtype=float)
    comm_s = np.asarray(comm_s, dtype=float)
    usable = comm_s > 0
    if not usable.any():
        return None
    return float(np.median(measured_s[usable] / comm_s[usable]))
