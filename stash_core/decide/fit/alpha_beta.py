"""The alpha-beta model of a stall: the wire time of a group's link times one scale calibrated on other DNNs.

The link's alpha and beta come from the user, the probes of the configuration, or its nominal bandwidth
(group_link); the physics is physics.py's.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.physics import (
    LinkParameters,
    allreduce_time_s,
    beta_from_gbps,
    calibrate_scale,
    link_from_probes,
)
from stash_core.decide.fit.stall_model import ALPHA_BETA, StallModel
from stash_core.decide.fit.validation import heldout_mape, lomo_scaled, r2, residual_frame
from stash_core.units import finite_float


def group_link(
    stall: str,
    group: dict[str, Any],
    instance_labels: list[str],
    probes: pd.DataFrame | None,
    given: LinkParameters | None = None,
) -> LinkParameters | None:
    """alpha/beta of a configuration: given, else from matching probes, else from its nominal bandwidth."""
    if given is not None:
        return given
    if probes is not None and not probes.empty:
        link = link_from_probes(_matching_probes(stall, group, instance_labels, probes))
        if link is not None:
            return link
    if stall == "network":
        gbps = finite_float(group.get("bandwidth_gbps"))
        if gbps is not None and gbps > 0:
            return LinkParameters(
                0.0, beta_from_gbps(gbps), "nominal bandwidth", "no probe: alpha taken as 0"
            )
    return None


def _matching_probes(
    stall: str, group: dict[str, Any], instance_labels: list[str], probes: pd.DataFrame
) -> pd.DataFrame:
    """The probe rows of the group's world size, node count, device and instance (any of its labels)."""
    nodes = int(group.get("nodes") or 1) if stall == "network" else 1
    world = int(group["workers_per_node"]) * nodes
    match = probes[(pd.to_numeric(probes["world_size"], errors="coerce") == world)]
    match = match[pd.to_numeric(match["nodes"], errors="coerce").fillna(1) == nodes]
    if group.get("device") is not None:
        match = match[match["device"].isna() | (match["device"] == group["device"])]
    labels = {label for label in instance_labels if label} | {group.get("instance")}
    return match[match["instance"].isin(labels)]


def comm_s(frame: pd.DataFrame, link: LinkParameters) -> np.ndarray:
    """The wire time of every point's gradient all-reduce on `link`."""
    grad_bytes, world_size = frame["grad_bytes"].to_numpy(dtype=float), frame["world_size"].to_numpy()
    return np.array(
        [
            allreduce_time_s(float(size), int(world), link.alpha_s, link.beta_s_per_byte)
            for size, world in zip(grad_bytes, world_size, strict=True)
        ]
    )


def alpha_beta_stall_model(
    stall: str, group: dict[str, Any], frame: pd.DataFrame, link: LinkParameters | None
) -> StallModel:
    """The calibrated alpha-beta model of one group; without a link, a row saying why it is not available."""
    y = frame["stall_s"].to_numpy(dtype=float)
    models = frame["dnn"].nunique()
    common = {
        "stall": stall,
        "group": group,
        "name": ALPHA_BETA,
        "kind": "alpha-beta",
        "features": ("grad_bytes",),
        "points": len(frame),
        "models": models,
    }
    if link is None:
        why = "no bandwidth probe for this configuration (or give --alpha-s/--beta-s-per-byte)"
        return StallModel(**common, r2=None, lomo_mape=None, note=f"not available: {why}")
    comm = comm_s(frame, link)
    scale = calibrate_scale(y, comm)
    fitted = (1.0 if scale is None else scale) * comm
    heldout = lomo_scaled(frame["dnn"], y, comm)
    notes = [link.note] if link.note else []
    if scale is not None and scale > 1:
        notes.append(f"stall is {scale:.2g}x the wire time: contention or a slower link than assumed")
    return StallModel(
        **common,
        r2=r2(y, fitted),
        lomo_mape=heldout_mape(heldout, y),
        note="; ".join(notes),
        link=link,
        scale=scale,
        residuals_of=partial(residual_frame, stall, group, ALPHA_BETA, frame, fitted, heldout, wire_s=comm),
    )
