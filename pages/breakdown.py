"""Stall breakdown: compare their stalls per iteration, per epoch or as shares; one run in detail."""

from datetime import date

import altair as alt
import pandas as pd
import streamlit as st

from pages._shared import (
    MEASURES,
    chart_with_download,
    download_buttons,
    load,
    page_guard,
    seconds_text,
    share_text,
    show_table,
)
from pages._stalls import CAPTION, breakdown_chart, runs_table, stall_table
from pages._telemetry import telemetry
from stash_core import views
from stash_core.analysis.epochs import per_epoch
from stash_core.analysis.stalls import stall_fault
from stash_core.cells import is_missing
from stash_core.errors import StashError
from stash_core.units import finite_float
from stash_core.views.breakdown import RunFilter
from stash_core.views.common import STALL_LABELS, plain

DETAIL_SECTIONS = ["Stalls", "What if", "Iteration times", "Telemetry", "Phases", "Machine and spec"]


def filter_from_state() -> RunFilter:
    """The filter the widgets below hold (read before drawing them, so one query serves the whole page)."""
    state = st.session_state
    date_from, date_to = views.breakdown.open_ended_days(state.get("bd-dates"), state.get(_DATE_BOUNDS))
    return RunFilter(
        models=list(state.get("bd-models") or []),
        batch_sizes=[int(b) for b in state.get("bd-batch") or []],
        instances=list(state.get("bd-instance") or []),
        workers=[int(w) for w in state.get("bd-workers") or []],
        nodes=[int(n) for n in state.get("bd-nodes") or []],
        statuses=list(state.get("bd-status", ["completed"]) or []),
        date_from=date_from,
        date_to=date_to,
        limit=views.breakdown.runs_shown(state.get("bd-limit", views.breakdown.FIRST_RUNS_SHOWN)),
    )


def run_filter_form(options: dict) -> None:
    """The filter widgets; their values are read by filter_from_state on the next run."""
    with st.expander("Filter runs", expanded=False, icon=":material/filter_list:"):
        row1 = st.columns(3)
        row1[0].multiselect("Model", options["models"], key="bd-models", persist_state="session",
                            placeholder="any model")
        row1[1].multiselect("Batch size", options["batch_sizes"], key="bd-batch", persist_state="session",
                            placeholder="any")
        row1[2].multiselect("Instance", options["instances"], key="bd-instance", persist_state="session",
                            placeholder="any")
        row2 = st.columns(4)
        row2[0].multiselect("Workers per node", options["workers"], key="bd-workers", persist_state="session",
                            placeholder="any")
        row2[1].multiselect("Nodes", options["nodes"], key="bd-nodes", persist_state="session",
                            placeholder="any")
        statuses = views.breakdown.status_choices(options)
        row2[2].multiselect("Status", statuses, default=["completed"], key="bd-status",
                            persist_state="session", placeholder="any")
        # any number (as _fields.WHOLE): a bounded input ignored 500, a whole-number one read 2.5 as 2
        row2[3].number_input("Show at most", value=float(views.breakdown.FIRST_RUNS_SHOWN), key="bd-limit",
                             step=5.0, format="%.12g", persist_state="session",
                             help=f"1 to {views.breakdown.MOST_RUNS_SHOWN} runs")
        first, last = options["first_date"], options["last_date"]
        if first and last and first != last:
            _date_slider(first, last)


_DATE_BOUNDS = "bd-dates-bounds"  # the first and last day the slider was drawn with (a new day moves them)


def _date_slider(first: date, last: date) -> None:
    """The range of days, its ends at the bounds kept open and a narrowed range kept as chosen
    (views.breakdown.kept_days): drawn with new bounds, the slider reset a chosen range."""
    state = st.session_state
    value = views.breakdown.kept_days(state.get("bd-dates"), state.get(_DATE_BOUNDS), first, last)
    state[_DATE_BOUNDS] = (first, last)
    drawn = "bd-dates" in state
    if drawn:
        state["bd-dates"] = value  # a widget's value is set through its key, not also by value=
    st.slider("Started between (UTC days)", min_value=first, max_value=last, key="bd-dates",
              format="YYYY-MM-DD", **({} if drawn else {"value": value}))  # fmt: skip


