"""Models of interconnect and network stall per configuration, each validated on what it never saw.

For every configuration group (see observations.GROUP_COLUMNS) and stall:
  - linear least-squares fits of the stall against gradient bytes, gradient-tensor count and layer count,
    alone and combined, with R² and residuals;
  - the physical alpha-beta model (physics.py), whose only per-configuration constant is calibrated on the
    other models;
  - for network stall, a linear model pooled over the bandwidths of one configuration, on the features
    "wire time" (ring factor x bytes / bandwidth) and DDP bucket count, which can predict a new bandwidth.
Beside every model: leave-one-model-out MAPE (every point predicted by a model fitted without any run of
its DNN) and, for network stall, leave-one-bandwidth-out MAPE. The model with the lowest held-out error
in a group is marked best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.linear import LinearFit, fit_linear, mape
from stash_core.decide.fit.observations import (
    FEATURES,
    GROUP_COLUMNS,
    MODELLED_STALLS,
    format_gbps,
    load_observations,
    load_probes,
)
from stash_core.decide.fit.physics import (
    LinkParameters,
    allreduce_time_s,
    beta_from_gbps,
    bucket_count,
    calibrate_scale,
    link_from_probes,
    ring_factor,
)

LINEAR_FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "bytes": ("grad_bytes",),
    "tensors": ("grad_tensor_count",),
    "layers": ("layer_count",),
    "bytes+tensors": ("grad_bytes", "grad_tensor_count"),
    "bytes+layers": ("grad_bytes", "layer_count"),
    "bytes+tensors+layers": ("grad_bytes", "grad_tensor_count", "layer_count"),
}
ALPHA_BETA = "alpha-beta"
POOLED = "wire+buckets (all bandwidths)"
_POOLED_FEATURES = ("wire_s", "buckets")
SUMMARY_COLUMNS = [
    "stall", "group", "model", "kind", "points", "models", "r2", "lomo_mape", "lobo_mape", "best",
    "coefficients", "note",
]  # fmt: skip


@dataclass
class StallModel:
    """One fitted (or calibrated) model of one stall in one configuration group."""

    stall: str
    group: dict[str, Any]
    name: str
    kind: str  # "linear" | "alpha-beta" | "pooled-linear"
    features: tuple[str, ...]
    points: int
    models: int
    r2: float | None
    lomo_mape: float | None
    lobo_mape: float | None = None
    note: str = ""
    best: bool = False
    linear: LinearFit | None = None
    link: LinkParameters | None = None
    scale: float | None = None
    residuals: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def group_label(self) -> str:
        return group_label(self.stall, self.group)

    @property
    def expected_error(self) -> float | None:
        """The held-out error to expect of a prediction for a new model: its leave-one-model-out MAPE."""
        return self.lomo_mape

    def coefficients_text(self) -> str:
        if self.kind == "alpha-beta" and self.link is not None:
            scale = "uncalibrated (scale 1)" if self.scale is None else f"scale {self.scale:.3g}"
            overlap = ""
            if self.scale is not None and self.scale < 1:
                overlap = f" (overlap {1 - self.scale:.0%})"
            return (
                f"alpha {self.link.alpha_s * 1e6:.3g} us/bucket, "
                f"beta from {format_gbps(self.link.bandwidth_gbps)}"
                f" ({self.link.source}), {scale}{overlap}"
            )
        if self.linear is None:
            return ""
        parts = [f"{self.linear.intercept:.4g} s"]
        for name, value in zip(self.linear.features, self.linear.coefficients, strict=True):
            parts.append(f"{value:+.4g} x {name}")
        return " ".join(parts)

    def predict(
        self, counts: dict[str, float], world_size: int, link: LinkParameters | None = None
    ) -> float | None:
        """Stall seconds for a model with these counts (grad_bytes, grad_tensor_count, layer_count).

        `link` replaces the group's alpha/beta (used to predict another bandwidth); `world_size` is the number
        of workers taking part in the all-reduce.
        """
        link = link or self.link
        if self.kind == "linear" and self.linear is not None:
            # A stall cannot be negative: a line extrapolated below zero predicts none.
            return max(0.0, float(self.linear.predict([[float(counts[name]) for name in self.features]])[0]))
        if link is None:
            return None
        if self.kind == "pooled-linear" and self.linear is not None:
            return max(
                0.0, float(self.linear.predict([_pooled_features(counts["grad_bytes"], world_size, link)])[0])
            )
        if self.kind == "alpha-beta":
            comm_s = allreduce_time_s(counts["grad_bytes"], world_size, link.alpha_s, link.beta_s_per_byte)
            return (1.0 if self.scale is None else self.scale) * comm_s
        return None


@dataclass
class FitReport:
    """All models of all groups, the observations they came from, and how to query them."""

    observations: pd.DataFrame
    models: list[StallModel]
    probes: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary(self) -> pd.DataFrame:
        """One row per model: stall, group, model, points, models, R², MAPEs, best, coefficients, note."""
        rows = []
        for model in self.models:
            rows.append(
                {
                    "stall": model.stall,
                    "group": model.group_label,
                    **{f"group_{k}": v for k, v in model.group.items()},
                    "model": model.name,
                    "kind": model.kind,
                    "points": model.points,
                    "models": model.models,
                    "r2": model.r2,
                    "lomo_mape": model.lomo_mape,
                    "lobo_mape": model.lobo_mape,
                    "best": model.best,
                    "coefficients": model.coefficients_text(),
                    "note": model.note,
                }
            )
        if not rows:
            return pd.DataFrame(columns=SUMMARY_COLUMNS)
        return pd.DataFrame(rows)

    def residuals(self) -> pd.DataFrame:
        """Per point and model: measured, fitted (in-sample) and held-out predictions and residuals."""
        frames = [model.residuals for model in self.models if not model.residuals.empty]
        if not frames:
            return pd.DataFrame(
                columns=[
                    "stall",
                    "group",
                    "fit",
                    "run_id",
                    "model",
                    *FEATURES,
                    "measured_s",
                    "fitted_s",
                    "residual_s",
                    "heldout_s",
                    "wire_s",
                ]
            )
        return pd.concat(frames, ignore_index=True)

    def groups(self, stall: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        for model in self.models:
            if model.stall == stall and model.group not in seen:
                seen.append(model.group)
        return seen

    def models_for(self, stall: str, group: dict[str, Any]) -> list[StallModel]:
        return [model for model in self.models if model.stall == stall and _same_group(model.group, group)]

    def best(self, stall: str, group: dict[str, Any]) -> StallModel | None:
        for model in self.models_for(stall, group):
            if model.best:
                return model
        return None


def group_label(stall: str, group: dict[str, Any]) -> str:
    parts = [str(group.get("device") or "?")]
    workers = group.get("workers_per_node")
    nodes = group.get("nodes")
    if stall == "network" and nodes is not None:
        parts.append(f"{nodes} nodes x {workers} workers")
    else:
        parts.append(f"{workers} workers")
    parts.append(str(group.get("instance") or "(no instance)"))
    if stall == "network":
        parts.append(format_gbps(group.get("bandwidth_gbps")))
    if group.get("batch_size") is not None:
        parts.append(f"batch {group['batch_size']}")
    return " / ".join(parts)


def fit_stall_models(
    db_path: Path | str | None = None,
    *,
    observations: pd.DataFrame | None = None,
    probes: pd.DataFrame | None = None,
    stalls: tuple[str, ...] = MODELLED_STALLS,
    alpha_s: float | None = None,
    beta_s_per_byte: float | None = None,
    by_batch_size: bool = False,
) -> FitReport:
    """Fit and validate every model for every configuration group found in the store (or in `observations`).

    alpha_s / beta_s_per_byte, when given, replace probes and nominal bandwidths in the alpha-beta model.
    by_batch_size adds the per-worker batch size to the group key (overlap with backward depends on it).
    """
    if observations is None:
        if db_path is None:
            raise ValueError("give db_path or observations")
        observations = load_observations(db_path)
    if probes is None:
        probes = load_probes(db_path) if db_path is not None else pd.DataFrame()
    given = None
    if alpha_s is not None or beta_s_per_byte is not None:
        if beta_s_per_byte is None or beta_s_per_byte <= 0:
            from stash_core.errors import UsageError

            raise UsageError("give a positive beta (seconds per byte) together with alpha")
        given = LinkParameters(max(0.0, alpha_s or 0.0), beta_s_per_byte, "given")
    models: list[StallModel] = []
    for stall in stalls:
        rows = observations[observations["stall"] == stall]
        if rows.empty:
            continue
        key = group_key(stall, by_batch_size)
        models += _fit_stall(stall, rows, key, probes, given)
    return FitReport(observations=observations, models=models, probes=probes)


def group_key(stall: str, by_batch_size: bool = False) -> tuple[str, ...]:
    key = GROUP_COLUMNS[stall]
    return (*key, "batch_size") if by_batch_size else key


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
        nodes = int(group.get("nodes") or 1) if stall == "network" else 1
        world = int(group["workers_per_node"]) * nodes
        match = probes[(pd.to_numeric(probes["world_size"], errors="coerce") == world)]
        match = match[pd.to_numeric(match["nodes"], errors="coerce").fillna(1) == nodes]
        if group.get("device") is not None:
            match = match[match["device"].isna() | (match["device"] == group["device"])]
        labels = {label for label in instance_labels if label} | {group.get("instance")}
        match = match[match["instance"].isin(labels)]
        link = link_from_probes(match)
        if link is not None:
            return link
    if stall == "network":
        gbps = group.get("bandwidth_gbps")
        if gbps is not None and not (isinstance(gbps, float) and math.isnan(gbps)) and gbps > 0:
            return LinkParameters(
                0.0, beta_from_gbps(float(gbps)), "nominal bandwidth", "no probe: alpha taken as 0"
            )
    return None


def _fit_stall(
    stall: str, rows: pd.DataFrame, key: tuple[str, ...], probes: pd.DataFrame, given: LinkParameters | None
) -> list[StallModel]:
    groups: list[tuple[dict[str, Any], pd.DataFrame]] = []
    for values, frame in rows.groupby(list(key), dropna=False, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        group = {column: _plain(value) for column, value in zip(key, values, strict=True)}
        groups.append((group, frame.reset_index(drop=True)))
    links = {
        id(frame): group_link(stall, group, list(frame["instance_label"].dropna().unique()), probes, given)
        for group, frame in groups
    }
    out: list[StallModel] = []
    for group, frame in groups:
        candidates = [
            _fit_linear_model(stall, group, frame, name, features)
            for name, features in LINEAR_FEATURE_SETS.items()
        ]
        candidates.append(_fit_alpha_beta(stall, group, frame, links[id(frame)]))
        out_group = [model for model in candidates if model is not None]
        out += out_group
    if stall == "network":
        family_key = tuple(column for column in key if column != "bandwidth_gbps")
        out += _fit_families(stall, groups, links, family_key, out)
    _mark_best(out)
    return out


def _fit_linear_model(
    stall: str, group: dict[str, Any], frame: pd.DataFrame, name: str, features: tuple[str, ...]
) -> StallModel | None:
    x = frame[list(features)].to_numpy(dtype=float)
    y = frame["stall_s"].to_numpy(dtype=float)
    models = frame["model"].nunique()
    fit = fit_linear(x, y, features) if models >= len(features) + 1 else None
    if fit is None:
        return None
    heldout = _lomo_linear(frame, features)
    notes = []
    if fit.rank_deficient:
        notes.append("features are collinear here")
    if np.isnan(heldout).any():
        notes.append(f"held-out error needs at least {len(features) + 2} models")
    fitted = fit.predict(x)
    return StallModel(
        stall=stall,
        group=group,
        name=f"linear: {name}",
        kind="linear",
        features=features,
        points=len(frame),
        models=models,
        r2=fit.r2,
        lomo_mape=None if np.isnan(heldout).any() else mape(heldout, y),
        note="; ".join(notes),
        linear=fit,
        residuals=_residual_frame(stall, group, f"linear: {name}", frame, fitted, heldout),
    )


def _lomo_linear(frame: pd.DataFrame, features: tuple[str, ...]) -> np.ndarray:
    predictions = np.full(len(frame), np.nan)
    for model in frame["model"].unique():
        test = (frame["model"] == model).to_numpy()
        train = frame[~test]
        if train["model"].nunique() < len(features) + 1:
            continue
        fit = fit_linear(
            train[list(features)].to_numpy(dtype=float), train["stall_s"].to_numpy(dtype=float), features
        )
        if fit is not None:
            predictions[test] = np.maximum(
                0.0, fit.predict(frame.loc[test, list(features)].to_numpy(dtype=float))
            )
    return predictions


def _comm_s(frame: pd.DataFrame, link: LinkParameters) -> np.ndarray:
    return np.array(
        [
            allreduce_time_s(float(row.grad_bytes), int(row.world_size), link.alpha_s, link.beta_s_per_byte)
            for row in frame.itertuples(index=False)
        ]
    )


def _fit_alpha_beta(
    stall: str, group: dict[str, Any], frame: pd.DataFrame, link: LinkParameters | None
) -> StallModel:
    y = frame["stall_s"].to_numpy(dtype=float)
    models = frame["model"].nunique()
    if link is None:
        why = "no bandwidth probe for this configuration (or give --alpha-s/--beta-s-per-byte)"
        return StallModel(
            stall=stall,
            group=group,
            name=ALPHA_BETA,
            kind="alpha-beta",
            features=("grad_bytes",),
            points=len(frame),
            models=models,
            r2=None,
            lomo_mape=None,
            note=f"not available: {why}",
        )
    comm = _comm_s(frame, link)
    scale = calibrate_scale(y, comm)
    fitted = (1.0 if scale is None else scale) * comm
    heldout = np.full(len(frame), np.nan)
    for model in frame["model"].unique():
        test = (frame["model"] == model).to_numpy()
        train_scale = calibrate_scale(y[~test], comm[~test])
        if train_scale is not None:
            heldout[test] = train_scale * comm[test]
    notes = [link.note] if link.note else []
    if scale is not None and scale > 1:
        notes.append(f"stall is {scale:.2g}x the wire time: contention or a slower link than assumed")
    return StallModel(
        stall=stall,
        group=group,
        name=ALPHA_BETA,
        kind="alpha-beta",
        features=("grad_bytes",),
        points=len(frame),
        models=models,
        r2=_r2(y, fitted),
        lomo_mape=None if np.isnan(heldout).any() else mape(heldout, y),
        note="; ".join(notes),
        link=link,
        scale=scale,
        residuals=_residual_frame(stall, group, ALPHA_BETA, frame, fitted, heldout, wire_s=comm),
    )


def _pooled_features(grad_bytes: float, world_size: int, link: LinkParameters) -> list[float]:
    return [ring_factor(world_size) * grad_bytes * link.beta_s_per_byte, float(bucket_count(grad_bytes))]


def _fit_families(
    stall: str,
    groups: list[tuple[dict[str, Any], pd.DataFrame]],
    links: dict[int, LinkParameters | None],
    family_key: tuple[str, ...],
    fitted_models: list[StallModel],
) -> list[StallModel]:
    """Leave-one-bandwidth-out for alpha-beta, and the pooled wire+buckets linear model, per family."""
    families: dict[tuple, list[tuple[dict[str, Any], pd.DataFrame]]] = {}
    for group, frame in groups:
        families.setdefault(tuple(group[column] for column in family_key), []).append((group, frame))
    out = []
    for members in families.values():
        usable = [
            (group, frame, links[id(frame)]) for group, frame in members if links[id(frame)] is not None
        ]
        if not usable:
            continue
        pooled = pd.concat(
            [
                frame.assign(
                    _member=index,
                    _wire_s=[
                        _pooled_features(b, w, link)[0]
                        for b, w in zip(frame["grad_bytes"], frame["world_size"], strict=True)
                    ],
                    _buckets=[float(bucket_count(b)) for b in frame["grad_bytes"]],
                    _comm_s=_comm_s(frame, link),
                )
                for index, (_, frame, link) in enumerate(usable)
            ],
            ignore_index=True,
        )
        y = pooled["stall_s"].to_numpy(dtype=float)
        x = pooled[["_wire_s", "_buckets"]].to_numpy(dtype=float)
        bandwidths = pooled["_member"].nunique()
        full_fit = fit_linear(x, y, _POOLED_FEATURES) if pooled["model"].nunique() >= 3 else None
        for index, (group, frame, link) in enumerate(usable):
            member = (pooled["_member"] == index).to_numpy()
            # Alpha-beta held out by bandwidth: calibrate the scale on the other bandwidths only.
            lobo_ab = None
            if bandwidths >= 2:
                scale = calibrate_scale(y[~member], pooled["_comm_s"].to_numpy()[~member])
                if scale is not None:
                    lobo_ab = mape(scale * pooled["_comm_s"].to_numpy()[member], y[member])
            for model in fitted_models:
                if model.kind == "alpha-beta" and model.stall == stall and _same_group(model.group, group):
                    model.lobo_mape = lobo_ab
            if full_fit is None:
                continue
            lomo = np.full(member.sum(), np.nan)
            for dnn in frame["model"].unique():
                test_all = (pooled["model"] == dnn).to_numpy()
                train = ~test_all
                if pooled.loc[train, "model"].nunique() < 3:
                    continue
                fit = fit_linear(x[train], y[train], _POOLED_FEATURES)
                here = test_all[member]
                if fit is not None:
                    lomo[here] = np.maximum(0.0, fit.predict(x[member][here]))
            lobo = None
            if bandwidths >= 2 and pooled.loc[~member, "model"].nunique() >= 3:
                fit = fit_linear(x[~member], y[~member], _POOLED_FEATURES)
                if fit is not None:
                    lobo = mape(np.maximum(0.0, fit.predict(x[member])), y[member])
            fitted = full_fit.predict(x[member])
            out.append(
                StallModel(
                    stall=stall,
                    group=group,
                    name=POOLED,
                    kind="pooled-linear",
                    features=_POOLED_FEATURES,
                    points=int(member.sum()),
                    models=frame["model"].nunique(),
                    r2=_r2(y[member], fitted),
                    lomo_mape=None if np.isnan(lomo).any() else mape(lomo, y[member]),
                    lobo_mape=lobo,
                    note=f"fitted on {bandwidths} bandwidth(s) of this configuration",
                    linear=full_fit,
                    link=link,
                    residuals=_residual_frame(stall, group, POOLED, frame, fitted, lomo),
                )
            )
    return out


def _mark_best(models: list[StallModel]) -> None:
    by_group: dict[tuple, list[StallModel]] = {}
    for model in models:
        by_group.setdefault((model.stall, _group_tuple(model.group)), []).append(model)
    for candidates in by_group.values():
        scored = [model for model in candidates if model.lomo_mape is not None]
        if scored:
            # Fewer parameters win a tie: the simpler model generalises at least as well.
            best = min(scored, key=lambda model: (round(model.lomo_mape, 6), len(model.features)))
        else:
            usable = [model for model in candidates if model.kind == "alpha-beta" and model.link is not None]
            usable = usable or [model for model in candidates if model.r2 is not None]
            if not usable:
                continue
            best = max(usable, key=lambda model: -1 if model.r2 is None else model.r2)
            best.note = "; ".join(
                filter(None, [best.note, "best by default: too few models for a held-out error"])
            )
        best.best = True


def _residual_frame(
    stall: str,
    group: dict[str, Any],
    name: str,
    frame: pd.DataFrame,
    fitted: np.ndarray,
    heldout: np.ndarray,
    wire_s: np.ndarray | None = None,
) -> pd.DataFrame:
    out = frame[["run_id", "model", *FEATURES]].copy()
    out.insert(0, "fit", name)
    out.insert(0, "group", group_label(stall, group))
    out.insert(0, "stall", stall)
    out["measured_s"] = frame["stall_s"].to_numpy(dtype=float)
    out["fitted_s"] = fitted
    out["residual_s"] = out["measured_s"] - out["fitted_s"]
    out["heldout_s"] = heldout
    out["wire_s"] = np.nan if wire_s is None else wire_s  # alpha-beta only: the uncalibrated all-reduce time
    return out


def _r2(y: np.ndarray, fitted: np.ndarray) -> float | None:
    total = float(((y - y.mean()) ** 2).sum())
    return None if total == 0 or len(y) < 2 else 1.0 - float(((y - fitted) ** 2).sum()) / total


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def _group_tuple(group: dict[str, Any]) -> tuple:
    return tuple(sorted((key, value) for key, value in group.items()))


def _same_group(left: dict[str, Any], right: dict[str, Any]) -> bool:
    return all(right.get(key) == value for key, value in left.items())
