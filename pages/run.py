"""Run: start a profile in the background, follow it phase by phase, cancel it, see its breakdown.

The run is a `stash profile` subprocess whose state lives in files next to the database (engine/jobs.py),
so reloading the page, or opening it in another tab, finds it again (the job id is also in the URL). A
profile started from a terminal or from Python registers itself there too: it shows here as it progresses.
While a profile runs on this machine (registered or not), the form says so before starting a second one.
"""

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from pages._run_data import data_fields
from pages._run_model import model_field, number_field, target_field
from pages._shared import (
    STATUS_ICONS,
    chart_with_download,
    current_db,
    forget_cached_queries,
    load,
    page_guard,
    run_link,
    seconds_text,
    show_table,
)
from pages._stalls import breakdown_chart
from stash_core import views
from stash_core.cli.main import profile_refusal
from stash_core.engine import jobs
from stash_core.engine.job_state import JobState, PhaseProgress, measuring_processes
from stash_core.errors import UsageError
from stash_core.spec import default_of
from stash_core.spec_parse import MAX_NAME_CHARS
from stash_core.userfiles import folder_problem
from stash_core.views.common import STALL_LABELS, in_page_words, plain, processes_text
from stash_core.views.run_form import (
    FIRST_BATCH_SIZE,
    RUN_PAGE_WORDS,
    RunForm,
    carried_stalls,
    default_stalls,
)

POLL_S = 1.0
PLACES = {"local": "This machine", "hosts": "Remote hosts (SSH)", "cluster": "Emulated cluster"}


def busy_notice(running: list[JobState]) -> bool:
    """Say what already measures on this machine; True when starting another profile needs a confirmation."""
    if running:
        where = ", ".join(  # labels and command lines are data, not Markdown
            plain(job.label or job.job_id)
            + ("" if job.origin == "dashboard" else f" (started from {plain(job.started_from)})")
            for job in running
        )
        st.warning(
            f"A profile is running on this machine: {where}. Two profiles at once slow each other down and "
            "skew both; wait for it or cancel it.",
            icon=":material/hourglass_top:",
        )
        return True
    others = measuring_processes()
    if not others:
        return False
    shown = processes_text(others)
    st.warning(
        f"Another measurement is running on this machine ({shown}). A second profile now would slow both "
        "down and skew their figures.",
        icon=":material/hourglass_top:",
    )
    return not st.checkbox("Start anyway", key="run-start-anyway")


