"""Schedule: simulate a GPU cluster placing a trace's jobs under several policies (an uploaded trace or a
synthetic one), compare JCT, makespan and communication overhead, and look at past simulations. Every
default is the command's (stash_core/sched/defaults.py)."""

from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from pages._fields import CheckedNumbers
from pages._shared import (
    chart_with_download,
    current_db,
    download_buttons,
    empty_state,
    forget_cached_queries,
    load,
    page_guard,
    page_header,
    show_chart,
    show_table,
)
from stash_core import views
from stash_core.errors import StashError
from stash_core.results.file import results_dir_of
from stash_core.sched import TUNING_MODES
from stash_core.sched import defaults as d
from stash_core.sched.detect import FORMATS
from stash_core.sched.fabric import MAX_GBPS, MIN_GBPS
from stash_core.sched.generate import ARRIVALS
from stash_core.sched.policy import DEFINITIONS, POLICIES
from stash_core.terminal import printable
from stash_core.views import schedule as view
from stash_core.views.common import in_page_words, plain, sentence

FORMAT_NAMES = {
    "auto": "told from the file's columns",
    "tiresias": "Tiresias CSV (job_id, num_gpu, submit_time, duration)",
    "philly": "Microsoft Philly cluster_job_log (JSON)",
    "pai2020": "Alibaba PAI 2020: pai_job_table.csv with pai_task_table.csv",
    "helios": "Helios cluster_log.csv",
}
GENERATORS = {"basic": "basic: 1-16 GPUs, log-normal durations",
              "philly": "Philly-like: 1-32 GPUs, heavy tail, daily rhythm"}  # fmt: skip


