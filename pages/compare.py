"""Compare instances: one job (model, batch per worker, input shape, data, workers, machines, device) across
instances - speed, cost, stalls; runs whose machine contradicts their instance label are marked, not
priced; catalog instances not measured are shown predicted, marked apart from the measured ones, in
PyTorch's default arithmetic, as the measured job trained."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from pages._figures import cost_text, samples_text
from pages._shared import (
    MISSING_TEXT,
    chart_with_download,
    download_buttons,
    load,
    number_text,
    page_guard,
    seconds_text,
    show_table,
    usd_text,
)
from pages._stalls import ink, stall_bars
from stash_core import views
from stash_core.views.common import plain, sentence
from stash_core.views.compare_spread import with_spread

NORMALISED = {
    "samples_per_s": ("Throughput", "samples/s", ",.1f"),
    "samples_per_s_per_gpu": ("Throughput per GPU", "samples/s per GPU", ",.1f"),
    "samples_per_usd": ("Samples per dollar", "samples per USD, on demand", ",.0f"),
}
SOURCE_COLOURS = alt.Scale(domain=["measured", "predicted"], range=["#4C78A8", "#F58518"])


def verdict(frame: pd.DataFrame) -> None:
    result = views.compare.compare_verdict(frame)
    if result["fastest"] is None:
        return
    left, right = st.columns(2)
    with left.container(border=True):
        st.markdown(":material/speed: **Fastest measured**")
        st.markdown(f"### {plain(result['fastest'])}")
        speed = f"{samples_text(result['fastest_samples_per_s'], result['fastest_spread'])} samples/s"
        if result.get("slowest") and result["slowest"] != result["runner_up"]:
            st.markdown(
                f"{speed} — **{result['lead_over_runner_up']:.2f}×** the throughput of the runner-up "
                f"({plain(result['runner_up'])}){_apart(result['runner_up_apart'])} and "
                f"**{result['speedup']:.2f}×** the slowest ({plain(result['slowest'])})"
                f"{_apart(result['slowest_apart'])}."
            )
        elif result.get("slowest"):
            st.markdown(
                f"{speed} — **{result['speedup']:.2f}×** the throughput of {plain(result['slowest'])}"
                f"{_apart(result['slowest_apart'])}."
            )
        elif result["contradicted"]:
            st.markdown(f"{speed} — the only configuration whose machine fits its label "
                        f"({result['contradicted']} set aside above).")  # fmt: skip
        else:
            st.markdown(f"{speed} — the only configuration so far.")
    with right.container(border=True):
        st.markdown(":material/savings: **Cheapest measured**")
        if result["cheapest"] is None:
            st.markdown("### –")
            if result["contradicted"]:
                st.markdown(
                    f"No measured configuration has a price: {result['contradicted']} run(s) have a label "
                    "their machine contradicts (set aside above), the others a label not in the "
                    "instance catalog. Confirm a label you trust, or label runs with a catalog name, to see "
                    "costs."
                )
            else:
                st.markdown(
                    "No measured configuration has a price: their instance labels are not in the instance "
                    "catalog (the `instances` table). Label runs with a catalog name (the Run page's "
                    "Instance label, `--instance`) to see costs."
                )
        else:
            st.markdown(f"### {plain(result['cheapest'])}")
            cost = cost_text(result["cheapest_usd_per_million_samples"], result["cheapest_spread"])
            text = f"{cost} per million samples (on demand)"
            if result.get("next_cheapest"):
                text += (
                    f" — **{result['saving']:.0%} cheaper** than the next ({plain(result['next_cheapest'])})."
                )
            st.markdown(text)


def _apart(apart: bool | None) -> str:
    """Said after a ratio of throughputs whose 95% intervals overlap: the ratio alone would rank them."""
    return ", not told apart: their 95% intervals overlap" if apart is False else ""


# One entry a row: two side by side would be cut ("predicte…") in a half-width chart.
SOURCE_LEGEND = alt.Legend(orient="top", columns=1)


LOG_SPREAD = 30  # largest over smallest value beyond which a bar chart's axis is logarithmic


# figures drawn with the iteration's spread (views.compare_spread): the time and cost charts'
SPREAD_COLUMNS = ("epoch_s", "s_per_million_samples", "usd_per_epoch", "usd_per_million_samples",
                  "samples_per_s", "samples_per_s_per_gpu", "samples_per_usd")  # fmt: skip


def bar(frame: pd.DataFrame, column: str, title: str, number_format: str, ascending: bool) -> alt.Chart:
    data = views.compare_spread.drawn_ends(frame.dropna(subset=[column]), column)
    order = list(data.sort_values(column, ascending=ascending)["configuration"])
    values = data[column][data[column] > 0]
    # a CPU machine's measured 40,000 s beside GPUs' few hundred left the GPUs' bars as slivers
    wide = len(values) > 1 and values.max() > LOG_SPREAD * values.min()
    # a log axis from below the smallest positive value: a zero (a machine of no price) would put 0 in its
    # domain, and no bar at all was drawn; clamped, a zero is a bar of no length
    scale = alt.Undefined
    if wide:
        domain = [float(values.min()) / 2, float(values.max()) * 1.5]
        scale = alt.Scale(type="log", domain=domain, clamp=True)
    y = alt.Y("configuration:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X(f"{column}:Q", title=f"{title}, log scale" if wide else title, scale=scale,
                    axis=alt.Axis(format=number_format)),  # fmt: skip
            color=alt.Color("source:N", scale=SOURCE_COLOURS, title=None, legend=SOURCE_LEGEND),
            opacity=alt.condition(alt.datum.source == "predicted", alt.value(0.55), alt.value(1.0)),
            tooltip=[
                alt.Tooltip("configuration:N"),
                alt.Tooltip(f"{column}:Q", title=title, format=number_format),
                alt.Tooltip("source:N"),
                alt.Tooltip("expected_error:Q", title="expected error (compute)", format=".0%"),
                alt.Tooltip("comm_error:Q", title="expected error (communication)", format=".0%"),
                alt.Tooltip("runs:Q"),
            ],
        )
    )
    if f"{column}_low" not in data:  # a figure drawn without its spread
        return bars.properties(height=alt.Step(34))
    # the iteration's spread: a measured row's 95% interval, a predicted row's stated error
    spread = alt.Chart(data).mark_rule(color=ink(), clip=True).encode(
        y=y, x=alt.X(f"{column}_low:Q", scale=scale), x2=f"{column}_high:Q",
        tooltip=[alt.Tooltip("configuration:N"), alt.Tooltip("spread:Q", title="±", format=".0%")],
    )  # fmt: skip
    return alt.layer(bars, spread).properties(height=alt.Step(34))


def main() -> None:
    st.title("Compare instances")
    st.caption(
        "The same job on different instances, side by side. Runs are the same job when model, batch size "
        "per worker, input shape, data (synthetic, real cached or cold, which data set), workers, machines "
        "and device all agree; runs of different jobs are never averaged or ranked together."
    )
    choices = load(views.compare.compare_choices)
    if choices.empty:
        st.info(
            "No completed runs to compare yet. Profile the same model and batch size on two instances, each "
            "named in the Run page's Instance label, or import the examples on the Overview.",
            icon=":material/info:",
        )
        st.page_link("pages/run.py", label="Go to the Run page", icon=":material/play_circle:")
        st.page_link("pages/overview.py", label="Go to the Overview", icon=":material/dashboard:")
        return
    # Each job is picked by what it is, not by its place in the list: the list's order follows the data, and
    # a run stored meanwhile moved another job under the chosen label.
    jobs = {
        json.dumps(job, sort_keys=True, default=str): (job, row)
        for job, row in ((views.compare.job_of(row), row) for row in choices.to_dict(orient="records"))
    }
    labels = {
        key: f"{views.compare.job_label({**job, 'model': views.breakdown.short_model(job['model'])})} — "
        f"{row['configurations']} instance(s), {row['runs']} run(s)"
        for key, (job, row) in jobs.items()
    }
    picked = st.selectbox("Job", list(labels), key="cmp-pick", persist_state="session",
                          format_func=labels.get)
    st.caption(plain(labels[picked]))  # whole: a narrow window cuts the picker's text
    if choices.attrs.get("jobs_stored", 0) > len(choices):
        st.caption(
            f"{len(choices):,} of {choices.attrs['jobs_stored']:,} jobs are listed: those run on the most "
            "instances first, then those with the most runs, then the most recently run."
        )
    job = jobs[picked][0]
    model, batch_size = job["model"], int(job["batch_size"])
    same = {column: job[column] for column in views.compare.JOB_COLUMNS[2:]}
    everything = load(views.compare.compare_with_predictions, model, batch_size, **same)
    measured = everything[everything["source"] == "measured"]
    if measured.empty:
        st.info("No completed run of this job.", icon=":material/info:")
        return
    for warning in everything.attrs.get("label_warnings") or []:
        st.warning(plain(sentence(warning)), icon=":material/report:")
    verdict(measured)
    frame = with_spread(predictions(everything, measured), SPREAD_COLUMNS)
    # a measured row's ± beside each derived figure; a predicted row's is in its Source (its stated error)
    spread = [None if source == "predicted" or s != s else s
              for s, source in zip(frame["spread"], frame["source"], strict=True)]  # fmt: skip

    st.subheader("Side by side")
    meanings = frame["meaning"] if "meaning" in frame else pd.Series("", index=frame.index)
    notes, said = views.compare.meaning_cells(meanings)
    table = pd.DataFrame(
        {
            "Configuration": frame["configuration"],
            "Source": views.recommend.marked_source(frame),
            "Runs": frame["runs"],
            "Iteration": [
                seconds_text(v, c)
                for v, c in zip(frame["iteration_s"], frame["iteration_ci95_s"], strict=True)
            ],
            "Epoch": [seconds_text(v, v * s if s is not None else None)
                      for v, s in zip(frame["epoch_s"], spread, strict=True)],  # fmt: skip
            "Samples/s": [samples_text(v, s) for v, s in zip(frame["samples_per_s"], spread, strict=True)],
            "Per GPU": [samples_text(v, s)
                        for v, s in zip(frame["samples_per_s_per_gpu"], spread, strict=True)],  # fmt: skip
            "USD/h": [usd_text(v) for v in frame["usd_per_h"]],
            "USD/epoch": [cost_text(v, s) for v, s in zip(frame["usd_per_epoch"], spread, strict=True)],
            "USD/1M samples": [cost_text(v, s) for v, s in
                               zip(frame["usd_per_million_samples"], spread, strict=True)],  # fmt: skip
            # what a predicted row's figures mean beyond its ±: an overhead-bound step ranks by the host
            "Note": notes,
        }
    )
    # a column with no figure in any row (no epoch for data made on the device) only narrows the others, as
    # Per GPU does where it repeats Samples/s in every row (one GPU a worker; the Normalised chart has it)
    blank = table.map(lambda cell: str(cell).strip() in ("", "–", MISSING_TEXT))
    empty = [name for name in ("Epoch", "USD/epoch", "Note") if blank[name].all()]
    empty += ["Per GPU"] if (blank["Per GPU"] | (table["Per GPU"] == table["Samples/s"])).all() else []
    shown = table.drop(columns=empty)
    px = {name: views.compare.SIDE_BY_SIDE[name]["width"] for name in shown}  # its own, else narrowed to fit
    own = {"fit": False, "row_height": views.table_fit.wrapped_row_px(shown, px)}
    show_table(shown, column_config=views.compare.SIDE_BY_SIDE,
               **(own if sum(px.values()) <= views.table_fit.TABLE_BUDGET_PX else {}))
    for name, words in said.items():  # what a predicted row's note means beyond its ±
        st.caption(f"Note *{plain(name)}*: {plain(words.split(': ', 1)[-1])}.")
    download_buttons(frame, f"compare_{views.breakdown.short_model(model)}_b{batch_size}", "cmp-table")

    left, right = st.columns(2)
    with left:
        has_epoch = frame["epoch_s"].notna().any()
        column, title = (
            ("epoch_s", "Time per epoch (s)")
            if has_epoch
            else ("s_per_million_samples", "Time per million samples (s)")
        )
        st.markdown(f"**{title}**")
        chart_with_download(
            bar(frame, column, title, ",.3r", True),  # three figures: an epoch of 17 ms is no "0.0"
            frame[["configuration", column, "runs"]],
            "time",
            "cmp-time",
        )
    with right:
        if frame["usd_per_million_samples"].notna().any():
            column, title = (
                ("usd_per_epoch", "Cost per epoch (USD)")
                if frame["usd_per_epoch"].notna().any()
                else ("usd_per_million_samples", "Cost per million samples (USD)")
            )
            st.markdown(f"**{title}**")
            chart_with_download(
                bar(frame, column, title, "$,.3r", True),
                frame[["configuration", column, "runs"]],
                "cost",
                "cmp-cost",
            )
        else:
            st.info(
                "Costs appear when the instance labels are in the instance catalog.", icon=":material/sell:"
            )

    st.subheader("Normalised")
    available = [k for k in NORMALISED if frame[k].notna().any()]
    view = st.segmented_control(
        "View",
        available,
        format_func=lambda k: NORMALISED[k][0],
        default=available[0] if available else None,
        key="cmp-norm",
        persist_state="session",
    )
    if view:
        title, unit, number_format = NORMALISED[view]
        st.markdown(f"**{title}** ({unit}) — longer is better")
        chart_with_download(
            bar(frame, view, f"{title} ({unit})", number_format, False),
            frame[["configuration", view, "runs"]],
            f"normalised_{view}",
            "cmp-norm-chart",
        )
    if "samples_per_s_per_gpu" not in available:
        st.caption("Per-GPU figures need GPU runs or a GPU count in the instance catalog.")

    st.subheader("Where the time goes")
    drawn = views.compare.stall_rows(frame)
    shares = views.compare.compare_stall_frame(drawn)
    if shares.empty:
        st.info("No stall shares for these runs.", icon=":material/info:")
    else:
        chart = stall_bars(
            shares.assign(value=shares["share"]),
            "configuration",
            "Configuration",
            "Share of the iteration",
            "",
            ".1%",
            nice=False,
        )
        st.caption(
            "Mean shares over each configuration's runs; each bar closes at 100% with **Not separated** "
            "(grey, dashed outline), the signed remainder of the iteration time that no named stall holds. "
            "Faded stalls were not resolved (their mean 95% interval is wider than their mean value)."
            + predicted_bars_caption(drawn, frame)
        )
        chart_with_download(chart, shares, "stall_shares", "cmp-shares")


def predicted_bars_caption(drawn: pd.DataFrame, shown: pd.DataFrame) -> str:
    """What the predicted bars are: their stalls predicted, not measured, and which of them are drawn."""
    drawn_count = int((drawn["source"] == "predicted").sum())
    if not drawn_count:
        return ""
    shown_count = int((shown["source"] == "predicted").sum())
    priced = drawn.loc[drawn["source"] == "predicted", "usd_per_million_samples"].notna().any()
    which = "the predicted ones"
    if shown_count > drawn_count:
        which = f"the {drawn_count} {'cheapest' if priced else 'fastest'} of the {shown_count} predicted"
    return (
        f" Bars marked *predicted* ({which}) hold the predicted compute, interconnect and network of the "
        "step, each share as uncertain as the row's ± in the table; CPU and disk stalls are not predicted."
    )


def predictions(everything: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The toggle for predicted instances and what was predicted; the rows to show."""
    predicted = everything[everything["source"] == "predicted"]
    show = st.toggle(
        "Also show catalog instances not measured (predicted)",
        value=True,
        key="cmp-predicted",
        persist_state="session",
        help="Predicted from the model's FLOPs and bytes and the instance's accelerator and links; "
        "± the step's expected error held out by source and by GPU, compute's and communication's added "
        '(`stash predict` lists the two apart; "unvalidated" where no figure was held out). A measurement '
        "always wins.",
    )
    note = everything.attrs.get("prediction_note")
    if show and note:
        st.caption(f"● measured: profiled on that instance. ◇ predicted (orange, faded): {plain(note)}.")
        if len(predicted):
            best = predicted.sort_values("samples_per_s", ascending=False).iloc[0]
            speed = number_text(best["samples_per_s"])
            ties = views.compare_spread.not_told_apart(predicted, "samples_per_s", True)
            st.caption(f"Fastest predicted: {plain(best['configuration'])} at {speed} samples/s{ties}.")
            priced = predicted.dropna(subset=["usd_per_million_samples"])
            if len(priced):
                cheapest = priced.sort_values("usd_per_million_samples").iloc[0]
                cost = usd_text(cheapest["usd_per_million_samples"])
                ties = views.compare_spread.not_told_apart(priced, "usd_per_million_samples", False)
                st.caption(f"Cheapest predicted: {plain(cheapest['configuration'])} at {cost} per million "
                           f"samples (on demand){ties}.")  # fmt: skip
            precision(
                everything.attrs.get("precision_note"), everything.attrs.get("profiles_set_aside") or []
            )
        not_predicted(everything.attrs.get("not_predictable") or [])
    return everything if show else measured


def precision(note: str | None, set_aside: list[str]) -> None:
    """Which precision the predictions are for and why (PyTorch's default, as the measured job trained), and
    each stored profile of the job they set aside (a machine that contradicts its label)."""
    if note:
        st.caption(f":material/memory: {plain(note[:1].upper() + note[1:])}.")
    for line in set_aside:
        st.caption(f":material/filter_alt_off: {plain(line[:1].upper() + line[1:])}.")


def not_predicted(reasons: list[str]) -> None:
    """Catalog instances without a prediction say so, counted by reason, with each one's reason below."""
    if not reasons:
        return
    summary = views.recommend.not_predicted_summary(reasons)
    st.warning(
        f"{len(reasons)} catalog instance(s) not predicted: {plain(summary)}. Each one's reason is listed "
        "below.",
        icon=":material/report:",
    )
    with st.expander(f"Not predicted ({len(reasons)})", icon=":material/help:"):
        for line in reasons:
            st.markdown(f"- {plain(line)}")


with page_guard():
    main()
