"""Held-out validation of the stall models: leave-one-model-out predictions, R², residual tables.

Leave-one-model-out predicts every point of one DNN with a model fitted (or calibrated) without any run of
that DNN; its MAPE is the error to expect for a model never profiled. A held-out error is only reported when
every point could be predicted that way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.linear import fitted_values, mape
from stash_core.decide.fit.observations import FEATURES
from stash_core.decide.fit.physics import calibrate_scale
from stash_core.decide.fit.stall_model import group_label


def lomo_linear(x: np.ndarray, y: np.ndarray, dnn_codes: np.ndarray, models: int) -> np.ndarray:
    """Each point predicted by a least-squares fit on the other DNNs (NaN where too few are left); a point's
    DNN is its code in `dnn_codes` (0..models-1)."""
    predictions = np.full(len(y), np.nan)
    if models - 1 < x.shape[1] + 1:  # every DNN but the one held out trains: too few of them
        return predictions
    for code in range(models):
        test = dnn_codes == code
        predicted = fitted_values(x[~test], y[~test], x[test])
        if predicted is not None:
            predictions[test] = np.maximum(0.0, predicted)
    return predictions


def lomo_scaled(models: pd.Series, measured_s: np.ndarray, comm_s: np.ndarray) -> np.ndarray:
    """Each point's wire time times the scale calibrated on the other DNNs (NaN where none can be)."""
    heldout = np.full(len(measured_s), np.nan)
    for model in models.unique():
        test = (models == model).to_numpy()
        train_scale = calibrate_scale(measured_s[~test], comm_s[~test])
        if train_scale is not None:
            heldout[test] = train_scale * comm_s[test]
    return heldout


def heldout_mape(heldout: np.ndarray, measured: np.ndarray) -> float | None:
    """MAPE of held-out predictions; None unless every point has one."""
    return None if np.isnan(heldout).any() else mape(heldout, measured)


def r2(y: np.ndarray, fitted: np.ndarray) -> float | None:
    total = float(((y - y.mean()) ** 2).sum())
    return None if total == 0 or len(y) < 2 else 1.0 - float(((y - fitted) ** 2).sum()) / total


def residual_frame(
    stall: str,
    group: dict[str, Any],
    name: str,
    frame: pd.DataFrame,
    fitted: np.ndarray,
    heldout: np.ndarray,
    wire_s: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per point of `frame`: measured, fitted and held-out seconds, residual and (alpha-beta) wire time."""
    measured_s = frame["stall_s"].to_numpy(dtype=float)
    fitted_s = np.asarray(fitted, dtype=float)
    # one frame built at once: a copy with columns inserted and set one by one cost 4 ms a fit (448 fits)
    columns = {"stall": stall, "group": group_label(stall, group), "fit": name}
    columns |= {column: frame[column].to_numpy() for column in ("run_id", "model", *FEATURES)}
    columns |= {
        "measured_s": measured_s,
        "fitted_s": fitted_s,
        "residual_s": measured_s - fitted_s,
        "heldout_s": np.asarray(heldout, dtype=float),
        "wire_s": np.nan if wire_s is None else wire_s,  # alpha-beta only: the uncalibrated all-reduce time
    }
    return pd.DataFrame(columns, index=frame.index)