def profile_form(running: list[JobState]) -> None:
    with st.container(border=True):
        st.markdown("##### :material/tune: New profile")
        model, script = model_field()
        cols = st.columns(3)
        batch_size = number_field(
            cols[0], "Batch size (per worker)", "batch_size", FIRST_BATCH_SIZE, key="run-batch"
        )
        workers = number_field(
            cols[1],
            "Workers per machine",
            "workers_per_node",
            key="run-workers",
            help="GPUs per machine; on a CPU-only machine, worker processes",
        )
        nodes = number_field(cols[2], "Machines (nodes)", "nodes", key="run-nodes")
        data = data_fields()
        real = data["data_source"] != "none"
        # A key per setup: a choice of stalls stays while the setup stays (a keyed widget would keep its first
        # default); a new setup starts from the last choice, with what it can and cannot measure.
        setup, key = (workers, nodes, real), f"run-stalls-{min(workers, 2)}-{min(nodes, 2)}-{int(real)}"
        last = st.session_state.get("run-stalls-last")
        first = default_stalls(*setup) if last is None else carried_stalls(last[1], last[0], setup)
        stalls = st.pills(
            "Stalls to measure", list(STALL_LABELS), selection_mode="multi", default=first,
            format_func=STALL_LABELS.get, key=key, persist_state="session",
        )  # fmt: skip
        st.session_state["run-stalls-last"] = (setup, list(stalls or []))
        find_unused = workers > 1 and not script.get("use_script") and st.checkbox(
            "Find unused parameters every step", key="run-unused", persist_state="session",
            help="DDP's find_unused_parameters: for a model that uses some parameters on some steps only",
        )  # fmt: skip
        cols = st.columns(3) + st.columns(3)  # two rows: five fields in one were cut at 800 px
        input_shape = cols[0].text_input(
            "Input shape",
            placeholder="3,224,224",
            key="run-shape",
            persist_state="session",
            help="C,H,W for image models, a sequence length for token models; empty: the model's default",
        )
        iterations = cols[1].text_input(
            "Iterations per phase",
            value=default_of("iterations"),
            key="run-iterations",
            persist_state="session",
            help="'auto': until the 95% interval is within the target; or a number",
        )
        device = cols[2].selectbox("Device", ["auto", "cpu", "cuda"], key="run-device",
                                   persist_state="session")
        target_ci_pct = target_field(cols[3])
        max_phase_s = number_field(cols[4], "Time limit per phase (s)", "max_phase_s", key="run-maxs")
        cols = st.columns(2)
        instance = cols[0].text_input(
            "Instance label", max_chars=MAX_NAME_CHARS, placeholder="e.g. p3.8xlarge or my-laptop",
            key="run-instance", persist_state="session",
            help="Name runs after the instance type to compare instances and costs",
        )  # fmt: skip
        where = cols[1].radio("Where", list(PLACES), format_func=PLACES.get, horizontal=True, key="run-where",
                              persist_state="session")
        hosts = ssh_user = ssh_key = ""
        if where == "hosts":
            cols = st.columns(3)
            hosts = cols[0].text_input("Hosts", placeholder="gpu-a,gpu-b", key="run-hosts",
                                       persist_state="session")
            ssh_user = cols[1].text_input("SSH user", placeholder="ubuntu", key="run-ssh-user",
                                          persist_state="session")
            ssh_key = cols[2].text_input("SSH key file", placeholder="~/.ssh/id_ed25519", key="run-ssh-key",
                                         persist_state="session")
        elif where == "cluster":
            more = "" if nodes >= 2 else " It takes Machines (nodes) 2 or more: one alone is this machine."
            st.caption(
                f"Runs across the emulated cluster made with `sudo stash cluster up` (namespaces).{more}"
            )
        busy = busy_notice(running)
        start = st.button(
            "Start profile", type="primary", disabled=busy, icon=":material/play_arrow:", key="run-start"
        )
    if not start:  # a refusal moved here from under another job's view (below)
        if refused := st.session_state.pop("run-refused", None):
            st.error(plain(refused), icon=":material/error:")
        return
    form = RunForm(
        model=model or "",
        batch_size=batch_size,  # as typed (number_field): 2.5 is refused by the spec's rule, never cut to 2
        workers=workers,
        nodes=nodes,
        stalls=list(stalls or []),
        **data,
        input_shape=input_shape,
        find_unused_parameters=bool(find_unused),
        iterations=iterations.strip() or "auto",
        max_phase_s=max_phase_s,
        target_ci_pct=target_ci_pct,
        instance=instance,
        where=where,
        hosts=hosts,
        ssh_user=ssh_user,
        ssh_key=ssh_key,
        device=device,
        **script,
    )
    try:
        args = views.run_form.profile_args(form, base_dir=Path.cwd())
        if refused := profile_refusal(args, current_db()):  # said as the command's checks say it
            raise UsageError(in_page_words(refused, RUN_PAGE_WORDS))
    except UsageError as exc:  # said alone: not under the view of the job shown above, a failure of its own
        if st.query_params.get("job"):
            st.session_state["run-refused"], _ = str(exc), st.query_params.pop("job")
            st.rerun()
        st.error(plain(exc), icon=":material/error:")
        return
    what = f"script {Path(form.script).name}" if form.use_script else views.breakdown.short_model(form.model)
    batch = "" if form.use_script else f" · batch {form.batch_size}"
    label = f"{what}{batch} · {form.workers} worker(s)"
    job_id = jobs.start_profile_job(current_db(), args, label=label)
    st.query_params["job"] = job_id
    st.rerun()


def show_job(job_id: str) -> None:
    """The job's progress; polls itself every POLL_S seconds while the run is going."""
    state = jobs.read_job(current_db(), job_id)
    if state.finished:
        job_view(state)
    else:
        st.fragment(run_every=POLL_S)(live_job)(job_id)


def live_job(job_id: str) -> None:
    # a fragment's rerun runs this alone, outside the page's guard: a locked database was a traceback here
    with page_guard():
        state = jobs.read_job(current_db(), job_id)
        if state.finished:
            forget_cached_queries()
            st.rerun()  # the whole page: stop polling, show the breakdown, enable the form
        job_view(state)


