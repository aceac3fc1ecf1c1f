"""Models: the fitted stall models of a database, the points and lines to draw them, and predictions for a
model that was never profiled."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.decide.fit import FitReport, fit_stall_models, model_counts, predict_stall
from stash_core.units import finite_float
from stash_core.userfiles import save_model_file

MODELLED_STALLS = ("interconnect", "network")
FEATURE_LABELS = {
    "grad_bytes": "Gradient bytes",
    "grad_tensor_count": "Gradient tensors",
    "layer_count": "Layers",
}
SINGLE_FEATURE_FIT = {
    "grad_bytes": "linear: bytes",
    "grad_tensor_count": "linear: tensors",
    "layer_count": "linear: layers",
}
FIT_LINE_STEPS = 20
TABLE_COLUMNS = ["best", "model", "points", "models", "r2", "lomo_mape", "lobo_mape", "coefficients", "note"]
PREDICTION_COLUMNS = [
    "stall",
    "configuration",
    "predicted_ms",
    "by",
    "expected_error",
    "validated_by",
    "status",
]


def fit_report(db_path: Path | str, by_batch_size: bool) -> FitReport:
    """Every fit of the database's interconnect and network stalls, with held-out errors."""
    return fit_stall_models(db_path, by_batch_size=by_batch_size)


def gradient_counts(model_ref: str) -> dict[str, Any]:
    """grad_bytes, grad_tensor_count and layer_count of a zoo name or FILE.py:FACTORY (UsageError if unknown);
    remembered per name, as building the model takes seconds."""
    return model_counts(model_ref)


def fitted_stalls(report: FitReport) -> list[str]:
    """The stalls (interconnect, network) that have at least one configuration group."""
    return [stall for stall in MODELLED_STALLS if report.groups(stall)]


def group_labels(report: FitReport, stall: str) -> list[str]:
    """A label per configuration group of `stall`, in the order of report.groups(stall)."""
    return [report.models_for(stall, group)[0].group_label for group in report.groups(stall)]


def stall_points(report: FitReport, stall: str, group: dict[str, Any]) -> pd.DataFrame:
    """The measured points of one group (each with its 95% interval), with the best fit's held-out
    predictions and residuals, in ms.

    Without a best fit, one row per run (its held-out columns from whichever fit came first)."""
    points = report.residuals(stall, group)
    best = report.best(stall, group)
    shown = points[points["fit"] == best.name] if best is not None else points.drop_duplicates("run_id")
    observed = report.observations
    ci95_s = observed[observed["stall"] == stall].drop_duplicates("run_id").set_index("run_id")["ci95_s"]
    return shown.assign(
        measured_ms=shown["measured_s"] * 1e3,
        measured_ci95_ms=shown["run_id"].map(ci95_s).astype("float64") * 1e3,  # each run's own interval
        heldout_ms=shown["heldout_s"] * 1e3,
        residual_ms=shown["residual_s"] * 1e3,
    )


def fit_lines(
    report: FitReport, stall: str, group: dict[str, Any], feature: str, observed: pd.DataFrame
) -> pd.DataFrame:
    """The single-feature least-squares fit on `feature`, sampled over the observed range (fit, feature,
    fitted_ms); empty when the group has no such fit."""
    low, high = float(observed[feature].min()), float(observed[feature].max())
    grid = [low + (high - low) * step / FIT_LINE_STEPS for step in range(FIT_LINE_STEPS + 1)]
    rows = []
    for model in report.models_for(stall, group):
        if model.name != SINGLE_FEATURE_FIT[feature] or model.linear is None:
            continue
        for value in grid:
            fitted_ms = float(model.linear.predict([[value]])[0]) * 1e3
            rows.append({"fit": model.name, feature: value, "fitted_ms": fitted_ms})
    return pd.DataFrame(rows, columns=["fit", feature, "fitted_ms"])


# `stash fit`'s advice, which the page has no field for, in the page's words
CLI_ALPHA_BETA = "(or give --alpha-s/--beta-s-per-byte)"
PAGE_ALPHA_BETA = "(`stash probe` on that configuration measures one; `stash fit --alpha-s ...` sets one)"


def group_label_warnings(report: FitReport, stall: str, group: dict[str, Any]) -> list[str]:
    """The label warnings (a machine that contradicts its label) of the runs fitted in a group."""
    rows = report.observations[report.observations["stall"] == stall]
    for column, value in group.items():
        if column in rows.columns:
            rows = rows[rows[column] == value]
    runs = {f" of run {run} " for run in rows["run_id"]}
    return [warning for warning in report.label_warnings if any(run in warning for run in runs)]


