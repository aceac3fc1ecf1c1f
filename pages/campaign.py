"""Campaign: `stash campaign --cloud` from the dashboard. The plan first (per instance type the predicted time
and cost at the catalog's dated price, the total, a refusal above the budget, each SkyPilot task), then the
launch: the campaign in the background where SkyPilot is installed (or the same command for a terminal), and
the campaigns started here, each with its last lines and a Stop."""

import streamlit as st

from pages._catalog_refresh import catalog_refresh, refreshed_note
from pages._fields import CheckedNumbers
from pages._shared import current_db, load, page_guard, page_header, show_table, usd_text
from stash_core.errors import StashError
from stash_core.spec_parse import CAMPAIGN_BATCH_SIZE
from stash_core.views import campaign as view
from stash_core.views.campaign import CampaignPlan, CampaignRequest
from stash_core.views.common import in_page_words, plain

PRICINGS = {"on-demand": "On-demand", "spot": "Spot"}
INSTANCE_COLUMNS = {
    "where": "cloud/region",
    "usd_per_h": st.column_config.NumberColumn("USD/h", format="%.3f"),
    "runs": "profiles",
    "time_min": st.column_config.TextColumn(
        "time (min)", help="profiling + start-up (launch, set-up, copy back and teardown) = machine time"
    ),
    "basis": st.column_config.TextColumn(
        "estimate", help="the profiling time: 'step model' predicted, 'time cap' each run at its limit"
    ),
    "cost_usd": st.column_config.NumberColumn("cost (USD)", format="%.2f"),
    # the same figures as numbers: hidden, so that the table fits the page
    **{column: None for column in view.NUMBER_COLUMNS},
}
NOT_TESTED = (
    "Launching on a real cloud cannot be tested here: no test rents a machine. The tasks above are not "
    "checked by SkyPilot on this page (the command's --dry-run checks them where SkyPilot is installed). "
    "On a real account, run the command with --dry-run first, then launch one cheap instance type "
    "(docs/cloud.md)."
)


def request_key() -> str:
    """The last request is the database's: after a switch, it is not re-run against the other catalog."""
    return f"campaign-request:{current_db()}"


