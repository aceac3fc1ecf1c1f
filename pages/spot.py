"""Spot: the cheapest cluster of spot instances that trains to a target loss by a deadline (spotDNN), against
on-demand, with the window search, fragility and a simulation of revocations."""

import altair as alt
import pandas as pd
import streamlit as st

from pages._fields import CheckedNumbers
from pages._shared import (
    chart_with_download,
    current_db,
    load,
    page_guard,
    page_header,
    show_table,
    usd_text,
)
from pages._stalls import ink
from stash_core import views
from stash_core.errors import StashError
from stash_core.spot.simulate import DEFAULT_SEED, RISK_RUNS, below_plan
from stash_core.views.common import plain
from stash_core.views.spot import SpotAnswer

DEFAULT_QUOTA = 4
CANDIDATE_COLUMNS = {
    "iteration_s": st.column_config.NumberColumn("iteration (s)", format="%.4f"),
    "R": st.column_config.NumberColumn("R (eq. 5)", format="%.3f"),
    # thousands separated, as the cards above write them ("2,549 s"); short headers: long ones were cut
    "iterations": st.column_config.NumberColumn("iterations", format="%,.0f", help="to the target loss"),
    "training_s": st.column_config.NumberColumn("training (s)", format="%,.0f"),
    "usd_per_h": st.column_config.NumberColumn("$/h", format="%.2f"),
    "cost_usd": st.column_config.NumberColumn("cost ($)", format="%.4g"),  # a cent's share stays a figure
    "within_budget": "within deadline",
}


STALE_ANSWER = ("The form has changed since {action} was pressed: what follows answers the form as it was "
                "then. Press {action} to answer it as it is now.")


def request_key() -> str:
    """The last request is the database's: after a switch, it is not re-run against the other catalog."""
    return f"spot-request:{current_db()}"


def workload_source() -> str | None:
    """The workload's JSON text: the paper's public figures or an uploaded file (None: nothing yet)."""
    source = st.radio(
        "Workload",
        [views.spot.EXAMPLE_NAME, "Upload a workload file"],
        horizontal=True,
        key="spot-source",
        persist_state="session",
        help="The JSON file `stash spot` reads (written by `stash spot-profile`, `spot-fit-loss` and "
        "`spot-memory`); its fields are described in stash_core/spot/inputs.py.",
    )
    if source == views.spot.EXAMPLE_NAME:
        text = views.spot.example_workload_text()
        with st.expander("The example workload file", icon=":material/description:"):
            st.caption(
                "ResNet-110 from spotDNN's paper (Tables I, III, IV) and its public profile; g4 = 1 and g3 "
                "are not published and are chosen so that Table I's plan takes its 2,549 s."
            )
            st.code(text, language="json")
        return text
    # no type= filter: the browser's refusal was a red mark alone; reading the file says what is wrong
    upload = st.file_uploader("Workload file (JSON)", key="spot-upload")
    if upload is None:
        return None
    return views.spot.workload_text(upload.getvalue(), upload.name)