def models_table(report: FitReport, stall: str, group: dict[str, Any]) -> pd.DataFrame:
    """The fits of one group, ready to show: the best first, then those with enough points by
    leave-one-model-out error, then those without.

    R² and the errors are text ("0.987", "3.2%", "–" when unknown, never None); a fit from fewer points than
    its parameters plus two has "–" in every figure column and its note starts "not enough profiles (n of m
    needed)" (said in each figure column, it made every such row eight lines tall at 1400 px)."""
    summary = report.summary()
    label = report.models_for(stall, group)[0].group_label
    rows = summary[(summary["stall"] == stall) & (summary["group"] == label)]
    rows = rows.sort_values(
        ["best", "enough_points", "lomo_mape"], ascending=[False, False, True], na_position="last"
    )
    table = rows[TABLE_COLUMNS].copy()
    short = rows["shortfall"].fillna("").astype(str)
    for column, spec in (("r2", ".3f"), ("lomo_mape", ".1%"), ("lobo_mape", ".1%")):
        values = zip(short, rows[column], strict=True)
        table[column] = [MISSING_FIGURE if text else _figure(value, spec) for text, value in values]
    if "coefficients" in table:  # a fit from too few points stands for nothing: no figures, as `stash fit`
        table["coefficients"] = ["" if text else value for text, value in zip(short, table["coefficients"],
                                                                                strict=True)]  # fmt: skip
    notes = (_shortfall_first(note, text) for note, text in zip(rows["note"], short, strict=True))
    table["note"] = [note.replace(CLI_ALPHA_BETA, PAGE_ALPHA_BETA) for note in notes]  # the page's own words
    table["best"] = table["best"].astype(bool)
    return table.reset_index(drop=True)


def without_empty_figures(table: pd.DataFrame) -> pd.DataFrame:
    """The fits table less the figure columns with no figure in any row (every fit short of profiles): left
    in, their dashes took the width the notes that say why needed."""
    empty = [column for column in ("r2", "lomo_mape", "lobo_mape", "coefficients")
             if column in table and table[column].astype(str).isin([MISSING_FIGURE, ""]).all()]  # fmt: skip
    return table.drop(columns=empty)


def group_shortfall(report: FitReport, stall: str, group: dict[str, Any]) -> str:
    """Why a configuration has no best model ("not enough profiles (n of m needed)"); "" when it has one."""
    return report.shortfall(stall, group)


MISSING_FIGURE = "–"


def _figure(value: Any, spec: str) -> str:
    number = finite_float(value)
    return MISSING_FIGURE if number is None else format(number, spec)


def _shortfall_first(note: Any, shortfall: str) -> str:
    """A fit's note with its shortfall, if it has one, said first and once."""
    parts = [part for part in str(note or "").split("; ") if part and part != shortfall]
    return "; ".join([shortfall, *parts] if shortfall else parts)


def median_best_error(report: FitReport) -> tuple[float | None, int]:
    """(median leave-one-model-out error of the best model over all groups, how many groups have one)."""
    errors = [model.lomo_mape for model in report.models if model.best and model.lomo_mape is not None]
    errors = [error for error in errors if math.isfinite(error)]
    return (statistics.median(errors) if errors else None), len(errors)  # as `stash fit` states it


def prediction_frame(report: FitReport, counts: dict[str, Any], stalls: list[str]) -> pd.DataFrame:
    """The predicted stall of a model with these gradient counts in every configuration group of `stalls`.

    Columns: stall, configuration, predicted_ms, by (the model used), expected_error (a fraction),
    validated_by, status."""
    rows = []
    for stall in stalls:
        for group in report.groups(stall):
            answer = predict_stall(
                counts=counts,
                stall=stall,
                workers_per_node=int(group["workers_per_node"]),
                nodes=int(group.get("nodes") or 1),
                device=group.get("device"),
                instance=group.get("instance"),
                bandwidth_gbps=group.get("bandwidth_gbps"),
                batch_size=group.get("batch_size"),
                report=report,
            )
            rows.append(
                {
                    "stall": stall,
                    "configuration": answer["group"],
                    "predicted_ms": None if answer["stall_s"] is None else answer["stall_s"] * 1e3,
                    "by": answer["method"],
                    "expected_error": answer["expected_mape"],
                    "validated_by": answer["validated_by"],
                    "status": "; ".join(filter(None, [answer["status"], answer.get("note")])),
                }
            )
    return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)


def uploaded_model_reference(db_path: Path | str, file_name: str, content: bytes, factory: str) -> str:
    """Keep an uploaded model file where the Run page keeps them (userfiles.save_model_file: checked as
    Python, named by its content); FILE.py:FACTORY for gradient_counts (factory `make` when blank).
    UsageError when it is not a Python file."""
    path = save_model_file(db_path, file_name, content)
    return f"{path}:{factory.strip() or 'make'}"
