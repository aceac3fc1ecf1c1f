"""The fit report: every model of every configuration group, as tables and by group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from stash_core.decide.fit.observations import FEATURES
from stash_core.decide.fit.stall_model import StallModel, same_group
from stash_core.units import finite_float

SUMMARY_COLUMNS = [
    "stall", "group", "model", "kind", "points", "models", "r2", "lomo_mape", "lobo_mape", "best",
    "coefficients", "note", "enough_points", "shortfall",
]  # fmt: skip
RESIDUAL_COLUMNS = [
    "stall", "group", "fit", "run_id", "model", *FEATURES, "measured_s", "fitted_s", "residual_s",
    "heldout_s", "wire_s",
]  # fmt: skip


@dataclass
class FitReport:
    """All models of all groups, the observations they came from, and how to query them."""

    observations: pd.DataFrame
    models: list[StallModel]
    probes: pd.DataFrame = field(default_factory=pd.DataFrame)
    # a line per fitted run whose machine contradicts its instance label: its group is named by that label
    label_warnings: list[str] = field(default_factory=list)
    # a line per stall no fit may use, with why (an impossible breakdown, links changed under it)
    left_out: list[str] = field(default_factory=list)

    def summary(self) -> pd.DataFrame:
        """One row per model: stall, group, model, points, models, R², MAPEs, best, coefficients, note."""
        rows = [_summary_row(model) for model in self.models]
        if not rows:
            return pd.DataFrame(columns=SUMMARY_COLUMNS)
        return pd.DataFrame(rows)

    def residuals(
        self, stall: str | None = None, group: dict[str, Any] | None = None, fitted_only: bool = False
    ) -> pd.DataFrame:
        """Per point and model: measured, fitted (in-sample) and held-out predictions and residuals; of one
        stall, or one stall's group, when given (each model builds its table when first asked). With
        `fitted_only`, none of a model with too few profiles to fit, which the summary shows unfitted."""
        if stall is None:
            models = self.models
        elif group is None:
            models = [model for model in self.models if model.stall == stall]
        else:
            models = self.models_for(stall, group)
        kept = [model for model in models if model.enough_points or not fitted_only]
        frames = [model.residuals for model in kept if not model.residuals.empty]
        if not frames:
            return pd.DataFrame(columns=RESIDUAL_COLUMNS)
        return pd.concat(frames, ignore_index=True)

    def groups(self, stall: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        for model in self.models:
            if model.stall == stall and model.group not in seen:
                seen.append(model.group)
        return seen

    def models_for(self, stall: str, group: dict[str, Any]) -> list[StallModel]:
        return [model for model in self.models if model.stall == stall and same_group(model.group, group)]

    def best(self, stall: str, group: dict[str, Any]) -> StallModel | None:
        for model in self.models_for(stall, group):
            if model.best:
                return model
        return None

    def shortfall(self, stall: str, group: dict[str, Any]) -> str:
        """Why a group has no best model: "not enough profiles (n of m needed)" of the model closest to
        enough among those that could be best (an alpha-beta model without a link cannot); "" when the group
        has a best model or no model is short of points."""
        models = self.models_for(stall, group)
        if any(model.best for model in models):
            return ""
        short = [model for model in models if not model.enough_points]
        possible = [model for model in short if model.kind != "alpha-beta" or model.link is not None]
        if not (possible or short):
            return ""
        return min(possible or short, key=lambda model: model.needed_points - model.support_points).shortfall


def _summary_row(model: StallModel) -> dict[str, Any]:
    return {
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
        "enough_points": model.enough_points,
        "shortfall": model.shortfall,
    }


WEAK_HELD_OUT_ERROR = 1.0  # a best model off by more than its value on a model held out predicts little


def weak_fit(r2: float | None, held_out_error: float | None) -> str | None:
    """What a best model that explains less than the mean does (R² below 0), or one whose held-out error is
    over 100%, says of itself: best among the fits, and still no useful one."""
    reasons = []
    if (r2 := finite_float(r2)) is not None and r2 < 0:
        reasons.append("R² below 0: it fits worse than the mean of the stalls")
    if (error := finite_float(held_out_error)) is not None and error > WEAK_HELD_OUT_ERROR:
        reasons.append(f"held-out error over {WEAK_HELD_OUT_ERROR:.0%}")
    if not reasons:
        return None
    return f"no useful fit yet ({'; '.join(reasons)}): profile more models of this configuration"
