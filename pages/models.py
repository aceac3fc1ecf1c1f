"""Models: communication stall against gradient bytes / tensors / layers, the fitted models with their
held-out errors, and a prediction for a model never profiled (a zoo name or an uploaded .py file)."""

import tempfile
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from pages._shared import (
    chart_with_download,
    current_db,
    download_buttons,
    empty_state,
    page_guard,
    page_header,
)
from stash_core import views
from stash_core.errors import UsageError

FEATURE_LABELS = {
    "grad_bytes": "Gradient bytes",
    "grad_tensor_count": "Gradient tensors",
    "layer_count": "Layers",
}
SINGLE_FIT = {
    "grad_bytes": "linear: bytes",
    "grad_tensor_count": "linear: tensors",
    "layer_count": "linear: layers",
}
PUBLISHED = "Habitat 11.8% across GPUs, Srifty 8%, dPRO and Ceer under 5%, Lumos 3.3%"
CACHE_TTL_S = 20


@st.cache_data(ttl=CACHE_TTL_S, max_entries=16, show_spinner="Fitting stall models…")
def fit_report(db_path: str, signature: tuple, by_batch_size: bool):
    """All fits of the database; cached until the file changes (signature) or for CACHE_TTL_S."""
    from stash_core.decide.fit import fit_stall_models

    return fit_stall_models(db_path, by_batch_size=by_batch_size)


@st.cache_data(ttl=600, max_entries=64, show_spinner="Counting the model's gradients…")
def counts_of(model_ref: str) -> dict:
    from stash_core.decide.fit import model_counts

    return model_counts(model_ref)


def load_report(by_batch_size: bool):
    db = current_db()
    return fit_report(str(db), views.common.db_signature(db), by_batch_size)


def pct(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:.1%}"


def stall_chart(points: pd.DataFrame, lines: pd.DataFrame, feature: str) -> alt.LayerChart:
    title = FEATURE_LABELS[feature]
    x = alt.X(f"{feature}:Q", title=title, axis=alt.Axis(format="~s"))
    measured = (
        alt.Chart(points)
        .mark_circle(size=80, color="#4C78A8")
        .encode(
            x=x,
            y=alt.Y("measured_ms:Q", title="Stall per iteration (ms)"),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("measured_ms:Q", title="measured (ms)", format=".2f"),
                alt.Tooltip("heldout_ms:Q", title="held-out prediction (ms)", format=".2f"),
                alt.Tooltip(f"{feature}:Q", title=title, format=","),
                alt.Tooltip("run_id:N"),
            ],
        )
    )
    heldout = (
        alt.Chart(points.dropna(subset=["heldout_ms"]))
        .mark_point(shape="diamond", size=70, color="#E45756", filled=False)
        .encode(
            x=x, y="heldout_ms:Q", tooltip=[alt.Tooltip("model:N"), alt.Tooltip("heldout_ms:Q", format=".2f")]
        )
    )
    layers = [measured, heldout]
    if not lines.empty:
        layers.insert(
            0,
            alt.Chart(lines)
            .mark_line(strokeDash=[6, 3], color="#F58518")
            .encode(x=x, y="fitted_ms:Q", detail="fit:N", tooltip=[alt.Tooltip("fit:N")]),
        )
    return alt.layer(*layers).properties(height=320)


def residual_chart(residuals: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(residuals)
        .mark_bar()
        .encode(
            x=alt.X("model:N", sort=None, title=None),
            y=alt.Y("residual_ms:Q", title="Residual, measured − fitted (ms)"),
            color=alt.condition("datum.residual_ms > 0", alt.value("#E45756"), alt.value("#4C78A8")),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("residual_ms:Q", format=".2f"),
                alt.Tooltip("fit:N"),
            ],
        )
        .properties(height=220)
    )


def fit_lines(report, stall: str, group: dict, feature: str, observed: pd.DataFrame) -> pd.DataFrame:
    """The single-feature fit on the chosen axis, drawn over the observed range."""
    lo, hi = float(observed[feature].min()), float(observed[feature].max())
    grid = [lo + (hi - lo) * step / 20 for step in range(21)]
    rows = []
    for model in report.models_for(stall, group):
        if model.name != SINGLE_FIT[feature] or model.linear is None:
            continue
        for value in grid:
            rows.append(
                {
                    "fit": model.name,
                    feature: value,
                    "fitted_ms": float(model.linear.predict([[value]])[0]) * 1e3,
                }
            )
    return pd.DataFrame(rows, columns=["fit", feature, "fitted_ms"])


def models_table(report, stall: str, group: dict) -> pd.DataFrame:
    summary = report.summary()
    rows = summary[
        (summary["stall"] == stall) & (summary["group"] == report.models_for(stall, group)[0].group_label)
    ]
    table = rows[
        ["best", "model", "points", "models", "r2", "lomo_mape", "lobo_mape", "coefficients", "note"]
    ]
    return table.sort_values(["best", "lomo_mape"], ascending=[False, True], na_position="last")


