"""Predict the interconnect or network stall of a model that was never profiled, from its counts alone."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.models import ALPHA_BETA, FitReport, StallModel, fit_stall_models, group_label
from stash_core.decide.fit.observations import MODELLED_STALLS, format_gbps, split_instance_label
from stash_core.decide.fit.physics import LinkParameters, allreduce_time_s, beta_from_gbps, calibrate_scale
from stash_core.errors import UsageError


def model_counts(
    model: str, num_classes: int | None = None, input_shape: tuple[int, ...] | None = None
) -> dict:
    """Gradient bytes, gradient-tensor count and layer count of a zoo model or FILE.py:FACTORY."""
    return dict(_counts(model, num_classes, None if input_shape is None else tuple(input_shape)))


@functools.lru_cache(maxsize=64)
def _counts(model: str, num_classes: int | None, input_shape: tuple[int, ...] | None) -> dict:
    # Built on the meta device (no weights allocated); cached, as a page may ask again on every rerun.
    from stash_core.zoo import describe_model

    info = describe_model(model, num_classes=num_classes, input_shape=input_shape)
    return {
        "name": info.name,
        "param_count": info.param_count,
        "grad_bytes": info.grad_bytes,
        "grad_tensor_count": info.grad_tensor_count,
        "layer_count": info.layer_count,
    }


def predict_stall(
    db_path: Path | str | None = None,
    model: str | None = None,
    *,
    counts: dict[str, float] | None = None,
    stall: str = "interconnect",
    workers_per_node: int,
    nodes: int = 1,
    device: str | None = None,
    instance: str | None = None,
    bandwidth_gbps: float | None = None,
    batch_size: int | None = None,
    report: FitReport | None = None,
    num_classes: int | None = None,
    input_shape: tuple[int, ...] | None = None,
    alpha_s: float | None = None,
    beta_s_per_byte: float | None = None,
) -> dict[str, Any]:
    """Predicted stall seconds per iteration for `model` (or explicit `counts`) in one configuration.

    Uses the best-validated model of the matching configuration group; for a network bandwidth that was never
    profiled, the alpha-beta or pooled model of the same configuration at other bandwidths (whichever had the
    lower leave-one-bandwidth-out error); with no calibration data at all, the uncalibrated alpha-beta wire
    time of the link (when its bandwidth is known). Returns a dict with stall_s (None when nothing can be
    said), status ("predicted" | "predicted (uncalibrated ...)" | "no model: ..."), method, expected_mape,
    validated_by, group and candidates (every model's prediction with its held-out errors).
    """
    if stall not in MODELLED_STALLS:
        raise UsageError(f"stall must be one of {', '.join(MODELLED_STALLS)}, got {stall!r}")
    if workers_per_node is None or workers_per_node < 1 or nodes is None or nodes < 1:
        raise UsageError("workers per node and nodes must be at least 1")
    if counts is None:
        if model is None:
            raise UsageError("name a model (zoo name or FILE.py:FACTORY) or give its counts")
        counts = model_counts(model, num_classes, input_shape)
    missing = [key for key in ("grad_bytes", "grad_tensor_count", "layer_count") if counts.get(key) is None]
    if missing:
        raise UsageError(f"model counts lack {', '.join(missing)}")
    world = workers_per_node * (nodes if stall == "network" else 1)
    result: dict[str, Any] = {
        "stall": stall,
        "model": model or counts.get("name"),
        "counts": dict(counts),
        "stall_s": None,
        "status": "",
        "method": None,
        "expected_mape": None,
        "validated_by": None,
        "group": None,
        "candidates": [],
    }
    if world <= 1 or (stall == "network" and nodes <= 1):
        result.update(
            stall_s=0.0,
            status="predicted",
            method="none needed",
            expected_mape=0.0,
            validated_by="a single worker/machine has no such stall",
        )
        return result
    if report is None:
        if db_path is None:
            raise UsageError("give a database or a fit report")
        report = fit_stall_models(db_path, stalls=(stall,), alpha_s=alpha_s, beta_s_per_byte=beta_s_per_byte)
    wanted = {
        "device": device,
        "workers_per_node": workers_per_node,
        "instance": split_instance_label(instance)[0],
        "batch_size": batch_size,
    }
    if stall == "network":
        wanted |= {"nodes": nodes, "bandwidth_gbps": bandwidth_gbps}
    exact = _matching_groups(report, stall, wanted)
    if len(exact) > 1:
        labels = "; ".join(group_label(stall, group) for group in exact[:4])
        raise UsageError(f"several profiled configurations match ({labels}): name the instance or bandwidth")
    if exact:
        return _from_group(result, report, stall, exact[0], counts, world)
    if stall == "network" and bandwidth_gbps is not None:
        family = _matching_groups(report, stall, {k: v for k, v in wanted.items() if k != "bandwidth_gbps"})
        if family:
            return _from_family(result, report, stall, family, counts, world, bandwidth_gbps)
        relatives = _matching_groups(
            report, stall, {k: v for k, v in wanted.items() if k not in ("bandwidth_gbps", "nodes")}
        )
        if relatives:
            answer = _from_other_node_counts(result, report, stall, relatives, counts, world, bandwidth_gbps)
            if answer["stall_s"] is not None:
                return answer
    return _uncalibrated(result, stall, counts, world, bandwidth_gbps, alpha_s, beta_s_per_byte)


def _matching_groups(report: FitReport, stall: str, wanted: dict[str, Any]) -> list[dict[str, Any]]:
    matches = []
    for group in report.groups(stall):
        ok = True
        for key, value in wanted.items():
            if value is None or key not in group:
                continue
            stored = group[key]
            if key == "bandwidth_gbps":
                ok = stored is not None and math.isclose(float(stored), float(value), rel_tol=1e-6)
            else:
                ok = stored == value
            if not ok:
                break
        if ok:
            matches.append(group)
    return matches


def _candidate_row(model: StallModel, value: float | None) -> dict[str, Any]:
    return {
        "fit": model.name,
        "stall_s": value,
        "lomo_mape": model.lomo_mape,
        "lobo_mape": model.lobo_mape,
        "best": model.best,
    }


def _from_group(
    result: dict[str, Any], report: FitReport, stall: str, group: dict[str, Any], counts: dict, world: int
) -> dict[str, Any]:
    models = report.models_for(stall, group)
    result["group"] = group_label(stall, group)
    result["candidates"] = [_candidate_row(model, model.predict(counts, world)) for model in models]
    best = next((model for model in models if model.best), None)
    if best is None:
        result["status"] = "no model: too few profiled models in this configuration to fit one"
        return result
    value = best.predict(counts, world)
    result.update(
        stall_s=None if value is None else max(0.0, value),
        method=best.name,
        expected_mape=best.lomo_mape,
        status="predicted",
        validated_by="leave-one-model-out" if best.lomo_mape is not None else "not validated",
    )
    return result


def _from_family(
    result: dict[str, Any],
    report: FitReport,
    stall: str,
    family: list[dict[str, Any]],
    counts: dict,
    world: int,
    bandwidth_gbps: float,
) -> dict[str, Any]:
    """A bandwidth never profiled: calibrate on every bandwidth of the configuration, swap in the new beta."""
    models = [model for group in family for model in report.models_for(stall, group)]
    alpha_beta = [model for model in models if model.name == ALPHA_BETA and model.link is not None]
    pooled = [model for model in models if model.kind == "pooled-linear"]
    alpha = float(np.median([model.link.alpha_s for model in alpha_beta])) if alpha_beta else 0.0
    link = LinkParameters(alpha, beta_from_gbps(bandwidth_gbps), "nominal bandwidth")
    label = (
        f"{group_label(stall, family[0]).rsplit(' / ', 1)[0]} / {format_gbps(bandwidth_gbps)} (not profiled)"
    )
    result["group"] = label
    candidates = []
    if alpha_beta:
        wire_s = np.concatenate([model.residuals["wire_s"].to_numpy(dtype=float) for model in alpha_beta])
        measured = np.concatenate(
            [model.residuals["measured_s"].to_numpy(dtype=float) for model in alpha_beta]
        )
        scale = calibrate_scale(measured, wire_s)
        scale = 1.0 if scale is None else scale
        value = scale * allreduce_time_s(counts["grad_bytes"], world, link.alpha_s, link.beta_s_per_byte)
        errors = [model.lobo_mape for model in alpha_beta if model.lobo_mape is not None]
        candidates.append(
            {
                "fit": ALPHA_BETA,
                "stall_s": value,
                "lomo_mape": None,
                "lobo_mape": float(np.mean(errors)) if errors else None,
                "best": False,
            }
        )
    if pooled:
        value = pooled[0].predict(counts, world, link=link)
        errors = [model.lobo_mape for model in pooled if model.lobo_mape is not None]
        candidates.append(
            {
                "fit": pooled[0].name,
                "stall_s": value,
                "lomo_mape": None,
                "lobo_mape": float(np.mean(errors)) if errors else None,
                "best": False,
            }
        )
    if not candidates:
        result["status"] = "no model: the profiled bandwidths of this configuration have no alpha-beta link"
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
    )
    return result


def _from_other_node_counts(
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
    wire_s = np.concatenate([model.residuals["wire_s"].to_numpy(dtype=float) for model in alpha_beta])
    measured = np.concatenate([model.residuals["measured_s"].to_numpy(dtype=float) for model in alpha_beta])
    scale = calibrate_scale(measured, wire_s)
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
    )
    return result


def _uncalibrated(
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
            f"no model: no profiled {stall} stall for this configuration and no link bandwidth to bound it"
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


def predictions_frame(report: FitReport, counts: dict[str, float], stall: str) -> pd.DataFrame:
    """Every group's best-model prediction for one model's counts (for the Models page)."""
    rows = []
    for group in report.groups(stall):
        best = report.best(stall, group)
        if best is None:
            continue
        world = int(group["workers_per_node"]) * (int(group.get("nodes") or 1) if stall == "network" else 1)
        value = best.predict(counts, world)
        rows.append(
            {
                "group": group_label(stall, group),
                "fit": best.name,
                "stall_s": None if value is None else max(0.0, value),
                "expected_mape": best.lomo_mape,
            }
        )
    return pd.DataFrame(rows, columns=["group", "fit", "stall_s", "expected_mape"])
