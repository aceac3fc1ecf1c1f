"""One fitted model of one stall in one configuration group: its names, what it predicts, how it reads.

The three kinds (see fit/__init__.py): "linear" (least squares on model counts), "alpha-beta" (the wire time
of physics.py times a calibrated scale) and "pooled-linear" (wire time and DDP bucket count, fitted over the
bandwidths of one configuration). A configuration group is a dict of observations.GROUP_COLUMNS values.

A fit rests on enough points only with at least its parameters plus two (MIN_SPARE_POINTS): fewer leave no
room to check it, so such a model is reported as "not enough profiles (n of m needed)" and is never the best.
The points that count are the different DNNs a fit saw (runs of one DNN share its counts), or for the pooled
model every (DNN, bandwidth) point it was fitted on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from stash_core.decide.fit.linear import LinearFit
from stash_core.decide.fit.observations import format_gbps
from stash_core.decide.fit.physics import LinkParameters, allreduce_time_s, bucket_count

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
POOLED_FEATURES = ("wire_s", "buckets")
MIN_SPARE_POINTS = 2  # a fit needs its parameters plus this many points


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
    # the residual table, built when first read: a fit report holds hundreds and a page shows one group's
    residuals_of: Callable[[], pd.DataFrame] | None = None
    support: int | None = None  # the points the fit rests on when not its DNNs (the pooled model's points)

    @cached_property
    def residuals(self) -> pd.DataFrame:
        """Per point: measured, fitted and held-out seconds, residual and (alpha-beta) wire time."""
        return self.residuals_of() if self.residuals_of is not None else pd.DataFrame()

    @property
    def group_label(self) -> str:
        return group_label(self.stall, self.group)

    @property
    def parameters(self) -> int:
        """Fitted numbers: the alpha-beta model's scale; an intercept and a slope per feature otherwise."""
        return 1 if self.kind == "alpha-beta" else len(self.features) + 1

    @property
    def needed_points(self) -> int:
        return self.parameters + MIN_SPARE_POINTS

    @property
    def support_points(self) -> int:
        """The points the fit rests on: its different DNNs, or (pooled) its (DNN, bandwidth) points."""
        return self.support if self.support is not None else self.models

    @property
    def enough_points(self) -> bool:
        return self.support_points >= self.needed_points

    @property
    def shortfall(self) -> str:
        """'not enough profiles (n of m needed)', or '' when the fit has enough."""
        if self.enough_points:
            return ""
        which = "" if self.support is not None else ", each of a different model"
        return f"not enough profiles ({self.support_points} of {self.needed_points} needed{which})"

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
            features = pooled_features(counts["grad_bytes"], world_size, link)
            return max(0.0, float(self.linear.predict([features])[0]))
        if self.kind == "alpha-beta":
            comm_s = allreduce_time_s(counts["grad_bytes"], world_size, link.alpha_s, link.beta_s_per_byte)
            return (1.0 if self.scale is None else self.scale) * comm_s
        return None


def pooled_features(grad_bytes: float, world_size: int, link: LinkParameters) -> list[float]:
    """The pooled model's features: the wire time without latency (ring factor x bytes x beta), buckets."""
    wire_s = allreduce_time_s(grad_bytes, world_size, 0.0, link.beta_s_per_byte)
    return [wire_s, float(bucket_count(grad_bytes))]


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


def group_tuple(group: dict[str, Any]) -> tuple:
    """A hashable, order-free key of a configuration group."""
    return tuple(sorted((key, value) for key, value in group.items()))


def same_group(left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Whether `right` has every value of `left` (it may have more keys)."""
    return all(right.get(key) == value for key, value in left.items())