def prediction_form(report, stalls: list[str]) -> None:
    st.subheader("Predict a model that was never profiled")
    groups = {stall: report.groups(stall) for stall in stalls}
    with st.form("models-predict"):
        left, right = st.columns(2)
        name = left.text_input("Model", value="resnet101", help="a zoo name (see `stash models`)")
        uploaded = right.file_uploader(
            "…or upload a model file (.py)",
            type=["py"],
            help="It is run on this machine to count its gradients.",
        )
        factory = right.text_input("Factory function in the file", value="make")
        submitted = st.form_submit_button("Predict", icon=":material/insights:")
    if not submitted:
        return
    if uploaded is not None:
        folder = Path(tempfile.mkdtemp(prefix="stash-model-"))
        path = folder / Path(uploaded.name).name
        path.write_bytes(uploaded.getvalue())
        reference = f"{path}:{factory.strip() or 'make'}"
        label = uploaded.name
    else:
        reference = name.strip()
        label = reference
    if not reference:
        st.warning("Name a model or upload one.", icon=":material/warning:")
        return
    try:
        counts = counts_of(reference)
    except UsageError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    from stash_core.decide.fit import predict_stall

    st.markdown(
        f"**{label}**: {counts['grad_bytes'] / 1e6:,.1f} MB of gradients in "
        f"{counts['grad_tensor_count']} tensors, {counts['layer_count']} layers"
    )
    rows = []
    for stall in stalls:
        for group in groups[stall]:
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
                    "expected error": pct(answer["expected_mape"]),
                    "validated by": answer["validated_by"],
                    "status": answer["status"],
                }
            )
    frame = pd.DataFrame(rows)
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "predicted_ms": st.column_config.NumberColumn("predicted (ms per iteration)", format="%.3f")
        },
    )
    download_buttons(frame, f"prediction_{Path(label).stem}", "models-prediction", parquet=False)


def main() -> None:
    page_header(
        "Models",
        "Communication stall against a model's gradient bytes, gradient tensors and layers; least-squares "
        "and alpha-beta models per configuration, each with its error on models and bandwidths it never saw.",
    )
    by_batch_size = st.toggle("Fit each batch size separately", key="models-by-batch")
    report = load_report(by_batch_size)
    if report.observations.empty:
        empty_state(
            "No measured interconnect or network stalls yet. Profile a family of models, for example "
            "`stash campaign --family resnet --depths 10,12,16,18,34,50 --workers 2`, then come back."
        )
        return
    stalls = [stall for stall in ("interconnect", "network") if report.groups(stall)]
    top = st.columns([1, 2, 1])
    stall = top[0].radio("Stall", stalls, horizontal=True, key="models-stall")
    groups = report.groups(stall)
    labels = [report.models_for(stall, group)[0].group_label for group in groups]
    chosen = top[1].selectbox("Configuration", labels, key="models-group")
    group = groups[labels.index(chosen)]
    feature = top[2].selectbox(
        "Against", list(FEATURE_LABELS), format_func=FEATURE_LABELS.get, key="models-feature"
    )
    best = report.best(stall, group)
    residuals = report.residuals()
    best_name = best.name if best is not None else None
    points = residuals[(residuals["stall"] == stall) & (residuals["group"] == chosen)]
    shown = points[points["fit"] == best_name] if best_name else points.drop_duplicates("run_id")
    shown = shown.assign(
        measured_ms=shown["measured_s"] * 1e3,
        heldout_ms=shown["heldout_s"] * 1e3,
        residual_ms=shown["residual_s"] * 1e3,
    )
    if best is not None:
        metrics = st.columns(4)
        metrics[0].metric("Best model", best.name)
        metrics[1].metric("Leave-one-model-out error", pct(best.lomo_mape))
        metrics[2].metric("Leave-one-bandwidth-out error", pct(best.lobo_mape))
        metrics[3].metric("R²", "–" if best.r2 is None else f"{best.r2:.3f}")
    else:
        st.info("Too few profiled models in this configuration to fit a model.", icon=":material/info:")
    st.subheader(f"{stall.capitalize()} stall against {FEATURE_LABELS[feature].lower()}")
    st.caption(
        "Blue: measured. Red diamonds: the best model's prediction for each model when that model was left "
        "out of the fit. Dashed: the least-squares line on this axis alone."
    )
    if shown.empty:
        st.info("This configuration has too few profiled models to draw fits.", icon=":material/info:")
    else:
        lines = fit_lines(report, stall, group, feature, shown)
        chart_data = shown[["model", "run_id", feature, "measured_ms", "heldout_ms"]]
        chart_with_download(
            stall_chart(chart_data, lines, feature), chart_data, f"{stall}_stall_points", "models-points"
        )
    st.subheader("Fits and held-out errors")
    table = models_table(report, stall, group)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "best": st.column_config.CheckboxColumn("best"),
            "r2": st.column_config.NumberColumn("R²", format="%.3f"),
            "lomo_mape": st.column_config.NumberColumn("leave-one-model-out MAPE", format="percent"),
            "lobo_mape": st.column_config.NumberColumn("leave-one-bandwidth-out MAPE", format="percent"),
        },
    )
    download_buttons(table, f"{stall}_fits", "models-fits", parquet=False)
    best_errors = [model.lomo_mape for model in report.models if model.best and model.lomo_mape is not None]
    if best_errors:
        median = sorted(best_errors)[len(best_errors) // 2]
        st.caption(
            f"Median held-out error of the best model over {len(best_errors)} configuration(s): "
            f"{median:.1%}. Published performance predictors report {PUBLISHED}."
        )
    if best is not None and not shown.empty:
        st.subheader(f"Residuals of {best.name}")
        residual_data = shown[["model", "fit", "measured_ms", "residual_ms"]]
        chart_with_download(
            residual_chart(residual_data), residual_data, f"{stall}_residuals", "models-residuals"
        )
    prediction_form(report, stalls)


with page_guard():
    main()
