"""Overview: what the database holds, the latest breakdowns at a glance, and a first step on an empty one."""

import pandas as pd
import streamlit as st

from pages._shared import (
    STATUS_ICONS,
    ago_text,
    chart_with_download,
    current_db,
    forget_cached_queries,
    load,
    page_guard,
    run_link,
    seconds_text,
    show_table,
)
from pages._stalls import CAPTION, FIGURES_HELP, breakdown_chart
from stash_core import views
from stash_core.engine import jobs
from stash_core.engine.job_state import measuring_processes
from stash_core.store import examples
from stash_core.views.common import plain, processes_text


def first_steps() -> None:
    st.subheader("Get started")
    st.write(
        "Stash splits each training iteration into **compute**, **interconnect**, **network**, "
        "**CPU pre-processing** and **disk** stalls by timing runs that differ in one thing only. "
        f"The database `{current_db()}` holds no runs yet — pick a first step:"
    )
    left, right = st.columns(2)
    with left.container(border=True):
        st.markdown("##### :material/library_add: Import the example results")
        shipped = examples.example_result_files()
        st.caption(
            f"{len(shipped)} real profiles recorded on a small 2-vCPU machine, shipped with Stash. "
            "Instant; shows every chart."
        )
        if st.button("Import examples", type="primary", disabled=not shipped, key="import-examples"):
            outcomes = examples.import_examples(current_db())
            forget_cached_queries()
            st.session_state["overview-notice"] = f"Imported {sum(o[2] for o in outcomes)} example run(s)."
            st.rerun()
    with right.container(border=True):
        st.markdown("##### :material/play_circle: Profile this machine")
        st.caption(
            "A small local profile (a tiny CNN on 32×32 images: compute and CPU stalls, each run launched "
            "in rounds until its interval is within ± 10% or its 40 s are spent; other load on the machine "
            "widens the intervals) — one to two minutes on a laptop CPU. It runs in the background; follow "
            "it on the Run page."
        )
        busy = busy_elsewhere()
        if st.button("Run a small profile", key="first-profile", disabled=busy):
            job_id = jobs.start_profile_job(
                current_db(), examples.first_profile_args(), label="first profile"
            )
            st.switch_page("pages/run.py", query_params={"job": job_id})
    st.markdown("Or from a terminal, a larger first profile (ResNet-10 on two workers: interconnect and "
                "disk stalls too), and the result files of other machines:")
    # wrapped: a command cut at the edge of an 800 px window was read, and copied, as whole
    st.code(views.overview.terminal_commands(current_db()), language="bash", wrap_lines=True)


def busy_elsewhere() -> bool:
    """Whether another measurement runs on this machine (a second one would skew both): said, and then the
    first profile waits for a confirmation, as on the Run page."""
    running = [job for job in jobs.list_jobs(current_db(), limit=5) if not job.finished]
    others = measuring_processes()
    if not running and not others:
        return False
    shown = "; ".join(  # labels and command lines are data, not Markdown
        [plain(job.label or job.job_id) for job in running]
        + ([processes_text(others, limit=80)] if others else [])
    )
    st.warning(
        f"Another measurement is running on this machine ({shown}). A profile now would slow both down "
        "and skew their figures.",
        icon=":material/hourglass_top:",
    )
    return not st.checkbox("Start anyway", key="first-profile-anyway")


def active_jobs_notice() -> None:
    """The profiles running on this database: started here, from a terminal or from Python (`stash profile`
    and `stash_core.profile()` register themselves next to the database, engine/jobs.py)."""
    running = [job for job in jobs.list_jobs(current_db(), limit=5) if not job.finished]
    for job in running:
        with st.container(border=True):
            where = job.started_elsewhere
            st.markdown(
                f"{STATUS_ICONS['running']} **Profile running**{where} · {plain(job.label or job.job_id)}"
            )
            st.progress(job.fraction_done)
            st.page_link("pages/run.py", label="Follow it on the Run page", query_params={"job": job.job_id})