HEADERS = {
    "starting": "Starting…",
    "running": "Running",
    "completed": "Finished",
    "failed": "Failed",
    "interrupted": "Interrupted",
    "cancelled": "Cancelled",
    "lost": "Ended unexpectedly",
}


def job_view(state: JobState) -> None:
    label = plain(state.label or "profile")  # the form's text, or a terminal's command line
    title = f"{HEADERS.get(state.status, state.status)} — {label} · job {plain(state.job_id)}"
    title += "" if state.origin == "dashboard" else f" · started from {state.started_from}"
    if state.finished and state.status != "cancelled":  # a user's cancel is no failure: no error badge
        # st.status marks a finished run; while it runs, the page polls (and st.status would show its
        # "running" spinner as done between polls), so a plain box shows the live state.
        badge = "complete" if state.status == "completed" else "error"
        box = st.status(title, state=badge, expanded=state.status != "completed")
    else:
        box = st.container(border=True)
        box.markdown(f"{STATUS_ICONS[state.status]} **{title}**")
    with box:
        if not state.phases:
            waiting = "Stopped before any run started." if state.finished else "Preparing the model and data…"
            st.caption(plain(in_page_words((state.messages or [waiting])[-1], RUN_PAGE_WORDS)))
        for phase in state.phases:
            st.progress(min(max(phase.fraction_done, 0.0), 1.0), text=phase_text(phase))
        for message in state.messages[-3:] if state.phases else []:
            st.caption(plain(in_page_words(message, RUN_PAGE_WORDS)))
    if not state.finished:
        st.progress(state.fraction_done, text=f"Overall {state.fraction_done:.0%}")
        if st.button("Cancel run", icon=":material/cancel:", key=f"cancel-{state.job_id}"):
            jobs.cancel_job(current_db(), state.job_id)
            st.rerun()
        return
    if state.run_id and not state.stored:  # measured, but the database could not take it
        missing = state.error or "The run is not in the database (--no-store)."
        st.error(plain(in_page_words(missing, RUN_PAGE_WORDS)), icon=":material/error:")
        if state.result_file:
            st.caption(f"It is kept in its result file {plain(state.result_file)}: `stash ingest` stores it.")
        return
    if state.status == "completed" and state.run_id:
        st.success(f"Run {plain(state.run_id)} finished and is stored.", icon=":material/check_circle:")
        mine = load(views.overview.run_breakdowns, [state.run_id])
        if mine.empty:
            run = load(views.breakdown.run_detail, state.run_id)
            if run is None:
                # a database deleted or replaced since: the result file holds the run
                kept = (
                    f"; if it stays away, its result file {plain(state.result_file)} holds it: `stash "
                    "ingest` stores it"
                ) if state.result_file else ""
                said = f"The run is not in the database yet - refresh in a moment{kept}."
                st.info(said, icon=":material/info:")
                return
        else:
            long_frame = views.breakdown.stall_long_frame(mine, "seconds")
            if not long_frame.empty:
                chart_with_download(
                    breakdown_chart(long_frame, "seconds"),
                    long_frame,
                    f"breakdown_{state.run_id}",
                    f"job-{state.job_id}",
                )
        warned = (load(views.breakdown.run_detail, state.run_id) or {}).get("warnings") or []
        if warned:  # what the breakdown's figures need beside them (a stall not resolved, other load)
            lines = "\n".join(f"- {plain(in_page_words(str(line), RUN_PAGE_WORDS))}" for line in warned)
            st.warning(f"{len(warned)} warning(s):\n{lines}", icon=":material/report:")
            if elsewhere := views.run_form.options_not_on_the_page([str(line) for line in warned]):
                st.caption(elsewhere)  # the page's own words (flags and a command in backticks), no file's
        run_link(state.run_id)
        return
    cancelled = state.status == "cancelled"  # a user's cancel is no failure
    said = plain(in_page_words(state.error, RUN_PAGE_WORDS)) if state.error else "The run failed."
    shown = "Cancelled, as asked." if cancelled else said
    (st.info if cancelled else st.error)(shown, icon=STATUS_ICONS.get(state.status, ":material/error:"))
    if state.run_id:
        st.caption(
            f"What was measured before it stopped is stored as run {plain(state.run_id)} "
            f"({plain(state.run_status)})."
        )
        run_link(state.run_id)
    output = state.stderr_tail or state.output_tail
    if output:
        with st.expander("Output of the run (last lines)", icon=":material/terminal:"):
            st.code("\n".join(output[-20:]), language=None)


