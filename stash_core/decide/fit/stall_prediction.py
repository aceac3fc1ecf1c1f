"""Predict the interconnect or network stall of a model that was never profiled, from its counts alone.

The answer comes from, in order: the best-validated model of the matching configuration group; for a network
bandwidth never profiled, the alpha-beta or pooled model of the same configuration at other bandwidths; for
another node count, the alpha-beta scale of the same machines at the profiled node counts; with no
calibration data at all, the uncalibrated alpha-beta wire time of the link (when its bandwidth is known).
The last three are in unprofiled.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.cells import is_missing
from stash_core.decide.fit.counts import model_counts
from stash_core.decide.fit.extrapolation import gradient_bytes_note
from stash_core.decide.fit.observations import FEATURES, MODELLED_STALLS, split_instance_label
from stash_core.decide.fit.report import FitReport
from stash_core.decide.fit.selection import fit_stall_models
from stash_core.decide.fit.stall_model import StallModel, group_label, same_group
from stash_core.decide.fit.unprofiled import from_other_bandwidth, from_other_node_counts, uncalibrated
from stash_core.errors import UsageError

COUNT_KEYS = ("grad_bytes", "grad_tensor_count", "layer_count")


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
    _check_configuration(stall, workers_per_node, nodes)
    counts = _checked_counts(model, counts, num_classes, input_shape)
    world = workers_per_node * (nodes if stall == "network" else 1)
    result = _blank_result(stall, model or counts.get("name"), counts)
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
    base_label, label_gbps = split_instance_label(instance)
    if (
        stall == "network" and label_gbps is not None
    ):  # emulated@1gbit names its bandwidth, as campaigns write
        if bandwidth_gbps is not None and not math.isclose(bandwidth_gbps, label_gbps, rel_tol=1e-6):
            raise UsageError(
                f"instance {instance} is at {label_gbps:g} Gbit/s and the bandwidth given is "
                f"{bandwidth_gbps:g} Gbit/s: give one of them"
            )
        bandwidth_gbps = label_gbps
    wanted = {
        "device": device,
        "workers_per_node": workers_per_node,
        "instance": base_label,
        "batch_size": batch_size,
    }
    if stall == "network":
        wanted |= {"nodes": nodes, "bandwidth_gbps": bandwidth_gbps}
    answer = _from_profiled(result, report, stall, wanted, counts, world, bandwidth_gbps)
    # a link given by the user (one for every configuration), or the network's bandwidth asked for
    link_given = (beta_s_per_byte is not None and beta_s_per_byte > 0) or (
        stall == "network" and bandwidth_gbps is not None
    )
    if answer is not None and (answer["stall_s"] is not None or not link_given):
        return answer
    # Nothing profiled speaks to this configuration, or too little to fit a model: the link's wire time,
    # said as uncalibrated (a link given by the user is one link for every configuration)
    group, why = (answer["group"], answer["status"].removeprefix("no model: ")) if answer else (None, "")
    found = uncalibrated(result, stall, counts, world, bandwidth_gbps, alpha_s, beta_s_per_byte)
    if group and found["stall_s"] is not None:
        found["group"] = group
        found["note"] = f"no model of this profiled configuration yet ({why}): the link given answers"
    return found


def _check_configuration(stall: str, workers_per_node: int, nodes: int) -> None:
    if stall not in MODELLED_STALLS:
        raise UsageError(f"stall must be one of {', '.join(MODELLED_STALLS)}, got {stall!r}")
    if workers_per_node is None or workers_per_node < 1 or nodes is None or nodes < 1:
        raise UsageError("workers per node and nodes must be at least 1")


def _checked_counts(
    model: str | None,
    counts: dict[str, float] | None,
    num_classes: int | None,
    input_shape: tuple[int, ...] | None,
) -> dict[str, Any]:
    if counts is None:
        if model is None:
            raise UsageError("name a model (zoo name or FILE.py:FACTORY) or give its counts")
        counts = model_counts(model, num_classes, input_shape)
    missing = [key for key in COUNT_KEYS if counts.get(key) is None]
    if missing:
        raise UsageError(f"model counts lack {', '.join(missing)}")
    return counts


def _blank_result(stall: str, model: str | None, counts: dict[str, Any]) -> dict[str, Any]:
    return {
        "stall": stall,
        "model": model,
        "counts": dict(counts),
        "stall_s": None,
        "status": "",
        "method": None,
        "expected_mape": None,
        "validated_by": None,
        "group": None,
        "candidates": [],
        "note": None,
        "measured_s": None,  # the model's own stall where this configuration profiled it (mean of its runs)
        "measured_ci95_s": None,  # that mean's interval, from its runs' own (None where one lacks one)
        "measured_runs": 0,
    }


def _from_profiled(
    result: dict[str, Any],
    report: FitReport,
    stall: str,
    wanted: dict[str, Any],
    counts: dict,
    world: int,
    bandwidth_gbps: float | None,
) -> dict[str, Any] | None:
    """The answer from the profiled configurations; None when none of them speaks to this one."""
    exact = _matching_groups(report, stall, wanted)
    if len(exact) > 1 and wanted.get("instance") is None:
        # no instance named: the runs made without one, where they are a configuration of their own
        unlabelled = [group for group in exact if group.get("instance") is None]
        exact = unlabelled if len(unlabelled) == 1 else exact
    if len(exact) > 1:
        labels = "; ".join(group_label(stall, group) for group in exact[:4])
        which = "instance, bandwidth or batch size" if "batch_size" in exact[0] else "instance or bandwidth"
        raise UsageError(f"several profiled configurations match ({labels}): name the {which}")
    if exact:
        return _from_group(result, report, stall, exact[0], counts, world)
    if stall != "network" or bandwidth_gbps is None:
        return None
    family = _matching_groups(report, stall, {k: v for k, v in wanted.items() if k != "bandwidth_gbps"})
    if family:
        return from_other_bandwidth(result, report, stall, family, counts, world, bandwidth_gbps)
    relatives = _matching_groups(
        report, stall, {k: v for k, v in wanted.items() if k not in ("bandwidth_gbps", "nodes")}
    )
    if relatives:
        answer = from_other_node_counts(result, report, stall, relatives, counts, world, bandwidth_gbps)
        if answer["stall_s"] is not None:
            return answer
    return None


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
    result["measured_s"], result["measured_ci95_s"], result["measured_runs"] = _measured(
        report, stall, group, counts
    )
    result["candidates"] = [_candidate_row(model, model.predict(counts, world)) for model in models]
    best = next((model for model in models if model.best), None)
    if best is None:
        short = report.shortfall(stall, group)
        result["status"] = f"no model: {short or 'too few profiled models in this configuration to fit one'}"
        return result
    value = best.predict(counts, world)
    result.update(
        stall_s=None if value is None else max(0.0, value),
        method=best.name,
        expected_mape=best.lomo_mape,
        status="predicted",
        validated_by="leave-one-model-out" if best.lomo_mape is not None else "not validated",
        note=gradient_bytes_note(counts["grad_bytes"], [best]),
    )
    return result


def _measured(
    report: FitReport, stall: str, group: dict[str, Any], counts: dict
) -> tuple[float | None, float | None, int]:
    """(mean stall, its 95% interval, runs) of the runs of this model (its counts) in the group: a prediction
    of a model profiled there is shown beside what was measured, not instead of it. The runs are
    independent, so the mean's interval is the root of the sum of their squared intervals over their count."""
    rows = report.observations
    if rows.empty or "stall_s" not in rows:
        return None, None, 0
    rows = rows[rows["stall"] == stall]
    for feature in FEATURES:
        rows = rows[pd.to_numeric(rows[feature], errors="coerce") == float(counts.get(feature) or math.nan)]
    # an unlabelled run's instance is NaN in the observations, None in a group
    plain = [{key: None if is_missing(value) else value for key, value in row.items()} for row in
             rows.to_dict(orient="records")]  # fmt: skip
    here = [row for row in plain if same_group(group, row) and row["stall_s"] is not None]
    if not here:
        return None, None, 0
    intervals = [row.get("ci95_s") for row in here]
    ci95_s = None if None in intervals else math.sqrt(sum(ci**2 for ci in intervals)) / len(here)
    return sum(row["stall_s"] for row in here) / len(here), ci95_s, len(here)


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
