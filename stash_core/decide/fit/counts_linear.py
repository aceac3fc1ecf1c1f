"""The linear models of a stall: least squares on a model's gradient bytes, tensor count and layer count."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.linear import fit_linear
from stash_core.decide.fit.observations import FEATURES
from stash_core.decide.fit.stall_model import StallModel
from stash_core.decide.fit.validation import heldout_mape, lomo_linear, residual_frame


@dataclass(frozen=True)
class GroupPoints:
    """One group's points as arrays, taken from its frame once for all of its feature sets: indexing the
    frame per fit and per held-out DNN cost most of the Models page's first load."""

    frame: pd.DataFrame
    dnn_codes: np.ndarray  # each point's DNN as 0..models-1
    models: int
    x_by_feature: dict[str, np.ndarray]
    stall_s: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> GroupPoints:
        codes, dnns = pd.factorize(frame["dnn"])
        x_by_feature = {feature: frame[feature].to_numpy(dtype=float) for feature in FEATURES}
        return cls(frame, codes, len(dnns), x_by_feature, frame["stall_s"].to_numpy(dtype=float))

    def x(self, features: tuple[str, ...]) -> np.ndarray:
        # column-major, as a frame's columns are: least squares then gives the same figures to the last bit
        return np.asfortranarray(np.column_stack([self.x_by_feature[feature] for feature in features]))


def fit_linear_model(
    stall: str, group: dict[str, Any], points: GroupPoints, name: str, features: tuple[str, ...]
) -> StallModel | None:
    """Least squares of the stall on `features` over one group; None with fewer DNNs than parameters."""
    x, y = points.x(features), points.stall_s
    fit = fit_linear(x, y, features) if points.models >= len(features) + 1 else None
    if fit is None:
        return None
    heldout = lomo_linear(x, y, points.dnn_codes, points.models)
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
        points=len(y),
        models=points.models,
        r2=fit.r2,
        lomo_mape=heldout_mape(heldout, y),
        note="; ".join(notes),
        linear=fit,
        residuals_of=partial(residual_frame, stall, group, f"linear: {name}", points.frame, fitted, heldout),
    )