def offers_form(text: str, numbers: CheckedNumbers) -> tuple[tuple[str, int], ...]:
    """Instance types and their quotas, from the catalog's GPU instances."""
    catalog = load(views.spot.gpu_instances)
    names = list(catalog["name"])
    try:
        named = views.spot.workload_names(text)
        source = views.spot.compute_source_words(text)
    except StashError:
        named, source = [], None  # the plan below says what is wrong with the workload
    if source:  # else the only word was "choose at least one instance type", which none would fix
        st.info(plain(source), icon=":material/info:")
    given = [name for name in named if name in names]
    unknown = [name for name in named if name not in names]
    if unknown:  # else the only word was "choose at least one instance type with a quota of 1 or more"
        shown = ", ".join(plain(name) for name in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        st.warning(
            f"The workload's compute times name {len(unknown)} instance type(s) the catalog's GPU instances "
            f"do not have: {shown}. Add them in the Recommend page's instance catalog to plan with them.",
            icon=":material/warning:",
        )
    chosen = st.multiselect(
        "Instance types (from the catalog; GPUs and prices from there)",
        names,
        default=given,
        key="spot-instances",  # not kept across pages: its default is the workload's, which may change
    )
    quotas = dict(views.spot.EXAMPLE_OFFERS)
    offers = []
    columns = st.columns(max(1, min(len(chosen), 6)))
    for index, name in enumerate(chosen):
        quota = numbers.number(  # a catalog name, as text
            columns[index % len(columns)], f"Quota of {plain(name)}", 0, 10_000,
            quotas.get(name, DEFAULT_QUOTA),
            key=f"spot-quota-{name}",
            persist_state="session"
        )
        offers.append((name, int(quota)))
    return tuple(offers)


def request_form() -> dict | None:
    try:
        text = workload_source()
    except StashError as exc:
        st.error(plain(exc), icon=":material/error:")
        return None
    if text is None:
        st.info("Upload a workload file, or choose the paper's workload.", icon=":material/info:")
        return None
    numbers = CheckedNumbers()  # bounds checked on Plan, not in the browser (pages/_fields.py)
    offers = offers_form(text, numbers)
    target_default, deadline_default = views.spot.EXAMPLE_TARGET
    row = st.columns(4)
    target = numbers.number(row[0], "Target loss", 0.0001, 1e6, target_default, format="%g",
                            key="spot-target", persist_state="session")  # fmt: skip
    deadline = numbers.number(
        row[1], "Deadline (s)", 1.0, 365 * 86400.0, deadline_default, format="%g", key="spot-deadline",
        persist_state="session"
    )
    revocation = numbers.number(
        row[2], "Revocation overhead in the plan (s)", 0.0, 86400.0, 0.0, format="%g", key="spot-revocation",
        persist_state="session",
        help="Seconds added to the plan's training time for revocations (stash spot --revocation-s).",
    )  # fmt: skip
    pcie = numbers.number(row[3], "PCIe bandwidth (Gbit/s)", 0.1, 1e5, 80.0, format="%g", key="spot-pcie",
                          persist_state="session")  # fmt: skip
    asked = {"text": text, "offers": offers, "target_loss": float(target), "deadline_s": float(deadline),
             "revocation_s": float(revocation), "pcie_gbps": float(pcie)}  # fmt: skip
    if st.button("Plan", icon=":material/savings:", type="primary", key="spot-plan"):
        if numbers.refused():  # an earlier plan's answer is not this request's
            st.session_state.pop(request_key(), None)
            return None
        st.session_state[request_key()] = asked
    planned = st.session_state.get(request_key())
    if planned is not None and planned != asked:  # shown under a new workload without a word
        st.warning(STALE_ANSWER.format(action="Plan"), icon=":material/history:")
    return planned


def plan_box(answer: SpotAnswer, deadline_s: float) -> None:
    best = answer.spot.best
    st.caption(f"Worker counts searched: {answer.searched}; parameter server "
               f"{answer.ps_gbps:.3g} Gbit/s. Predicted by the spotDNN model, not measured.")  # fmt: skip
    for note in answer.notes:  # a type offered without a price of the plan's kind: left out of that plan
        st.caption(plain(f"Note: {note}"))
    if best is None:
        st.error(f"No spot plan: {plain(answer.spot.infeasible_reason)}", icon=":material/block:")
        return
    on_demand = answer.on_demand.best if answer.on_demand is not None else None
    with st.container(border=True):
        st.markdown(":material/savings: **Cheapest spot cluster**")
        st.markdown(f"### {plain(best.label())}")
        if answer.risk is not None:  # the headline states the plan's risk, not only its price
            why = below_plan(answer.risk, best.cost_usd)
            st.markdown(f"**Risk:** {answer.risk.text()}" + (f" ({why})." if why else "."))
        cols = [*st.columns(2), *st.columns(2)]  # four in a row cut the figures ("2,54…") at 800 px
        cols[0].metric("Training time", f"{best.training_s:,.0f} s", f"deadline {deadline_s:,.0f} s",
                       delta_color="off", delta_arrow="off")  # fmt: skip
        cols[1].metric("Cost (spot)", usd_text(best.cost_usd), f"${best.usd_per_h:.2f}/h", delta_color="off",
                       delta_arrow="off")  # fmt: skip
        if on_demand is not None:
            cols[2].metric("On-demand time", f"{on_demand.training_s:,.0f} s", help=plain(on_demand.label()))
            saving = 1 - best.cost_usd / on_demand.cost_usd if on_demand.cost_usd > 0 else 0.0
            cols[3].metric("Cost (on-demand)", usd_text(on_demand.cost_usd),
                           f"spot saves {saving:.0%} if never revoked", delta_color="off",
                           delta_arrow="off")  # fmt: skip
            cluster = plain(on_demand.label())
            st.caption(f"On-demand plan: {cluster}, the cheapest on-demand cluster within the deadline.")
        else:
            reason = answer.on_demand_reason or (
                answer.on_demand.infeasible_reason if answer.on_demand else ""
            )
            cols[2].metric("On-demand plan", "none")
            st.caption(f"No on-demand plan: {plain(reason)}")
    if answer.fragile:
        st.warning(
            f"Fragile plan: another cluster (or none) is chosen when "
            f"{views.spot.fragile_text(answer.fragile)}, a move of about the fit's own error. Refit the "
            "workload with more data before renting on it.",
            icon=":material/warning:",
        )


def window_view(answer: SpotAnswer, deadline_s: float) -> None:
    exact = answer.spot.search == "exact"
    st.subheader("Clusters searched" if exact else "Window search")
    if exact:  # every mix of counts was few enough to try: the plan is the cheapest, window or not
        st.caption("For each worker count n, every mix of instance counts within the quotas is evaluated; "
                   "the cheapest within the deadline wins.")  # fmt: skip
    else:
        st.caption("For each worker count n, windows of n adjacent instances (sorted by speed) are "
                   "evaluated; the cheapest window within the deadline wins (too many mixes of counts to try "
                   "them all: one that skips a type in the speed order is never tried).")  # fmt: skip
    show_table(
        answer.windows,
        column_config={
            "workers": "n",
            "windows": "clusters tried" if exact else "windows tried",
            "within_budget": "within deadline",
            "cheapest_usd": st.column_config.NumberColumn("cheapest ($)", format="%.4g"),
            "fastest_s": st.column_config.NumberColumn("fastest (s)", format="%,.0f"),
        },
    )
    points = answer.points
    if points.empty:
        return
    # in words, the chosen plan in its own colour: it was the palest point, under "Within deadline: true"
    chosen = answer.spot.best.label() if answer.spot.best is not None else None
    points = points.assign(kind=[
        "chosen" if cluster == chosen else "within the deadline" if inside else "past the deadline"
        for cluster, inside in zip(points["cluster"], points["within_budget"], strict=True)
    ])  # fmt: skip
    kinds = ["chosen", "within the deadline", "past the deadline"]
    chart = alt.layer(
        alt.Chart(points)
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("training_s:Q", title="Predicted training time (s)", scale=alt.Scale(zero=False)),
            y=alt.Y("cost_usd:Q", title="Cost (USD, spot)", scale=alt.Scale(zero=False)),
            color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="top"),
                            scale=alt.Scale(domain=kinds, range=["#E45756", "#4C78A8", "#bab0ac"])),
            size=alt.condition(alt.datum.kind == "chosen", alt.value(220), alt.value(80)),
            tooltip=[
                "cluster:N",
                "workers:Q",
                alt.Tooltip("training_s:Q", format=",.0f"),
                alt.Tooltip("cost_usd:Q", format=",.2f"),
            ],
        ),  # fmt: skip
        alt.Chart(pd.DataFrame({"deadline": [deadline_s]})).mark_rule(color="#E45756").encode(x="deadline:Q"),
    ).properties(height=320)
    chart_with_download(chart, points, "spot_windows", "spot-windows")


