"""Stall predictions for configurations that were never profiled, from their profiled relatives.

A new bandwidth of a profiled configuration: its alpha-beta scale or pooled model calibrated over the profiled
bandwidths, with the new beta. Another node count: the alpha-beta scale of the same machines at the profiled
node counts (not validated). Nothing profiled at all: the uncalibrated alpha-beta wire time of the link.
Each fills in the `result` dict of predict.predict_stall.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stash_core.decide.fit.extrapolation import extrapolation_note, gradient_bytes_note, joined_notes
from stash_core.decide.fit.observations import format_gbps
from stash_core.decide.fit.physics import LinkParameters, allreduce_time_s, beta_from_gbps, calibrate_scale
from stash_core.decide.fit.report import FitReport
from stash_core.decide.fit.stall_model import ALPHA_BETA, StallModel, group_label


def from_other_bandwidth(
    result: dict[str, Any],
    report: FitReport,
    stall: str,
    family: list[dict[str, Any]],
    counts: dict,
    world: int,
    bandwidth_gbps: float,
) -> dict[str, Any]:
    """A bandwidth never profiled: calibrate on every bandwidth of the configuration, swap in the new beta."""
    every = [model for group in family for model in report.models_for(stall, group)]
    # Judged by leaving a bandwidth out where two or more were profiled; from one, only a fit on as many
    # DNNs as a profiled bandwidth's answer needs may answer (one profile answered with a bare "predicted").
    judged = len(family) >= 2
    models = [model for model in every if judged or model.enough_points]
    alpha_beta = [model for model in models if model.name == ALPHA_BETA and model.link is not None]
    # a pooled fit whose features are collinear splits the stall between them arbitrarily: it never answers
    pooled = [model for model in models if model.kind == "pooled-linear" and not model.linear.rank_deficient]
    short = next((model.shortfall for model in every if model.name == ALPHA_BETA and model.shortfall), "")
    alpha = float(np.median([model.link.alpha_s for model in alpha_beta])) if alpha_beta else 0.0
    link = LinkParameters(alpha, beta_from_gbps(bandwidth_gbps), "nominal bandwidth")
    label = (
        f"{group_label(stall, family[0]).rsplit(' / ', 1)[0]} / {format_gbps(bandwidth_gbps)} (not profiled)"
    )
    result["group"] = label
    candidates = []
    if alpha_beta:
        scale = _scale_over(alpha_beta)
        scale = 1.0 if scale is None else scale
        value = scale * allreduce_time_s(counts["grad_bytes"], world, link.alpha_s, link.beta_s_per_byte)
        candidates.append(_bandwidth_candidate(ALPHA_BETA, value, alpha_beta))
    if pooled:
        candidates.append(
            _bandwidth_candidate(pooled[0].name, pooled[0].predict(counts, world, link=link), pooled)
        )
    if not candidates:
        why = short or "the profiled bandwidths of this configuration have no alpha-beta link"
        result["status"] = f"no model: {why}"
        return result
    scored = [row for row in candidates if row["lobo_mape"] is not None]
    best = min(scored, key=lambda row: row["lobo_mape"]) if scored else candidates[0]
    best["best"] = True
    result["candidates"] = candidates
    result.update(
        stall_s=max(0.0, best["stall_s"]),
        method=best["fit"],
        expected_mape=best["lobo_mape"],
        status="predicted",
        validated_by="leave-one-bandwidth-out"
        if best["lobo_mape"] is not None
        else "not validated (one bandwidth profiled)",
        note=joined_notes(
            extrapolation_note(
                bandwidth_gbps, [group.get("bandwidth_gbps") for group in family], "bandwidth", format_gbps
            ),
            gradient_bytes_note(counts["grad_bytes"], alpha_beta + pooled),
        ),
    )
    return result


def _bandwidth_candidate(fit: str, value: float | None, models: list[StallModel]) -> dict[str, Any]:
    """A candidate at a new bandwidth, with the mean leave-one-bandwidth-out error of its models."""
    errors = [model.lobo_mape for model in models if model.lobo_mape is not None]
    return {
        "fit": fit,
        "stall_s": value,
        "lomo_mape": None,
        "lobo_mape": float(np.mean(errors)) if errors else None,
        "best": False,
    }


def _scale_over(alpha_beta: list[StallModel]) -> float | None:
    """The alpha-beta scale calibrated on every point of these models together."""
    wire_s = np.concatenate([model.residuals["wire_s"].to_numpy(dtype=float) for model in alpha_beta])
    measured = np.concatenate([model.residuals["measured_s"].to_numpy(dtype=float) for model in alpha_beta])
    return calibrate_scale(measured, wire_s)


def from_other_node_counts(
    result: dict[str, Any],
    report: FitReport,
    stall: str,
    relatives: list[dict[str, Any]],
    counts: dict,
    world: int,
    bandwidth_gbps: float,
) -> dict[str, Any]:
    """Another node count: the alpha-beta scale of the same machines at the profiled node counts.

    The ring factor carries the change in workers; the scale (overlap, contention) is assumed to carry over.
    There is nothing held out to validate that on, so the expected error stays unknown.
    """
    alpha_beta = [
        model
        for group in relatives
        for model in report.models_for(stall, group)
        if model.name == ALPHA_BETA and model.link is not None and not model.residuals.empty
    ]
    if not alpha_beta:
        return result
    scale = _scale_over(alpha_beta)
    if scale is None:
        return result
    alpha = float(np.median([model.link.alpha_s for model in alpha_beta]))
    value = scale * allreduce_time_s(counts["grad_bytes"], world, alpha, beta_from_gbps(bandwidth_gbps))
    nodes = sorted({int(group.get("nodes") or 1) for group in relatives})
    result.update(
        stall_s=value,
        method=f"{ALPHA_BETA} calibrated at {', '.join(map(str, nodes))} node(s)",
        status="predicted (scale calibrated on other node counts; error unknown)",
        validated_by="not validated",
        group=f"{group_label(stall, relatives[0]).split(' / ')[0]} / {world} workers at "
        f"{format_gbps(bandwidth_gbps)} (not profiled)",
        candidates=[
            {"fit": ALPHA_BETA, "stall_s": value, "lomo_mape": None, "lobo_mape": None, "best": True}
        ],
        note=gradient_bytes_note(counts["grad_bytes"], alpha_beta),
    )
    return result


# Why a stall never profiled has no prediction without a link's rate (`stash fit --predict` names options).
NO_LINK = "no link bandwidth to bound it"


def uncalibrated(
    result: dict[str, Any],
    stall: str,
    counts: dict,
    world: int,
    bandwidth_gbps: float | None,
    alpha_s: float | None,
    beta_s_per_byte: float | None,
) -> dict[str, Any]:
    if beta_s_per_byte is not None and beta_s_per_byte > 0:
        link = LinkParameters(alpha_s or 0.0, beta_s_per_byte, "given")
    elif stall == "network" and bandwidth_gbps:
        link = LinkParameters(0.0, beta_from_gbps(bandwidth_gbps), "nominal bandwidth")
    else:
        result["status"] = (
            f"no model: no profiled {stall} stall for this configuration and {NO_LINK}"
        )
        return result
    value = allreduce_time_s(counts["grad_bytes"], world, link.alpha_s, link.beta_s_per_byte)
    result.update(
        stall_s=value,
        method=f"{ALPHA_BETA} (uncalibrated, {format_gbps(link.bandwidth_gbps)})",
        status="predicted (uncalibrated wire time: no overlap or contention known; error unknown)",
        validated_by="not validated",
        group="(not profiled)",
    )
    result["candidates"] = [
        {"fit": result["method"], "stall_s": value, "lomo_mape": None, "lobo_mape": None, "best": True}
    ]
    return result
