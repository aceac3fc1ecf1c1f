"""Models: communication stall against gradient bytes / tensors / layers, the fitted models with their
held-out errors, and a prediction for a model never profiled (a zoo name or an uploaded .py file)."""

from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from pages._shared import (
    chart_with_download,
    current_db,
    download_buttons,
    empty_state,
    load,
    page_guard,
    page_header,
    show_table,
)
from stash_core import views
from stash_core.decide.fit import FitReport, StallModel
from stash_core.decide.fit.report import weak_fit
from stash_core.errors import UsageError
from stash_core.units import size_words
from stash_core.views.common import plain, sentence
from stash_core.views.models import FEATURE_LABELS

PUBLISHED = "Habitat 11.8% across GPUs, Srifty 8%, dPRO and Ceer under 5%, Lumos 3.3%"


def first_steps() -> None:
    """Where the profiles the models are fitted to can be made, or found."""
    st.page_link("pages/run.py", label="Go to the Run page", icon=":material/play_circle:")
    st.page_link("pages/overview.py", label="Go to the Overview", icon=":material/dashboard:")


def load_report(by_batch_size: bool) -> FitReport:
    with st.spinner("Fitting stall models…"):
        return load(views.models.fit_report, by_batch_size)


def pct(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:.1%}"


def stall_chart(points: pd.DataFrame, lines: pd.DataFrame, feature: str) -> alt.LayerChart:
    title = FEATURE_LABELS[feature]
    if feature == "grad_bytes":  # in MiB, as the page says gradient sizes ("~s" wrote 22M for 22 MB)
        points = points.assign(grad_mib=points["grad_bytes"] / 2**20)
        lines = lines.assign(grad_mib=lines["grad_bytes"] / 2**20) if "grad_bytes" in lines else lines
        feature, title = "grad_mib", "Gradients (MiB)"
    # MiB in fixed figures: "~g" took the ticks' step as its precision and wrote 110 MiB as "1.1e+2"
    x = alt.X(f"{feature}:Q", title=title, axis=alt.Axis(format="~s" if feature != "grad_mib" else ",~f"))
    y = alt.Y("measured_ms:Q", title="Stall per iteration (ms)", axis=alt.Axis(format=",~f"))
    measured = (
        alt.Chart(points)
        .mark_circle(size=80, color="#4C78A8")
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("measured_ms:Q", title="measured (ms)", format=".2f"),
                alt.Tooltip("measured_ci95_ms:Q", title="± 95% (ms)", format=".2f"),
                alt.Tooltip("heldout_ms:Q", title="held-out prediction (ms)", format=".2f"),
                alt.Tooltip(f"{feature}:Q", title=title, format=",.6~g"),
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
    spread = points.dropna(subset=["measured_ci95_ms"])  # each run's 95% interval, as a bar through it
    bars = (
        alt.Chart(spread.assign(low_ms=spread["measured_ms"] - spread["measured_ci95_ms"],
                                high_ms=spread["measured_ms"] + spread["measured_ci95_ms"]))  # fmt: skip
        .mark_rule(color="#4C78A8")
        .encode(x=x, y="low_ms:Q", y2="high_ms:Q")
    )
    layers = [bars, measured, heldout]
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


def prediction_form(report: FitReport, stalls: list[str]) -> None:
    st.subheader("Predict a model that was never profiled")
    with st.form("models-predict"):
        left, right = st.columns(2)
        name = left.text_input(
            "Model", value="resnet101", help="a zoo name (see `stash models`)", key="models-predict-name",
            persist_state="session"
        )
        uploaded = right.file_uploader(
            "…or upload a model file (.py)",
            type=["py"],
            help="It is run on this machine to count its gradients.",
        )
        factory = right.text_input("Factory function in the file", value="make", key="models-predict-factory",
                                   persist_state="session")
        submitted = st.form_submit_button("Predict", icon=":material/insights:")
    if submitted:
        st.session_state.pop(answer_key(), None)  # an earlier model's answer is not this one's
        counted = counted_model(name, uploaded, factory)
        if counted is None:
            return
        st.session_state[answer_key()] = counted
    counted = st.session_state.get(answer_key())
    if counted is not None:
        show_prediction(report, stalls, *counted)


def answer_key() -> str:
    """The last model counted, kept across reruns (another widget of the page, a visit to another page) and
    per database: its prediction is made again from the fits of the database shown."""
    return f"models-answer:{current_db()}"


def counted_model(name: str, uploaded, factory: str) -> tuple[str, dict] | None:
    """(label, gradient counts) of the model named or uploaded; None after a message saying why not."""
    if uploaded is not None:
        try:
            reference = views.models.uploaded_model_reference(
                current_db(), uploaded.name, uploaded.getvalue(), factory
            )
        except UsageError as exc:
            st.error(plain(exc), icon=":material/error:")
            return None
        label = uploaded.name
        kept = reference.rpartition(":")[0]  # the server's copy: its errors say the file as uploaded
    else:
        reference = name.strip()
        label, kept = reference, None
    if not reference:
        st.warning("Name a model or upload one.", icon=":material/warning:")
        return None
    try:
        with st.spinner("Counting the model's gradients…"):
            counts = views.models.gradient_counts(reference)
    except UsageError as exc:
        st.error(plain(str(exc).replace(kept, uploaded.name) if kept else exc), icon=":material/error:")
        return None
    return label, counts


def show_prediction(report: FitReport, stalls: list[str], label: str, counts: dict) -> None:
    st.markdown(
        f"**{plain(label)}**: {size_words(counts['grad_bytes'])} of gradients in "
        f"{counts['grad_tensor_count']} tensors, {counts['layer_count']} layers"
    )
    predictions = views.models.prediction_frame(report, counts, stalls)
    # a status with a note ("predicted; extrapolated: ... the expected error was measured inside that
    # range") was cut in its cell: the status stays, each note is said in full under the table
    parts = predictions["status"].fillna("").str.split("; ", n=1)
    frame = predictions.assign(
        expected_error=predictions["expected_error"].map(pct),
        by=predictions["by"].fillna("–"),
        validated_by=predictions["validated_by"].fillna("–"),
        status=[part[0] for part in parts],
        # three figures: 736.456 ms beside a 64% error said more than is known ("%.3g" wrote 1.23e+03)
        predicted_ms=[None if pd.isna(ms) else float(f"{ms:.3g}") for ms in predictions["predicted_ms"]],
    ).rename(columns={"expected_error": "expected error", "validated_by": "validated by"})
    # the status before the figures: at 800 px a row without a prediction hid why ("no model: ...")
    first = ["stall", "configuration", "status"]
    show_table(
        frame[first + [column for column in frame.columns if column not in first]],
        column_config={
            "predicted_ms": st.column_config.NumberColumn("predicted (ms per iteration)", format="localized")
        },
    )
    for configuration, part in zip(predictions["configuration"], parts, strict=True):
        if len(part) > 1:
            st.caption(f"{plain(configuration)}: {plain(part[1])}")
    whole = frame.assign(status=predictions["status"])  # with its notes
    download_buttons(whole, f"prediction_{Path(label).stem}", "models-prediction", parquet=False)


def best_fit_metrics(best: StallModel | None, shortfall: str) -> None:
    if best is None:
        reason = shortfall or "too few profiled models in this configuration to fit one"
        st.info(
            f"No best model: {reason}. Profile more models in this configuration (`stash campaign`).",
            icon=":material/info:",
        )
        return
    metrics = [*st.columns(2), *st.columns(2)]  # four in a row were cut at 800 px
    metrics[0].metric("Best model", best.name)
    metrics[1].metric("Leave-one-model-out error", pct(best.lomo_mape))
    metrics[2].metric("Leave-one-bandwidth-out error", pct(best.lobo_mape))
    metrics[3].metric("R²", "–" if best.r2 is None else f"{best.r2:.3f}")
    if warning := weak_fit(best.r2, best.lomo_mape):  # as `stash fit` says it under the table
        st.warning(warning[:1].upper() + warning[1:] + ".", icon=":material/report:")


def points_view(report: FitReport, stall: str, group: dict, feature: str, points: pd.DataFrame) -> None:
    st.subheader(f"{stall.capitalize()} stall against {FEATURE_LABELS[feature].lower()}")
    st.caption(
        "Blue: measured, with each run's 95% interval. Red diamonds: the best model's prediction for each "
        "model when that model was left out of the fit. Dashed: the least-squares line on this axis alone."
    )
    if points.empty:
        st.info("This configuration has too few profiled models to draw fits.", icon=":material/info:")
        return
    lines = views.models.fit_lines(report, stall, group, feature, points)
    chart_data = points[["model", "run_id", feature, "measured_ms", "measured_ci95_ms", "heldout_ms"]]
    chart_with_download(
        stall_chart(chart_data, lines, feature), chart_data, f"{stall}_stall_points", "models-points"
    )


def fits_table(report: FitReport, stall: str, group: dict) -> None:
    st.subheader("Fits and held-out errors")
    table = views.models.models_table(report, stall, group)
    shown = views.models.without_empty_figures(table)
    show_table(
        shown,
        column_config={
            "best": st.column_config.CheckboxColumn("best"),
            # "model" beside "models" read as the network profiled: it is the fitted formula
            "model": st.column_config.TextColumn(
                "fit", help="the formula fitted: linear in a count, or alpha-beta (a link's wire time scaled)"
            ),
            "models": st.column_config.NumberColumn("models profiled", help="different models in the points"),
            "r2": st.column_config.TextColumn("R²"),
            # Short headings (the table fits the page), the whole name on hovering them.
            "lomo_mape": st.column_config.TextColumn("error, model out", help="leave-one-model-out MAPE"),
            "lobo_mape": st.column_config.TextColumn(
                "error, bandwidth out", help="leave-one-bandwidth-out MAPE"
            ),
        },
    )
    st.caption(
        "A fit needs at least its parameters plus two profiles (of different models): with fewer its figures "
        "read –, its note says “not enough profiles (n of m needed)”, and it is never the best."
        + ("" if len(shown.columns) == len(table.columns) else " Columns without a figure in any row are "
           "left out here; the download has them.")
    )
    download_buttons(table, f"{stall}_fits", "models-fits", parquet=False)
    median_error, configurations = views.models.median_best_error(report)
    if median_error is not None:
        st.caption(
            f"Median held-out error of the best model over {configurations} configuration(s): "
            f"{median_error:.1%}. Published performance predictors report {PUBLISHED}."
        )


def main() -> None:
    page_header(
        "Models",
        "Communication stall against a model's gradient bytes, gradient tensors and layers; least-squares "
        "and alpha-beta models per configuration, each with its error on models and bandwidths it never saw.",
    )
    by_batch_size = st.toggle("Fit each batch size separately", key="models-by-batch",
                              persist_state="session")
    report = load_report(by_batch_size)
    if report.observations.empty:
        empty_state(
            "No measured interconnect or network stalls yet. The models are fitted to profiles of several "
            "models, each with 2 or more workers or machines: start them on the Run page one at a time, or "
            "all at once with `stash campaign --family resnet --depths 10,12,16,18,34,50 --workers 2`. The "
            "examples on the Overview hold a few.",
            first_steps,
        )
        return
    stalls = views.models.fitted_stalls(report)
    # the stall and the axis side by side, the configuration (a long label) under them: three in a row cut
    # "Against" to "Gradient l" in an 800 px window
    top = [*st.columns(2), st.container()]
    stall = top[0].radio("Stall", stalls, horizontal=True, key="models-stall", persist_state="session")
    labels = views.models.group_labels(report, stall)
    chosen = top[2].selectbox("Configuration", labels, key="models-group", persist_state="session")
    group = report.groups(stall)[labels.index(chosen)]
    for warning in views.models.group_label_warnings(report, stall, group):  # named by that label
        st.warning(plain(sentence(warning)), icon=":material/report:")
    if left_out := [line for line in report.left_out if f" the {stall} fit: " in line]:
        with st.expander(f"Runs left out of the {stall} fits ({len(left_out)})", icon=":material/block:"):
            st.markdown("\n".join(f"- {plain(line)}" for line in left_out))
    feature = top[1].selectbox(
        "Against", list(FEATURE_LABELS), format_func=FEATURE_LABELS.get, key="models-feature",
        persist_state="session"
    )
    best = report.best(stall, group)
    points = views.models.stall_points(report, stall, group)
    best_fit_metrics(best, views.models.group_shortfall(report, stall, group))
    points_view(report, stall, group, feature, points)
    fits_table(report, stall, group)
    if best is not None and not points.empty:
        st.subheader(f"Residuals of {best.name}")
        residual_data = points[["model", "fit", "measured_ms", "residual_ms"]]
        chart_with_download(
            residual_chart(residual_data), residual_data, f"{stall}_residuals", "models-residuals"
        )
    prediction_form(report, stalls)


with page_guard():
    main()