def comparison(runs: pd.DataFrame, total: int) -> None:
    shown = len(runs)
    asked = st.session_state.get("bd-limit", views.breakdown.FIRST_RUNS_SHOWN)
    most = views.breakdown.MOST_RUNS_SHOWN
    kept = f" (Show at most takes a whole number, 1 to {most})" * (views.breakdown.runs_shown(asked) != asked)
    st.caption(f"{shown} of {total:,} matching run(s), newest first{kept}.")
    measure = (
        st.segmented_control(
            "Measure",
            options=list(MEASURES),
            format_func=lambda m: MEASURES[m][0],
            default="seconds",
            key="bd-measure",
            persist_state="session",
        )
        or "seconds"
    )
    long_frame = views.breakdown.stall_long_frame(runs, measure)
    if long_frame.empty:
        if measure == "epoch_s":
            st.info(
                "These runs have no epoch length (profiles without a data set size); show seconds per "
                "iteration instead.",
                icon=":material/info:",
            )
        else:
            st.info(
                "These runs have no stall figures (they failed before a breakdown).", icon=":material/info:"
            )
    else:
        chart_with_download(
            breakdown_chart(long_frame, measure), long_frame, f"breakdown_{measure}", "bd-chart"
        )
        if left_out := shown - long_frame["run_label"].nunique():  # e.g. runs without an epoch length
            # a run with stalls but no iteration time (a file's "unknown") is left out too
            why = "no stall figures or no iteration time"
            why = "no epoch length (no data set size)" if measure == "epoch_s" else why
            st.caption(f"{left_out} of the {shown} run(s) are not drawn: they have {why}.")
        st.caption(CAPTION)
    with st.expander("Table of these runs", icon=":material/table:"):
        table = views.breakdown.breakdown_table(runs)
        shown, config = runs_table(table, measure)
        show_table(shown, column_config=config)
        st.caption(
            f"{MEASURES[measure][0]} of each part, as the chart shows them; the download has them all."
        )
        download_buttons(table, "stall_breakdown", "bd-table")


def run_detail(run: dict | None) -> None:
    if run is None:
        st.warning("This run is not in the database.", icon=":material/search_off:")
        return
    batch = run.get("batch_size")
    batch_text = "unknown" if is_missing(batch) else int(batch)  # a script's batch is not always measured
    title = (
        f"{plain(views.breakdown.short_model(run.get('model')))} · batch {batch_text} · "
        f"{run.get('workers_per_node')} worker(s) × {run.get('nodes')} node(s)"
    )
    st.markdown(f"#### {title}")
    started = run.get("started_at")
    instance = run.get("instance") or views.common.NO_INSTANCE
    st.caption(
        f"Run {plain(run['run_id'])} · {run.get('status')} · instance **{plain(instance)}**"
        f" · {plain(run.get('device') or '?')} / {plain(run.get('backend') or '?')} · started "
        f"{started:%Y-%m-%d %H:%M UTC}"
        if started
        else f"Run {plain(run['run_id'])}"
    )
    if run.get("status") == "interrupted":  # stopped (a cancel, Ctrl-C): what its rounds done measured
        why = plain(run.get("error") or "no reason recorded")
        st.warning(f"This run was interrupted ({why}): its breakdown is of the runs done before it stopped.",
                   icon=":material/pause_circle:")  # fmt: skip
    elif run.get("status") != "completed":
        st.error(
            f"This run {run.get('status')}: {plain(run.get('error') or 'no reason recorded')}",
            icon=":material/error:",
        )
    stalls = [s for s in run.get("stalls", []) if s.get("seconds") is not None]
    cols = [*st.columns(2), *st.columns(2)]  # four in a row cut the figures ("205 …", "Com…") at 800 px
    ci_s = run.get("iteration_ci95_s")
    cols[0].metric(
        "Iteration",
        seconds_text(run.get("iteration_s")),
        f"± {seconds_text(ci_s)} (95%)" if ci_s is not None else None,
        delta_color="off",
        delta_arrow="off",
        help="the realistic iteration time (the reference phase), with its 95% confidence interval",
    )
    epoch_ci_s = per_epoch(
        finite_float(run.get("iteration_ci95_s")), finite_float(run.get("iterations_per_epoch"))
    )
    cols[1].metric(
        "Epoch",
        seconds_text(run.get("epoch_s")),
        f"± {seconds_text(epoch_ci_s)} (95%)"
        if epoch_ci_s is not None and run.get("epoch_s") is not None
        else None,
        delta_color="off",
        delta_arrow="off",
        help="per iteration × iterations per epoch (the profiled loop's full batches), its interval likewise",
    )
    faulty = [
        STALL_LABELS.get(s.get("stall"), s.get("stall")) for s in run.get("stalls", []) if stall_fault(s)
    ]
    largest = None if faulty else views.breakdown.headline_stall(run)
    if faulty and not run.get("impossible"):  # a stall without a valid figure could be the largest one
        cols[2].metric("Largest stall", "unknown", help=f"no valid stored figure for: {', '.join(faulty)}")
    elif largest is not None and (rivals := views.breakdown.headline_rivals(run, largest)):
        names = [STALL_LABELS.get(stall["stall"], stall["stall"]) for stall in (largest, *rivals)]
        cols[2].metric(
            "Largest stall", "Not told apart", " or ".join(names), delta_color="off", delta_arrow="off",
            help="their 95% intervals overlap: more rounds of launches, or more time a run, tell them apart",
        )  # fmt: skip
    elif largest is not None:
        cols[2].metric(
            "Largest stall",
            STALL_LABELS.get(largest["stall"], largest["stall"]),
            f"{share_text(largest.get('share'))} of the iteration",
            delta_color="off",
            delta_arrow="off",
        )
    elif stalls and not run.get("impossible"):
        cols[2].metric("Largest stall", "none resolved", help="every stall is within its 95% interval")
    cols[3].metric("Reference phase", run.get("reference_phase") or "–")
    if run.get("impossible"):  # the headline: the figures below are not a breakdown of the iteration
        st.error(plain(run["impossible"]), icon=":material/report:")
    for warning in run.get("warnings") or []:
        if warning != run.get("impossible"):
            st.warning(plain(warning), icon=":material/warning:")
    for line in (run.get("core_sharing") or "").splitlines():  # as `stash profile` and `stash show` say it
        note = line.removeprefix("note: ")
        st.info(plain(note[:1].upper() + note[1:]), icon=":material/memory:")

    # Only the chosen section is built (tabs would build all of them on every rerun).
    section = st.segmented_control(
        "Detail", DETAIL_SECTIONS, default=DETAIL_SECTIONS[0], key="bd-section", persist_state="session",
        label_visibility="collapsed"
    )
    if section == "Iteration times":
        iteration_times(run["run_id"], run["samples"], run["samples_stored"])
    elif section == "Telemetry":
        telemetry(run)
    elif section == "Phases":
        phase_table(run)
    elif section == "What if":
        what_if(run)
    elif section == "Machine and spec":
        left, right = st.columns(2)
        left.markdown("**Fingerprint** (the machine)")
        left.json(run.get("fingerprint") or {}, expanded=1)
        right.markdown("**Spec** (what was run)")
        right.json(run.get("spec") or {}, expanded=1)
    else:
        stall_table(run)


