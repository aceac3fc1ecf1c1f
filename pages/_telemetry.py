"""The Breakdown page's telemetry section: utilisation over the profile as its runs happened, in rounds."""

import altair as alt
import pandas as pd
import streamlit as st

from pages._shared import download_buttons, show_chart
from stash_core import views
from stash_core.views.common import plain

PHASE_COLORS = ["#9ecae9", "#ffbf79", "#ff9d98", "#88d27a", "#d6a5c9", "#bab0ac"]


def telemetry(run: dict) -> None:
    series = run["telemetry"]
    if series.empty:
        st.info("No telemetry stored for this run.", icon=":material/info:")
        return
    phases = run.get("phases") or []
    spans = views.telemetry.telemetry_spans(series, phases)
    if views.telemetry.on_run_clocks(series, views.telemetry.sampling_interval_s(phases)):
        st.caption(
            "Stored before a profile kept every launch's telemetry: each run's first launch, the runs laid "
            "end to end."
        )
    else:
        st.caption(
            "As measured: each run's launches when they ran, in rounds (R0 R1 R3 R2, then reversed). A band "
            "is one stretch of a run's samples: two launches of a run back to back make one band, and R0 and "
            "R1 timed together in one launch are one run, R0+R1."
        )
    groups = list(dict.fromkeys(sorted(series["group"], key=_group_order)))
    defaults = [g for g in groups if not g.startswith("Memory") and g != "Other"][:4] or groups[:1]
    chosen = st.pills("Show", groups, selection_mode="multi", default=defaults, key="bd-telemetry-groups",
                      persist_state="session")
    per_core = st.toggle("Per-core CPU lines", value=False, key="bd-percore", persist_state="session")
    for index, group in enumerate(chosen or []):
        data = series[series["group"] == group]
        if not per_core:
            data = data[~data["metric"].str.fullmatch(r"cpu\d+_util_pct")]
        if data.empty:
            continue
        st.markdown(f"**{plain(group)}**")
        show_chart(telemetry_chart(data, spans, group))
        download_buttons(
            data, f"telemetry_{run['run_id']}_{index}", f"bd-tel-{index}", parquet=False, label="Chart data"
        )


def _group_order(group: str) -> int:
    order = ["CPU", "GPU utilisation", "Disk", "Network", "GPU memory", "GPU power", "GPU links", "Memory"]
    return next((i for i, prefix in enumerate(order) if group.startswith(prefix)), len(order))


def telemetry_chart(data: pd.DataFrame, spans: pd.DataFrame, group: str) -> alt.LayerChart:
    """One line per metric and stretch of a run (never bridging the other runs' stretches) over bands
    coloured by run."""
    named = data.assign(what=data["metric"].map(views.telemetry.metric_words))  # the legend in words
    lines = (
        alt.Chart(named)
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("run_t_s:Q", title="Time since the profile started (s)"),
            y=alt.Y("value:Q", title=group),
            color=alt.Color("what:N", title="Metric"),
            detail=alt.Detail("segment:N"),
            tooltip=[
                alt.Tooltip("phase:N", title="Run"),
                alt.Tooltip("what:N", title="Metric"),
                alt.Tooltip("run_t_s:Q", title="Time (s)", format=".1f"),
                alt.Tooltip("value:Q", format=".2f"),
            ],
        )
    )
    if spans.empty:
        return lines.properties(height=220)
    runs = list(dict.fromkeys(spans["phase"]))
    colors = alt.Scale(domain=runs, range=(PHASE_COLORS * len(runs))[: len(runs)])
    areas = (
        alt.Chart(spans)
        .mark_rect(opacity=0.25)
        .encode(
            x=alt.X("start_s:Q"),
            x2=alt.X2("end_s"),
            color=alt.Color("phase:N", scale=colors, title="Run", legend=alt.Legend(orient="top")),
            tooltip=[
                alt.Tooltip("phase:N", title="Run"),
                alt.Tooltip("description:N"),
                alt.Tooltip("start_s:Q", title="From (s)", format=".1f"),
                alt.Tooltip("end_s:Q", title="To (s)", format=".1f"),
            ],
        )
    )
    labels = (
        alt.Chart(spans)
        .mark_text(align="left", baseline="top", dx=2, dy=4, fontWeight="bold", fontSize=10)
        .encode(x=alt.X("start_s:Q"), y=alt.YValue(0), text=alt.Text("phase:N"))
    )
    return alt.layer(areas, lines, labels).resolve_scale(color="independent").properties(height=220)
