"""The linear models of a stall: least squares on a model's gradient bytes, tensor count and layer count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.linear import fit_linear
from stash_core.decide.fit.stall_model import StallModel
from stash_core.decide.fit.validation import heldout_mape, lomo_linear, residual_frame


def fit_linear_model(
    stall: str, group: dict[str, Any], frame: pd.DataFrame, name: str, features: tuple[str, ...]
) -> StallModel | None:
    """Least squares of the stall on `features` over one group; None with fewer DNNs than parameters."""
    x = frame[list(features)].to_numpy(dtype=float)
    y = frame["stall_s"].to_numpy(dtype=float)
    models = frame["dnn"].nunique()
    fit = fit_linear(x, y, features) if models >= len(features) + 1 else None
    if fit is None:
        return None
    heldout = lomo_linear(frame, features)
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
        lomo_mape=heldout_mape(heldout, y),
        note="; ".join(notes),
        linear=fit,
        residuals=residual_frame(stall, group, f"linear: {name}", frame, fitted, heldout),
    )