def request_form() -> CampaignRequest | None:
    """The campaign's options; the request is kept in the session when Plan is pressed."""
    catalog = load(view.gpu_instances)
    names = list(catalog["name"])
    numbers = CheckedNumbers()  # bounds checked on Plan, not in the browser (pages/_fields.py)
    with st.container(border=True):
        st.markdown("##### :material/cloud: Instance types and profiles")
        chosen = st.multiselect(
            "Instance types (the catalog's GPU instance types on AWS, GCP and Azure)",
            names,
            default=[name for name in view.DEFAULT_INSTANCES if name in names],
            key="campaign-instances",
            persist_state="session",
        )
        other = st.text_input(
            "Other instance types (comma list, optional)",
            key="campaign-other",
            persist_state="session",
            help="Instance types typed by name, e.g. ones added with `stash instances add`",
        )
        models = st.multiselect(
            "Models (zoo names)", view.zoo_models(), default=list(view.DEFAULT_MODELS), key="campaign-models",
            persist_state="session"
        )
        cols = [*st.columns(2), *st.columns(2)]  # four in a row cut the region's placeholder at 800 px
        batch_text = cols[0].text_input("Batch sizes per worker (comma list)", str(CAMPAIGN_BATCH_SIZE),
                                        key="campaign-batch", persist_state="session")  # fmt: skip
        pricing = cols[1].radio(
            "Price", list(PRICINGS), format_func=PRICINGS.get, horizontal=True, key="campaign-pricing",
            persist_state="session"
        )
        region = cols[2].text_input(
            "Region (optional)", placeholder="the price's region", key="campaign-region",
            persist_state="session",
            help="Where every instance type is launched; empty: its price's region, else the cloud's default",
        )  # fmt: skip
        budget = numbers.number(
            cols[3], "Budget (USD, optional)", 0.01, 1e7, None, step=1.0, format="%g",
            key="campaign-budget", persist_state="session",
            help="A plan that costs more at catalog prices is refused",
        )  # fmt: skip
        cols = st.columns(3)
        iterations = cols[0].text_input(
            "Iterations per phase", "auto", key="campaign-iterations", persist_state="session",
            help="'auto': each run is counted at its cap; a number: that many iterations",
        )  # fmt: skip
        parallel = numbers.number(cols[1], "Instance types at once", 1, 50, 1, key="campaign-parallel",
                                  persist_state="session")  # fmt: skip
        idle = numbers.number(
            cols[2], "Idle minutes before a cluster tears itself down", 1, 10_000, view.DEFAULT_IDLE_MINUTES,
            key="campaign-idle",
            persist_state="session",
        )  # fmt: skip
        pressed = st.button("Plan", type="primary", icon=":material/request_quote:", key="campaign-plan")
    if pressed and numbers.refused():  # an earlier plan is not this request's
        st.session_state.pop(request_key(), None)
        return None
    if pressed:
        try:
            request = CampaignRequest(
                instances=view.instance_names(chosen, other), models=tuple(models),
                batch_sizes=view.batch_sizes(batch_text), spot=pricing == "spot",
                region=region.strip() or None, budget_usd=None if budget is None else float(budget),
                iterations=iterations.strip() or "auto", parallel=int(parallel), idle_minutes=int(idle),
            )  # fmt: skip
            view.check_request(request)
        except StashError as exc:
            st.session_state.pop(request_key(), None)
            st.error(plain(in_page_words(str(exc), WORDS)), icon=":material/error:")
            return None
        st.session_state[request_key()] = request
    return st.session_state.get(request_key())


def plan_view(answer: CampaignPlan) -> None:
    pricing = "spot" if answer.spot else "on-demand"
    st.subheader("Plan")
    st.caption(
        f"{len(answer.instances)} instance type(s) at {pricing} prices from the catalog: what `stash "
        "campaign --cloud --dry-run` prints. Predicted, not measured."
    )
    show_table(answer.instances, column_config=INSTANCE_COLUMNS)
    cols = [*st.columns(2), *st.columns(2)]  # four in a row were cut ("40.5 …") in an 800 px window
    cols[0].metric("Machine time", f"{answer.machine_s / 60:,.1f} min")
    cols[1].metric("Cost at catalog prices", usd_text(view.cost_said_usd(answer.cost_usd)))
    at_once = f"{answer.parallel} instance type(s) at once"
    cols[2].metric(
        "Start to end", f"{answer.wall_s / 60:,.1f} min", at_once, delta_color="off", delta_arrow="off"
    )
    dates = sorted(answer.price_dates)  # the oldest shown whole: several dates were cut to "2022-01-01, …"
    # "2022-01-01 +1" was read as a typo; "Oldest price of" as a sentence cut short
    label = "Prices dated" if len(dates) < 2 else "Oldest price dated"
    later = f"{len(dates) - 1} later date(s)" if len(dates) > 1 else None
    cols[3].metric(label, dates[0] if dates else "-", later, delta_color="off", delta_arrow="off",
                   help=", ".join(dates) or None)
    st.markdown(answer.total_text)
    if answer.catalog_warnings:  # rows an older Stash seeded: a newer one may know their links or prices
        catalog_refresh(answer.catalog_warnings, "campaign")
    if answer.price_warning:  # as Recommend warns: this page is the one that spends money at them
        st.warning(answer.price_warning, icon=":material/sell:")
    if answer.refusal:
        st.error(answer.refusal, icon=":material/block:")
    for note in answer.notes:
        st.caption(f":material/info: {note}")
    st.caption(answer.assumptions)
    with st.expander("Where each price comes from", icon=":material/sell:"):
        show_table(answer.prices, wrap=True)
    if answer.tasks:
        st.markdown("**SkyPilot tasks** (instance type, region, spot or not, autostop, set-up, profiles)")
    for task in answer.tasks:
        label = f"SkyPilot task of {plain(task.instance)} (cluster {plain(task.cluster)})"  # a catalog name
        with st.expander(label, icon=":material/code:"):
            st.code(task.yaml, language="yaml", wrap_lines=True)  # its command read whole