def phase_text(phase: PhaseProgress) -> str:
    """One line per phase: state, name, what it runs, its launch, iterations (measured in all launches)."""
    kept, iterations = phase.earlier_kept + phase.kept, phase.earlier_iterations + phase.iterations
    if kept:
        detail = f"{kept} iterations measured, {max(iterations - kept, 0)} warm-up"
    else:
        detail = f"warming up ({iterations} iterations)" if iterations else "warming up"
    if phase.relative_ci is not None and phase.status == "running":
        detail += f" · ±{phase.relative_ci:.1%}"
    if phase.mean_s is not None:  # of the launch that ended last: the run's pooled figure is its breakdown's
        last = "last launch " if phase.launches > 1 else ""
        detail += f" · {last}{seconds_text(phase.mean_s, phase.ci95_s)}"
    if phase.error:
        detail += f" · {plain(phase.error)}"  # a worker's error is text, never markdown, a link or an image
    # "(1/3)" read as a round; R0 and R1 share a launch; a later round may relaunch fewer runs than the first
    launch = f" · launch {phase.index + 1} of {phase.total} in a round" if phase.index < phase.total else ""
    what = f"**{plain(phase.name)}** {plain(phase.description or '')}{launch}"
    return f"{STATUS_ICONS.get(phase.status, '')} {what} — {detail}"


def recent_jobs(jobs_list: list[JobState]) -> None:
    if not jobs_list:
        return
    st.subheader("Recent profiles")
    table = pd.DataFrame(
        [
            {
                "job": job.job_id,
                "status": job.status,
                "from": {"cli": "terminal", "python": "Python"}.get(job.origin, "dashboard"),
                "what": job.label,
                "started (UTC)": job.started_at.strftime("%Y-%m-%d %H:%M:%S") if job.started_at else "",
                "run": job.run_id or "",
                "problem": in_page_words(job.error or "", RUN_PAGE_WORDS)  # this page's job in its words
                if job.origin == "dashboard" else job.error or "",
            }
            for job in jobs_list
        ]
    )
    # a table per list of jobs: a selection is of a row, and a job started or ended moves the rows under it
    listed = hashlib.sha256(" ".join(table["job"]).encode()).hexdigest()[:12]
    picked = show_table(table, on_select="rerun", selection_mode="single-row", key=f"run-jobs-table-{listed}")
    rows = picked.selection.rows if picked is not None else []
    if rows:
        chosen = table.iloc[rows[0]]["job"]
        if st.query_params.get("job") != chosen:
            st.query_params["job"] = chosen
            st.rerun()
    st.caption(
        "Profiles started here, and those started from a terminal or from Python, on this database. "
        "Select a row to show that profile."
    )


def main() -> None:
    st.title("Run a profile")
    st.caption(
        "Launches `stash profile` in the background: R0 (one worker), R1 (all workers), R1n (across "
        "machines), R3 (real data, cached) and R2 (real data, cold) — each stall is the difference of two."
    )
    db = current_db()
    refused = folder_problem(jobs.jobs_dir(db))
    if refused:  # the jobs there are not this user's to show or end
        st.warning(plain(refused), icon=":material/lock:")
    jobs_list = jobs.list_jobs(db, limit=8)
    running = [job for job in jobs_list if not job.finished]
    wanted = st.query_params.get("job")
    if wanted and not any(job.job_id == wanted for job in jobs_list):
        try:
            jobs.read_job(db, wanted)
        except UsageError:
            st.warning(f"No profile job {plain(wanted)} next to this database.", icon=":material/search_off:")
            wanted = None
    if not wanted and running:
        wanted = running[0].job_id
        st.query_params["job"] = wanted  # kept once it ends: its result, not the form alone
    if wanted:
        show_job(wanted)
    profile_form(running)
    recent_jobs(jobs_list)


with page_guard():
    main()
