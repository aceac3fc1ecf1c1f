"""Schedule: simulate a GPU cluster placing a trace's jobs under several policies (an uploaded trace or a
synthetic one), compare JCT, makespan and communication overhead, and look at past simulations."""

import altair as alt
import streamlit as st

from pages._shared import (
    chart_with_download,
    current_db,
    empty_state,
    forget_cached_queries,
    load,
    page_guard,
    page_header,
)
from stash_core.sched import FORMATS, POLICIES, TUNING_MODES
from stash_core.views import schedule as view

DEFAULT_POLICIES = ["fifo", "las", "consolidate", "delay", "network-delay", "network-preempt"]


def form() -> None:
    with st.form("simulate"):
        source = st.radio("Trace", ["synthetic", "upload"], horizontal=True, key="sched-source")
        files = st.file_uploader(
            "Trace file(s) (PAI 2020: the job and task tables)", accept_multiple_files=True
        )
        fmt = st.selectbox("Format of the uploaded trace", FORMATS)
        left, mid, right = st.columns(3)
        jobs = left.number_input("Synthetic jobs", 1, view.MAX_PAGE_JOBS, 300, key="sched-jobs")
        seed = mid.number_input("Seed", 0, 2**31 - 1, 0)
        gap = right.number_input("Mean gap between arrivals (s)", 0.1, 86400.0, 60.0)
        switches = left.number_input("Switches", 1, 1000, 4)
        nodes = mid.number_input("Nodes per switch", 1, 1000, 4)
        gpus = right.number_input("GPUs per node", 1, 64, 8)
        node_gbps = left.number_input("Node uplink Gbit/s (0: fixed slowdowns, no congestion)", 0.0, 1e5, 0.0)
        ratio = mid.number_input("Switch uplink oversubscription", 0.1, 1000.0, 4.0)
        tuning = right.selectbox("Timers", TUNING_MODES, key="sched-tuning")
        policies = st.multiselect("Policies", POLICIES, DEFAULT_POLICIES, key="sched-policies")
        if not st.form_submit_button("Simulate", icon=":material/play_arrow:"):
            return
    uploads = [(f.name, f.getvalue()) for f in files or []] if source == "upload" else None
    if source == "upload" and not uploads:
        st.error("Upload a trace file, or choose the synthetic trace.", icon=":material/error:")
        return
    with st.spinner("Simulating…"):
        doc = view.simulate(
            current_db(), files=uploads, trace_format=fmt, synthetic_jobs=int(jobs), seed=int(seed),
            mean_gap_s=float(gap), cluster=(switches, nodes, gpus), policies=policies, tuning=tuning,
            node_gbps=float(node_gbps) or None, oversubscription=float(ratio),
            out_dir=current_db().parent / "results",
        )  # fmt: skip
    st.session_state["schedule_doc"] = doc
    forget_cached_queries()


def show(doc: dict, key: str) -> None:
    st.subheader(f"{doc['trace']} · {doc['jobs']} jobs reported")
    tuning = str(doc["tuning"])
    st.caption(f"{tuning[:1].upper()}{tuning[1:]}. A simulation, not a measurement.")
    for line in view.winners(doc):
        st.markdown(f"- Lowest {line}")
    st.dataframe(view.summary_table(doc), hide_index=True)
    st.caption(
        "Communication overhead: the time jobs ran slower than consolidated, through spread placements and "
        "congested links, summed over jobs."
    )
    hours = view.metrics_frame(doc)  # one row of bars per metric, each on its own scale
    bars = alt.Chart(hours).mark_bar().encode(
        x=alt.X("hours:Q", title="hours"), y=alt.Y("label:N", title=None),
        color=alt.Color("label:N", legend=None),
        tooltip=["label", "metric", alt.Tooltip("hours:Q", format=".2f")],
        row=alt.Row("metric:N", title=None, sort=list(view.SUMMARY.values()),
                    header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top", labelFontSize=13)),
    ).properties(height=24 * hours["label"].nunique()).resolve_scale(x="independent")  # fmt: skip
    chart_with_download(bars, hours, "schedule-metrics", f"{key}-metrics")
    cdf = view.cdf_frame(doc)
    line = alt.Chart(cdf).mark_line().encode(
        x=alt.X("jct_h:Q", title="job completion time (h)", scale=alt.Scale(type="symlog")),
        y=alt.Y("fraction:Q", title="fraction of jobs"), color="policy:N",
    )  # fmt: skip
    chart_with_download(line, cdf, "schedule-jct-cdf", f"{key}-cdf")
    timeline = view.timeline_frame(doc)
    if not timeline.empty:
        for column, title in (("queued_jobs", "jobs waiting"), ("busy_share", "GPU busy share")):
            chart = (
                alt.Chart(timeline)
                .mark_line()
                .encode(
                    x=alt.X("t_h:Q", title="time (h)"), y=alt.Y(f"{column}:Q", title=title), color="policy:N"
                )
            )
            chart_with_download(chart, timeline, f"schedule-{column}", f"{key}-{column}")


with page_guard():
    page_header("Schedule", "Network-sensitive GPU cluster scheduling, simulated policy by policy")
    form()
    if "schedule_doc" in st.session_state:
        show(st.session_state["schedule_doc"], "new")
    st.subheader("Past simulations")
    past = load(view.past_simulations)
    if past.empty:
        empty_state("No simulation stored yet: run one above, or `stash schedule --synthetic-jobs 500`.")
    else:
        st.dataframe(past.drop(columns=["jct_cdf", "timeline", "fabric", "settings"]), hide_index=True)
        ids = list(dict.fromkeys(past["simulation_id"]))
        picked = st.selectbox("Show a past simulation", ids, index=None, placeholder="choose a simulation")
        if picked:
            show(view.stored_document(past, picked), "past")