def form() -> None:
    numbers = CheckedNumbers()  # bounds checked on Simulate, not in the browser (pages/_fields.py)
    st.markdown("**Workload**")
    source = st.radio("Trace", ["synthetic", "upload"], horizontal=True, key="sched-source",
                      persist_state="session")
    if source == "upload":
        fmt = st.selectbox("Format of the uploaded trace", ("auto", *FORMATS), key="sched-format",
                           persist_state="session",
                           format_func=lambda f: f"{f}: {FORMAT_NAMES[f]}")  # fmt: skip
        pai = " (both tables)" if fmt in ("pai2020", "auto") else ""
        files = st.file_uploader(f"Trace file{pai}: {FORMAT_NAMES[fmt]}", accept_multiple_files=True,
                                 key="sched-files")  # fmt: skip
    else:
        fmt, files = d.TRACE_FORMAT, None
    left, mid, right = st.columns(3)
    generator = left.selectbox("Generator", list(GENERATORS), format_func=GENERATORS.get,
                               key="sched-generator", persist_state="session",
                               disabled=source == "upload")  # fmt: skip
    jobs = numbers.number(mid, "Synthetic jobs", 1, view.MAX_PAGE_JOBS, d.SYNTHETIC_JOBS, key="sched-jobs",
                            persist_state="session",
                            disabled=source == "upload")  # fmt: skip
    gap = numbers.number(right, "Mean gap between arrivals (s)", 0.1, 86400.0, d.MEAN_GAP_S, format="%g",
                             key="sched-gap", persist_state="session",
                             disabled=source == "upload")  # fmt: skip
    if source == "upload":  # a trace has its own arrivals, or all at once; a seed draws none of it
        arrivals = left.selectbox(
            "Arrivals", ("as in the trace", "batch"), key="sched-trace-arrivals", persist_state="session",
            help="as in the trace: its submit times; batch: all its jobs at once",
        )  # fmt: skip
        arrivals = "batch" if arrivals == "batch" else d.ARRIVALS  # the view reads any other as the trace's
    else:
        arrivals = left.selectbox(
            "Arrivals", ARRIVALS, index=ARRIVALS.index(d.ARRIVALS), key="sched-arrivals",
            persist_state="session",
            help="poisson: continuous; batch: every job at 0; burst: groups of 20 at one instant",
        )  # fmt: skip
    seed = numbers.number(mid, "Seed", 0, 2**31 - 1, d.SEED, key="sched-seed", persist_state="session",
                          disabled=source == "upload", help="of the synthetic trace")  # fmt: skip

    st.markdown("**Cluster and links**")
    left, mid, right = st.columns(3)
    switches = numbers.number(left, "Switches", 1, 1000, d.CLUSTER[0], key="sched-switches",
                                 persist_state="session")
    nodes = numbers.number(mid, "Nodes per switch", 1, 1000, d.CLUSTER[1], key="sched-nodes",
                             persist_state="session")
    gpus = numbers.number(right, "GPUs per node", 1, 64, d.CLUSTER[2], key="sched-gpus",
                          persist_state="session")
    node_gbps = numbers.number(left,
        "Node uplink (Gbit/s)", 0.0, MAX_GBPS, 0.0, format="%g", key="sched-node-gbps",
        persist_state="session",
        help="0: no link model (fixed slowdowns, the uplink factor across switches); above 0: links shared "
        "max-min fairly, communication = ring all-reduce bytes over the rate a job gets",
    )  # fmt: skip
    ratio = numbers.number(mid, "Switch uplink oversubscription", 0.1, 1000.0, d.OVERSUBSCRIPTION,
                             format="%g", key="sched-oversubscription", persist_state="session",
                             help="switch uplink = nodes per switch x node uplink / this")  # fmt: skip
    reference = numbers.number(right,
        "Slowdowns read at (Gbit/s)", MIN_GBPS, MAX_GBPS, d.REFERENCE, format="%g", key="sched-reference",
        persist_state="session",
        help="the bandwidth a trace's network_slowdown (or Blox's penalty) holds for",
    )  # fmt: skip
    uplink_factor = numbers.number(left,
        "Uplink factor (no link model)", 1.0, 1000.0, d.UPLINK_FACTOR, format="%g",
        key="sched-uplink-factor",
        persist_state="session",
        help="without a node uplink: the network stall multiplier when crossing more switches than needed",
    )  # fmt: skip

    st.markdown("**Policies and timers**")
    policies = st.multiselect("Policies", POLICIES, list(d.POLICY_NAMES), key="sched-policies",
                              persist_state="session",
                              help="; ".join(f"{p}: {DEFINITIONS[p]}" for p in POLICIES))  # fmt: skip
    left, mid, right = st.columns(3)
    tuning = left.selectbox(
        "Timers", TUNING_MODES, index=TUNING_MODES.index(d.TUNING), key="sched-tuning",
        persist_state="session",
        help="split: tuned on the first 30% of the jobs, reported on the rest; online: from estimates and "
        "observed waits; given: the delay and scale here",
    )  # fmt: skip
    # used only with timers given: greyed out otherwise, as the synthetic trace's fields are for an upload
    unused = tuning != "given"
    delay_s = numbers.number(mid, "Delay timer (s, given)", 0.0, 1e7, d.DELAY_S, format="%g",
                             key="sched-delay", persist_state="session", disabled=unused)  # fmt: skip
    scale = numbers.number(right, "Network timer scale (given)", 0.0, 1e6, d.SCALE, format="%g",
                           key="sched-scale", persist_state="session", disabled=unused)  # fmt: skip
    checkpoint_s = numbers.number(left, "Checkpoint (s)", 0.0, 1e6, d.CHECKPOINT_S, format="%g",
                                     key="sched-checkpoint",
                                     persist_state="session",
                                     help="preemption: save + restore, paid on restart")  # fmt: skip
    min_run_s = numbers.number(mid, "Minimum run before preemption (s)", 0.0, 1e7, d.MIN_RUN_S,
                                 format="%g", key="sched-min-run", persist_state="session")  # fmt: skip
    if not st.button("Simulate", icon=":material/play_arrow:", type="primary") or numbers.refused():
        return
    uploads = [(f.name, f.getvalue()) for f in files or []] if source == "upload" else None
    if source == "upload" and not uploads:
        st.error("Upload a trace file, or choose the synthetic trace.", icon=":material/error:")
        return
    database_was_there = Path(current_db()).exists()
    try:
        with st.spinner(f"Simulating (stopped after {view.PAGE_TIME_LIMIT_S:.0f} s)…"):
            doc = view.simulate_within_limit(
                current_db(), files=uploads, trace_format=fmt, synthetic_jobs=int(jobs), seed=int(seed),
                mean_gap_s=float(gap), arrivals=arrivals, generator=generator,
                cluster=(switches, nodes, gpus),
                policies=policies, tuning=tuning, delay_s=float(delay_s), scale=float(scale),
                checkpoint_s=float(checkpoint_s), min_run_s=float(min_run_s),
                uplink_factor=float(uplink_factor), node_gbps=float(node_gbps) or None,
                oversubscription=float(ratio), reference_gbps=float(reference),
                out_dir=results_dir_of(current_db()),
            )  # fmt: skip
    except StashError as exc:  # said here: the past simulations below stay, an earlier answer does not
        st.session_state.pop("schedule_doc", None)
        st.error(plain(in_page_words(str(exc), WORDS)), icon=":material/error:")
        return
    st.session_state["schedule_doc"] = doc
    if not database_was_there and Path(current_db()).exists():  # said, as the Upload page says it
        st.info(f"Stored in a new database, {plain(str(current_db()))}.", icon=":material/database:")
    forget_cached_queries()