def simulation_view(request: dict) -> None:
    st.subheader("Revocations")
    st.caption("Monte Carlo: every spot instance is revoked at the rate below (Poisson); the cluster stops "
               "for the seconds lost and is re-planned with what is left. spotDNN against planning blind to "
               "contention (trained at the true speed) and against on-demand (never revoked).")  # fmt: skip
    numbers = CheckedNumbers()  # bounds checked on Simulate, not in the browser (pages/_fields.py)
    row = st.columns([2, 1, 1, 1])
    rate = row[0].slider("Revocations per spot instance per hour", 0.0, 5.0, 0.5, 0.1, key="spot-rate",
                         persist_state="session")
    lost = numbers.number(
        row[1], "Seconds lost per revocation", 0.0, 86400.0, 30.0, format="%g", key="spot-lost",
        persist_state="session"
    )
    # the command's defaults (spot-simulate, and the risk `stash spot` states): the same figures
    runs = numbers.number(row[2], "Runs", 1, views.spot.MAX_PAGE_RUNS, RISK_RUNS, key="spot-runs",
                          persist_state="session")  # fmt: skip
    seed = numbers.number(row[3], "Seed", 0, 2**31 - 1, DEFAULT_SEED, key="spot-seed",
                          persist_state="session")  # fmt: skip
    if not st.button("Simulate", icon=":material/casino:", key="spot-simulate") or numbers.refused():
        return
    with st.spinner("Simulating revocations…"):
        rows = load(views.spot.simulation, request["text"], request["offers"], request["target_loss"],
                    request["deadline_s"], float(rate), int(runs), float(lost),
                    request["pcie_gbps"], int(seed), request["revocation_s"])  # fmt: skip
    for note in rows.attrs.get("notes", []):
        st.info(plain(note), icon=":material/info:")
    # runs asked and trainings never finished: the notes above say so where fewer runs were made (the work
    # limit) or some never finish; twelve columns cut the headings in a 1280 px window
    said = ["runs_asked"] + ([] if rows["never_finishes"].any() else ["never_finishes"])
    show_table(
        rows.drop(columns=said).assign(p_deadline=rows["p_deadline"] * 100),  # in whole percent, as its CI
        column_config={
            "p_deadline": st.column_config.NumberColumn("met", format="%.0f%%", help="the share of runs that "
                                                        "met the deadline"),
            "p_deadline_range": st.column_config.TextColumn("95% CI", help="The 95% interval of the share of "
                                                            "runs that met the deadline (Wilson's interval)"),
            "never_finishes": st.column_config.NumberColumn("unfinished", help="runs whose training never "
                                                            "finishes (see the note above)"),
            "mean_time_s": st.column_config.NumberColumn("mean (s)", format="%,.0f", help="mean time"),
            "p90_time_s": st.column_config.NumberColumn("p90 (s)", format="%,.0f", help="90th percentile"),
            "mean_cost_usd": st.column_config.NumberColumn("cost ($)", format="%.4g", help="the mean cost"),
            "mean_cost_ci95_usd": st.column_config.NumberColumn(
                "± ($)", format="%.2g", help="the mean cost's 95% interval over the runs"
            ),
            "mean_revocations": st.column_config.NumberColumn("revocations", format="%.1f"),
        },
    )
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("mean_cost_usd:Q", title="Mean cost (USD)"),
            y=alt.Y("strategy:N", title=None),
            color=alt.Color("p_deadline:Q", title="P(deadline met)", scale=alt.Scale(domain=[0, 1])),
            tooltip=[
                "strategy:N",
                alt.Tooltip("p_deadline:Q", format=".0%"),
                alt.Tooltip("mean_cost_usd:Q", format=",.2f"),
            ],
        )  # fmt: skip
        .properties(height=160)
    )
    spread = rows.assign(low=rows["mean_cost_usd"] - rows["mean_cost_ci95_usd"],
                         high=rows["mean_cost_usd"] + rows["mean_cost_ci95_usd"])  # fmt: skip
    bars += alt.Chart(spread).mark_rule(color=ink()).encode(
        x="low:Q", x2="high:Q", y=alt.Y("strategy:N", title=None)
    )  # the mean cost's 95% interval, where runs were random (none for one run that is the whole answer)
    chart_with_download(bars, rows, "spot_simulation", "spot-sim")
    st.caption("A simulation with the spotDNN model, not a measurement.")