def main() -> None:
    st.title("Overview")
    st.caption("Where does the time of each distributed training iteration go?")
    notice = st.session_state.pop("overview-notice", None)
    if notice:
        st.success(notice, icon=":material/check_circle:")
    info = load(views.overview.overview)
    active_jobs_notice()
    if not info["runs"]:
        first_steps()
        return
    # two rows: five in one cut "14 days ago" and "Instances" in an 800 px window
    cols = [*st.columns(3), *st.columns([1, 2])]
    cols[0].metric("Runs", f"{info['runs']:,}", help=f"{info['completed_runs']:,} completed")
    cols[1].metric("Completed", f"{info['completed_runs']:,}")
    cols[2].metric("Models", f"{info['models']:,}")
    cols[3].metric("Instances", f"{info['instances']:,}", help="distinct instance labels (or host names)")
    cols[4].metric("Last run", ago_text(info["last_run_at"]))

    latest = info["latest"]
    st.subheader("Latest breakdowns")
    if latest.empty:
        st.info(
            "No completed run yet — the runs stored so far failed or were interrupted.",
            icon=":material/info:",
        )
    else:
        measure = st.segmented_control(
            "Show",
            options=["share", "seconds"],
            format_func={"share": "Share of the iteration", "seconds": "Seconds per iteration"}.get,
            default="share",
            key="overview-measure",
            persist_state="session",
        )
        long_frame = views.breakdown.stall_long_frame(latest, measure or "share")
        chart_with_download(
            breakdown_chart(long_frame, measure or "share"), long_frame, "latest_breakdowns", "ov"
        )
        st.caption(CAPTION)
        newest = latest.iloc[0]
        st.markdown(
            f"Newest: **{plain(newest['run_label'])}** — iteration "
            f"{seconds_text(newest['iteration_s'], newest['iteration_ci95_s'])}"
        )
        run_link(str(newest["run_id"]), "Open the newest run")

    st.subheader("Recent runs")
    recent = info["recent"].assign(error=info["recent"]["error"].fillna(""))
    # Workers and machines in one column: the table fits the page.
    scale = [f"{w} × {n}" for w, n in zip(recent["workers_per_node"], recent["nodes"], strict=True)]
    # a run as the charts and `stash show` name it: the random tail of its id (the whole id ran to 4 lines)
    short = views.breakdown.listed_run_ids(list(recent["run_id"]))
    recent = recent.assign(workers_per_node=scale, run_id=short)
    # the device and the epoch are on the run's own page, and a run's error and what its partial times are of
    # under the table: as columns, their sentences narrowed the others to names broken mid-word and cut
    # headings in a 1280 px window
    marks = [column for column in ("label", "figures") if not recent[column].any()]
    hidden = ["nodes", "device", "epoch_s", "error", "time_of", *marks]
    show_table(
        recent.drop(columns=hidden),
        column_config={
            "run_id": st.column_config.TextColumn("Run", help="The last part of the run id: `stash show` "
                                                  "and the Stall breakdown page take it"),
            "started_at": st.column_config.DatetimeColumn("Started (UTC)", format="YYYY-MM-DD HH:mm"),
            "status": st.column_config.TextColumn("Status"),
            "model": "Model",
            "batch_size": st.column_config.NumberColumn("Batch"),
            "workers_per_node": st.column_config.TextColumn("Workers", help="workers per machine × "
                                                            "machines"),
            "instance": "Instance",
            "label": st.column_config.TextColumn("Label", help="contradicted: the machine does not fit the "
                                                 "instance label; the run's page says why"),
            "figures": st.column_config.TextColumn("Figures", help=FIGURES_HELP),
            # the mean and its 95% interval beside it, as numbers (they sort), as the line above gives them
            "iteration_s": st.column_config.NumberColumn("Iteration (s)", format="%.4f", help="the mean "
                                                         "time per iteration; a run that did not complete "
                                                         "has one phase's (said under the table)"),
            "iteration_ci95_s": st.column_config.NumberColumn("± (s)", format="%.4f",
                                                              help="the iteration's 95% interval"),
        },
    )
    run_notes(recent)


def run_notes(recent: pd.DataFrame) -> None:
    """Under the recent runs, a failed run's error and, for a run that did not complete, what its times are
    of: one phase's (R0: one worker), not the job's, as `stash runs` marks them."""
    for run, error, times in zip(recent["run_id"], recent["error"], recent["time_of"], strict=True):
        said = [f"{name}: {plain(text)}" for name, text in (("Error", error), ("Partial times", times))
                if text]  # fmt: skip
        if said:
            st.caption(f"Run **{plain(run)}** · " + " · ".join(said))


with page_guard():
    main()