def metric_bars(frame: pd.DataFrame, metric: str) -> alt.Chart:
    """One metric's bar per policy, each named: the theme's labelOverlap dropped every other name (5 of 9)."""
    return alt.Chart(frame, title=metric).mark_bar().encode(
        x=alt.X("hours:Q", title="hours"),
        y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=0, labelOverlap=False)),
        color=alt.Color("label:N", legend=None),
        tooltip=["label", "metric", alt.Tooltip("hours:Q", format=".2f")],
    ).properties(height=alt.Step(26))  # fmt: skip


def show(doc: dict, key: str) -> None:
    st.subheader(f"{plain(doc['trace'])} · {int(doc['jobs']):,} jobs reported")
    cluster = doc.get("cluster") or {}
    if cluster:  # as the command's first line says it
        st.markdown(f"On {cluster['switches']} switch(es) × {cluster['nodes_per_switch']} nodes × "
                    f"{cluster['gpus_per_node']} GPUs ({int(cluster['gpus']):,} GPUs)")  # fmt: skip
    tuning = plain(in_page_words(str(doc["tuning"]), WORDS))  # its way out in this page's words
    st.caption(f"{tuning[:1].upper()}{tuning[1:]}. A simulation, not a measurement.")
    for line in view.assumption_lines(doc):  # what the command says it assumed
        st.caption(plain(sentence(line)) + ".")
    for line in view.winners(doc):
        st.markdown(f"- Lowest {line}")
    if len(doc.get("policies") or []) > 1:  # one trace's order, not a ranking of the policies
        st.caption("One simulated trace: policies a few percent apart can swap places on another trace "
                   "(another Seed draws another synthetic one).")  # fmt: skip
    table = view.summary_table(doc).set_index("policy")
    for column in table.columns:  # as rounded: a static table pads 87.9 to "87.9000"
        digits = 2 if column.endswith("(h)") else 1 if column.endswith("(%)") else None
        if digits is None and pd.api.types.is_integer_dtype(table[column]):
            digits = 0  # counts with thousands marks, as the times: "21,164" preemptions
        if digits is not None:
            table[column] = [f"{value:,.{digits}f}" if pd.notna(value) else None for value in table[column]]
    st.table(views.common.with_missing_shown(table))
    st.caption(
        "Communication overhead: the time jobs ran slower than consolidated, through spread placements and "
        "congested links, summed over jobs."
    )
    hours = view.metrics_frame(doc)  # one chart of bars per metric, each on its own scale
    # one chart each, not a faceted one: a facet keeps a fixed width and cut the longest bars at 800 px
    for metric in [name for name in view.SUMMARY.values() if name in set(hours["metric"])]:
        show_chart(metric_bars(hours[hours["metric"] == metric], metric))
    download_buttons(hours, "schedule-metrics", f"{key}-metrics", parquet=False, label="Chart data")
    # in two columns: nine policies in one row were cut to five at 800 px
    legend = alt.Legend(labelLimit=0, title=None, orient="bottom", columns=2)
    cdf = view.cdf_frame(doc)
    line = alt.Chart(cdf).mark_line().encode(
        x=alt.X("jct_h:Q", title="job completion time (h)", scale=alt.Scale(type="symlog")),
        y=alt.Y("fraction:Q", title="fraction of jobs"), color=alt.Color("policy:N", legend=legend),
    )  # fmt: skip
    chart_with_download(line, cdf, "schedule-jct-cdf", f"{key}-cdf")
    delays = view.queue_delay_frame(doc)
    if not delays.empty:
        chart = alt.Chart(delays).mark_line(point=True).encode(
            x=alt.X("arrival_h:Q", title="arrival time (h)"),
            y=alt.Y("queue_h:Q", title="mean queueing delay (h)"), color=alt.Color("policy:N", legend=legend),
        )  # fmt: skip
        chart_with_download(chart, delays, "schedule-queue-delay", f"{key}-queue-delay")
    timeline = view.timeline_frame(doc)
    if not timeline.empty:
        titles = (("queued_jobs", "jobs waiting"), ("busy_share", "GPU busy share (every job running)"))
        for column, title in titles:
            chart = alt.Chart(timeline).mark_line().encode(
                x=alt.X("t_h:Q", title="time (h)"), y=alt.Y(f"{column}:Q", title=title),
                color=alt.Color("policy:N", legend=legend),
            )  # fmt: skip
            chart_with_download(chart, timeline, f"schedule-{column}", f"{key}-{column}")