def main() -> None:
    page_header(
        "Spot",
        "The cheapest cluster of spot instances that trains to a target loss by a deadline (spotDNN model: "
        "asynchronous parameter-server training, contention and convergence), against on-demand.",
    )
    request = request_form()
    if request is None:
        return
    try:
        answer = load(views.spot.plan, request["text"], request["offers"], request["target_loss"],
                      request["deadline_s"], request["pcie_gbps"], request["revocation_s"])  # fmt: skip
    except StashError as exc:  # a bad workload, offer or target: say what, keep the page
        st.error(plain(exc), icon=":material/error:")
        return
    plan_box(answer, request["deadline_s"])
    if not answer.candidates.empty:
        st.subheader("Candidates")
        frame = answer.candidates
        # a cluster outside the loss model has blank time and cost: the column says why
        within = [
            "no: outside the loss model" if outside else ("yes" if inside else "no")
            for inside, outside in zip(frame["within_budget"], frame["outside_loss_model"], strict=True)
        ]
        show_table(frame.drop(columns="outside_loss_model").assign(within_budget=within),
                   column_config=CANDIDATE_COLUMNS)  # fmt: skip
    window_view(answer, request["deadline_s"])
    if answer.spot.best is not None:
        simulation_view(request)


with page_guard():
    main()