WHATIF_TITLES = {"cpu": "CPU cores", "disk": "Memory cache", "network": "Network bandwidth"}  # 800 px: short


def what_if(run: dict) -> None:
    """What would hide the CPU, disk and network stalls, each with the predicted iteration time."""
    if run.get("status") not in ("completed", "interrupted"):  # an interrupted one has its rounds' breakdown
        st.info("What-if answers need a completed run.")
        return
    try:
        answer = load(views.breakdown.whatif, run["run_id"])
    except StashError as error:
        st.info(plain(error))
        return
    cols = st.columns(3)
    for col, key in zip(cols, ("cpu", "disk", "network"), strict=True):
        item = answer.get(key) or {}
        col.metric(
            WHATIF_TITLES[key],
            seconds_text(item.get("predicted_iteration_s")) if item.get("predicted_iteration_s") else "–",
            help="Predicted iteration time with that resource",
        )
        col.caption(plain(item.get("summary") or item.get("status") or ""))
    with st.expander("Assumptions"):
        for assumption in answer.get("assumptions") or []:
            st.markdown(f"- {plain(assumption)}")


# The columns a phase's row shows (the download has every one).
PHASE_COLUMNS = ("phase", "description", "workers", "iterations", "mean_s", "ci95_s", "p95_s", "status")


def phase_table(run: dict) -> None:
    phases = pd.DataFrame(run.get("phases") or [])
    if phases.empty:
        st.info("No phases recorded.", icon=":material/info:")
        return
    shown = phases.assign(
        workers=[f"{w} × {n}" for w, n in zip(phases["workers"], phases["nodes"], strict=True)]
    )
    number = st.column_config.NumberColumn
    show_table(
        shown[[c for c in PHASE_COLUMNS if c in shown.columns]],
        column_config={
            "workers": "workers × nodes",
            **{c: number(format="%.4f") for c in ("mean_s", "ci95_s", "p95_s")},
        },
    )
    download_buttons(phases, f"phases_{run['run_id']}", "bd-phases")