# The commands' options in this page's words (it has no control for a tuning share).
WORDS = {
    "use --tuning online or given, or a larger --tune-fraction": (
        "choose timers online or given, or more jobs"
    ),
    "use --tuning online or given": "choose timers online or given",
    "(as with --arrivals batch)": "(as with batch arrivals)",
    "give --trace-format": "choose the trace's format",
    "--db: ": "the database: ",
    "--out ": "the result folder beside the database, ",
}

with page_guard(WORDS):
    page_header("Schedule", "Network-sensitive GPU cluster scheduling, simulated policy by policy")
    views.common.check_database(current_db())  # one that cannot be opened: said once, before a simulation
    form()
    if "schedule_doc" in st.session_state:
        show(st.session_state["schedule_doc"], "new")
    st.subheader("Past simulations")
    past = load(view.past_simulations)
    if past.empty:
        empty_state("No simulation stored yet: choose a trace and policies above, then Simulate.")
    else:
        ids = list(dict.fromkeys(past["simulation_id"]))
        stored = past.attrs.get("simulations_stored", len(ids))
        if stored > len(ids):
            st.caption(
                f"The newest {len(ids):,} of {stored:,} stored simulations are listed (and downloaded here); "
                "`stash export` writes them all, and the SQL page reads the `simulations` table."
            )
        show_table(view.past_table(past))
        download_buttons(past.drop(columns=["jct_cdf", "timeline"]), "simulations", "sched-past")
        labels = view.simulation_labels(past)
        picked = st.selectbox(
            "Show a past simulation", ids, index=None, placeholder="choose a simulation", key="sched-pick",
            # an option is plain text, not Markdown: printable only (plain's escapes showed as "01\:44")
            persist_state="session", format_func=lambda sim: printable(labels.get(sim, sim))
        )
        if picked:
            show(view.stored_document(past, picked), "past")