def launch_view(answer: CampaignPlan, request: CampaignRequest) -> None:
    st.subheader("Launch")
    st.caption(NOT_TESTED)
    installed = view.skypilot_installed()
    if not installed:
        st.info(view.install_hint(), icon=":material/download:")
    elif answer.refusal:
        st.caption("Nothing launches above the budget.")
    elif not answer.tasks:
        st.caption("Nothing to launch: every configuration of this plan is stored.")
    command = view.command(current_db(), request)
    st.caption(
        "The same campaign from a terminal (run again, it resumes: stored configurations are skipped):"
    )
    st.code(command, language="bash", wrap_lines=True)  # read whole in a narrow window too
    pressed = st.button(
        "Launch", icon=":material/rocket_launch:", disabled=not installed or not answer.launchable,
        key="campaign-launch",
    )  # fmt: skip
    if pressed:
        try:
            job_id = view.launch(current_db(), request)
        except StashError as exc:
            st.error(plain(in_page_words(str(exc), WORDS)), icon=":material/error:")
        else:
            st.success(f"Started in the background (job {job_id}): its progress is below.",
                       icon=":material/check:")  # fmt: skip


def campaigns_view() -> None:
    """The campaigns started here: status and last lines of each, and a Stop for a running one."""
    started = view.campaign_jobs(current_db())
    if started.empty:
        return
    st.subheader("Campaigns started here")
    st.caption("Stop tears every cluster of the campaign down before it ends; reload the page to follow it.")
    for row in started.to_dict(orient="records"):
        title = f"{row['label']} · {row['status']}"
        with st.expander(title, expanded=bool(row["running"]), icon=":material/cloud:"):
            if row["error"]:
                st.error(row["error"], icon=":material/error:")
            st.code(row["log"] or "(no output yet)", language="text")
            key = f"campaign-stop-{row['job_id']}"
            if row["running"] and st.button("Stop", key=key, icon=":material/stop:"):
                view.stop(current_db(), row["job_id"])
                st.info("Stopping: the clusters are torn down first.", icon=":material/hourglass:")


def main() -> None:
    page_header(
        "Campaign",
        "Profile models on rented cloud instance types through SkyPilot: the plan, priced before anything "
        "starts (docs/cloud.md).",
    )
    request = request_form()
    refreshed_note("campaign")  # after the catalog's refresh: said once, above whatever the page shows next
    if request is not None:
        try:
            with st.spinner("Planning…"):
                answer = load(view.plan, request)
        except StashError as exc:  # not in the catalog, no spot price, a bad name: one line, no plan
            st.error(plain(in_page_words(str(exc), WORDS)), icon=":material/error:")
        else:
            plan_view(answer)
            launch_view(answer, request)
    campaigns_view()


# The command's options in this page's words.
WORDS = {
    "--iterations": "Iterations per phase",
    "--region": "Region",
    "--instances": "Instance types",
    "--batch-sizes": "Batch sizes per worker",
    "--budget-usd": "Budget",
    "--models": "Models",
    "(set one with `stash instances set`)": "(set one in the Recommend page's instance catalog, or import "
    "SkyPilot's prices with `stash instances import --skypilot`; or choose On-demand)",
    " (see `stash instances list`; add it with `stash instances add` or import SkyPilot's prices with "
    "`stash instances import --skypilot`)": " (add it in the Recommend page's instance catalog, or import "
    "SkyPilot's prices with `stash instances import --skypilot`)",
}

with page_guard(WORDS):
    main()
