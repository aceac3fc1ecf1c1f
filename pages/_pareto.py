"""The Recommend page's time-against-cost chart: every configuration evaluated, the Pareto front dashed, the
time budget a red rule."""

import altair as alt
import pandas as pd
import streamlit as st

from pages._shared import chart_with_download
from stash_core import views


def pareto_chart(data: pd.DataFrame, budget_hours: float | None) -> alt.LayerChart:
    """Training cost against time of views.recommend.pareto_points, the Pareto front dashed."""
    base = alt.Chart(data)
    points = base.mark_point(filled=True, size=90).encode(
        x=alt.X("training_h:Q", title="Training time (hours)", scale=alt.Scale(type="log")),
        y=alt.Y("training_usd:Q", title="Training cost (USD)", scale=alt.Scale(type="log")),
        # Those that meet the constraints in colour, the others grey: the domain is given, so that the
        # colours do not follow the labels' alphabetical order.
        color=alt.Color(
            "kind:N",
            title=None,
            scale=alt.Scale(
                domain=list(views.recommend.MEETS_CONSTRAINTS.values()), range=["#4C78A8", "#bab0ac"]
            ),
            legend=alt.Legend(orient="top"),
        ),
        # below the chart: beside the colours' legend, it ran past the right edge in an 800 px window
        shape=alt.Shape("source:N", title="Iteration time", legend=alt.Legend(orient="bottom")),
        tooltip=[
            alt.Tooltip("config:N", title="configuration"),
            alt.Tooltip("source:N"),
            alt.Tooltip("training_h:Q", title="hours", format=".1f"),
            alt.Tooltip("training_usd:Q", title="USD", format=",.2f"),
            alt.Tooltip("usd_per_h:Q", title="USD per hour", format=".2f"),
            alt.Tooltip("expected_error:Q", title="expected error", format=".1%"),
        ],
    )
    front = (
        alt.Chart(data[data["pareto"]].sort_values("training_h"))
        .mark_line(color="#F58518", strokeDash=[5, 3])
        .encode(x="training_h:Q", y="training_usd:Q")
    )
    layers = [front, points]
    if budget_hours:
        layers.append(
            alt.Chart(pd.DataFrame({"budget": [budget_hours]}))
            .mark_rule(color="#E45756")
            .encode(x="budget:Q")
        )
    return alt.layer(*layers).properties(height=360)


def pareto_view(options: pd.DataFrame, budget_hours: float | None) -> None:
    st.subheader("Time against cost")
    st.caption(
        "Every configuration evaluated; the dashed line is the Pareto front (nothing else is both faster "
        "and cheaper)" + (", the red rule the time budget." if budget_hours else ".")
    )
    free = views.recommend.free_options(options)
    if free:
        st.caption(
            f"{free} configuration(s) cost $0 (an instance priced at 0 per hour) and are not drawn: the cost "
            "axis is logarithmic and has no 0. They are in the chart's data and, where they meet the "
            "constraints, in the table below."
        )
    columns = [
        "config",
        "source",
        "training_h",
        "training_usd",
        "usd_per_h",
        "expected_error",
        "feasible",
        "pareto",
    ]
    chart_with_download(
        pareto_chart(views.recommend.pareto_points(options), budget_hours),
        options[columns],
        "pareto",
        "rec-pareto",
    )