def iteration_times(run_id: str, samples: pd.DataFrame, stored: int) -> None:
    if samples.empty:
        st.info("No per-iteration samples stored for this run.", icon=":material/info:")
        return
    if stored > len(samples):
        st.caption(
            f"{len(samples):,} of the run's {stored:,} stored iterations are drawn (and downloaded here), "
            "evenly spaced within each phase; `stash export` writes them all."
        )
    order = list(dict.fromkeys(samples["phase"]))
    left, right = st.columns(2)
    with left:
        st.markdown("**Distribution per phase**")
        box = (
            alt.Chart(samples)
            .mark_boxplot(extent=1.5, size=22)
            .encode(
                y=alt.Y("phase:N", sort=order, title="Phase"),
                x=alt.X("iteration_s:Q", title="Iteration time (s)"),
                color=alt.Color("phase:N", sort=order, legend=None),
            )
            .properties(height=alt.Step(44))
        )
        chart_with_download(box, samples, f"iterations_{run_id}", "bd-box")
    with right:
        st.markdown("**In order** (after the warm-up)")
        line = (
            alt.Chart(samples)
            .mark_line(point=alt.OverlayMarkDef(size=12))
            .encode(
                x=alt.X("iteration:Q", title="Kept iteration"),
                y=alt.Y("iteration_s:Q", title="Iteration time (s)"),
                color=alt.Color("phase:N", sort=order, title="Phase"),
                tooltip=[
                    alt.Tooltip("phase:N"),
                    alt.Tooltip("iteration:Q"),
                    alt.Tooltip("iteration_s:Q", format=".4f"),
                ],
            )
            .properties(height=max(140, 44 * len(order)))
        )
        chart_with_download(line, samples, f"iterations_order_{run_id}", "bd-line")


def main() -> None:
    st.title("Stall breakdown")
    st.caption(
        "Compute, interconnect, network, CPU pre-processing and disk stalls of each run, with their "
        "95% confidence intervals."
    )
    # A run in the URL that this session has not shown yet was opened by a link: show it whatever the filter,
    # and keep it (through other controls' reruns) until another run is picked.
    previous = st.session_state.get("bd-shown-run")
    linked = st.query_params.get("run")
    if linked != previous:
        st.session_state["bd-linked-run"] = linked
    linked_run = linked if linked != previous or linked == st.session_state.get("bd-linked-run") else None
    page = load(views.breakdown.breakdown_page, filter_from_state(), linked_run, previous)
    options, runs = page["options"], page["runs"]
    if not options["models"]:
        st.info(
            "No runs in this database yet. Start one on the Run page, import the examples on the Overview, "
            "or upload result files.",
            icon=":material/info:",
        )
        st.page_link("pages/overview.py", label="Go to the Overview", icon=":material/dashboard:")
        return
    run_filter_form(options)
    if page["missing"]:
        st.warning(f"{plain(page['missing'])}.", icon=":material/search_off:")
    if runs.empty:
        st.info("No run matches these filters.", icon=":material/filter_alt_off:")
    else:
        comparison(runs, page["total"])

    st.subheader("One run in detail")
    choices = list(runs["run_id"])
    labels = dict(zip(runs["run_id"], runs["run_label"], strict=True))
    detail = page["detail"]
    if detail is not None and detail["run_id"] not in choices:
        choices.insert(0, detail["run_id"])  # a run opened by link that the filter does not show
    if not choices:
        st.caption("Pick runs above to see one in detail.")
        return
    default = detail["run_id"] if detail is not None else choices[0]
    # the picker's value lives in Session State only (a default index as well draws Streamlit's warning):
    # a link, or Back, that names another run than the picker holds, or a pick the filter no longer shows
    if (linked != previous and default == page["linked"]) or st.session_state.get("bd-run") not in choices:
        st.session_state["bd-run"] = default
    picked = st.selectbox("Run", choices, format_func=lambda r: labels.get(r, r), key="bd-run",
                          persist_state="session")
    st.session_state["bd-shown-run"] = picked
    if st.query_params.get("run") != picked:
        st.query_params["run"] = picked
    if detail is None or detail["run_id"] != picked:
        detail = load(views.breakdown.run_detail, picked)
    run_detail(detail)


with page_guard():
    main()
