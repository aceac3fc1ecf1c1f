"""Stalls on every page: the stacked bar, the one-run table and the table of runs, named stalls and the
signed remainder, closing at the iteration time.

The long frames come from stash_core.views.stall_frames: each part has `bar_start` and `bar_end`, and the
last part of a run (the remainder, "Not separated", when there is one) ends at its total. The remainder is
drawn grey, lighter and with a dashed outline; a negative one runs backwards over the named stalls, from
where they end back to the iteration time. Stalls that were not resolved (within the noise, or an interval
wider than the value) are drawn faded.
"""

import altair as alt
import pandas as pd
import streamlit as st

from pages._shared import MEASURES, download_buttons, seconds_text, share_text, show_table
from stash_core.analysis.advice import resolve_hint
from stash_core.analysis.epochs import per_epoch
from stash_core.analysis.stalls import stall_fault
from stash_core.units import finite_float
from stash_core.views.common import STALL_COLORS, STALL_LABELS
from stash_core.views.stall_frames import (
    PART_LABELS,
    REMAINDER,
    REMAINDER_COLOR,
    REMAINDER_LABEL,
    stall_detail_rows,
    stall_download_frame,
)

CAPTION = (
    "Bars are laid end to end and close at the realistic iteration time: the named stalls plus "
    "**Not separated** (grey, dashed outline) make up the whole iteration. Not separated is the signed "
    "remainder: differences within the noise that are shown as 0, and time that could not be split into "
    "one stall. When it is negative (the named stalls add up to more than the iteration, because some "
    "differences within the noise were slightly negative) its bar runs backwards over the named stalls, and "
    "its left end is the iteration time. A negative stall (the later run faster beyond the noise) is drawn "
    "the same way, after the others, running back from where they end. "
    "Faded stalls were not resolved: their 95% interval is wider than their value (more iterations or a "
    "quieter machine would resolve them). The thin lines across the bars are the 95% intervals."
)


def part_scale() -> alt.Scale:
    """The stall colours of every chart, plus grey for the remainder."""
    return alt.Scale(
        domain=[*(STALL_LABELS[s] for s in STALL_COLORS), REMAINDER_LABEL],
        range=[*STALL_COLORS.values(), REMAINDER_COLOR],
    )


def breakdown_chart(long_frame: pd.DataFrame, measure: str) -> alt.LayerChart:
    """Horizontal stacked bars, one per run (run_label), with a 95% interval at the end of each part."""
    title, unit, number_format = MEASURES[measure]
    return stall_bars(long_frame, "run_label", "Run", title, unit, number_format, nice=measure != "share")


LIGHT_INK = "#31333f"  # Streamlit's text colour on its light theme
DARK_INK = "#fafafa"  # and on its dark theme


def ink() -> str:
    """The colour of names, outlines and intervals drawn on a chart: the reader's theme's text colour."""
    # a theme set in the server's configuration is the page's; st.context then still says the browser's
    theme = st.get_option("theme.base") or st.context.theme.type
    return DARK_INK if theme == "dark" else LIGHT_INK


# The lines a stall chart draws: a part's 95% interval; a bar's whole-iteration spread (measured or stated)
SPREADS = (("error_low", "error_high"), ("step_low", "step_high"))
BAR_PX = 20  # a bar's height; its name is written in the 22 px above it
ERROR_REACH = 1.5  # how far past the bars (their longest, their most negative) an interval is drawn


def stall_bars(
    long_frame: pd.DataFrame,
    row_field: str,
    row_title: str,
    title: str,
    unit: str,
    number_format: str,
    nice: bool = True,
) -> alt.LayerChart:
    """Stacked bars from a long frame with bar_start, bar_end, value, stall_label, status, resolved, note;
    one bar per `row_field`; error bars where the frame has error_low and error_high."""
    order = list(dict.fromkeys(long_frame[row_field]))
    # Each bar's name is written above it, not beside it: names beside the bars took half of an 800 px page
    # column, and the legend, laid over the bars' width, was cut ("Inter…", "Disk…").
    y = alt.Y(f"{row_field}:N", sort=order, title=None, axis=None)
    # the domain holds every bar and every error bar's end (a rule's own extent was left off the scale), an
    # interval reaching past half the bars' length again cut at the edge: one run's ± 190% squeezed every
    # bar of the Overview into a third of its width
    drawn = ("bar_start", "bar_end", *(column for pair in SPREADS for column in pair))
    ends = [long_frame[column] for column in drawn if column in long_frame]
    values = pd.concat(ends).dropna() if ends else pd.Series(dtype=float)
    domain = [min(0.0, float(values.min())), float(values.max())] if len(values) else None
    bars = pd.concat([long_frame["bar_start"], long_frame["bar_end"]]).dropna()
    if domain and len(bars) and float(bars.max()) > 0:
        low, high = ERROR_REACH * float(bars.min()), ERROR_REACH * float(bars.max())
        domain = [max(domain[0], low), min(domain[1], high)]
    scale = alt.Scale(nice=nice, domain=domain) if domain and domain[1] > domain[0] else alt.Scale(nice=nice)
    x = alt.X("bar_start:Q", title=title, axis=alt.Axis(format=number_format), scale=scale)
    # Six entries do not fit one row of a page column: in rows of three none is cut ("Not se…").
    legend = alt.Legend(orient="top", columns=3)
    color = alt.Color("stall_label:N", scale=part_scale(), title="Stall", legend=legend)
    tooltip = [
        alt.Tooltip(f"{row_field}:N", title=row_title),
        alt.Tooltip("stall_label:N", title="Stall"),
        alt.Tooltip("value:Q", title=title, format=number_format),
    ]
    if "ci95" in long_frame.columns:
        tooltip.append(alt.Tooltip("ci95:Q", title=f"± 95% interval {unit}".strip(), format=number_format))
    if "seconds" in long_frame.columns:
        tooltip.append(alt.Tooltip("seconds:Q", title="Seconds per iteration", format=".4f"))
    tooltip += [alt.Tooltip("status:N", title="Status"), alt.Tooltip("note:N", title="Note")]
    base = alt.Chart(long_frame)
    named = (
        base.transform_filter(f"datum.stall !== '{REMAINDER}' && datum.value >= 0")
        .mark_bar(height=BAR_PX)
        .encode(
            x=x,
            x2=alt.X2("bar_end"),
            y=y,
            color=color,
            opacity=alt.condition("datum.resolved === false", alt.value(0.4), alt.value(1.0)),
            tooltip=tooltip,
        )
    )
    # the remainder, and a negative stall, which runs backwards as a negative remainder does: see-through
    # with a dashed outline, so the stall it runs back over still shows
    remainder = (
        base.transform_filter(f"datum.stall === '{REMAINDER}' || datum.value < 0")
        .mark_bar(height=BAR_PX, fillOpacity=0.55, stroke=ink(), strokeDash=[4, 3], strokeWidth=1)
        .encode(x=x, x2=alt.X2("bar_end"), y=y, color=color, tooltip=tooltip)
    )
    names = (
        alt.Chart(pd.DataFrame({row_field: order}))
        .mark_text(align="left", baseline="bottom", dy=-BAR_PX / 2 - 1, fontSize=11, color=ink())
        .encode(x=alt.value(0), y=y, text=f"{row_field}:N",
                tooltip=alt.Tooltip(f"{row_field}:N", title=row_title))
    )
    layers = [named, remainder, names]
    note = alt.Tooltip("said:N", title="Note")
    ci95 = alt.Tooltip("ci95:Q", title="± 95% interval", format=number_format)
    half = [ci95] if "ci95" in long_frame else []
    said = {  # a cut part's interval: its stall and half-width; a cut bar's spread: its configuration and end
        "error_low": [alt.Tooltip("stall_label:N", title="Stall"), note, *half],
        "step_low": [alt.Tooltip(f"{row_field}:N", title=row_title), note,
                     alt.Tooltip("step_high:Q", title="Spread's end", format=number_format)],
    }  # fmt: skip
    edge = domain[1] if domain else None
    for low, high in SPREADS:
        if {low, high} <= set(long_frame.columns):
            layers += _spread_layers(long_frame, low, high, scale, y, edge, said[low])
    # A fixed pixel height is not honoured by Streamlit for charts with a top legend; a step per bar is:
    # the bar, and its name above it.
    return alt.layer(*layers).properties(height=alt.Step(BAR_PX + 22))


def _spread_layers(long_frame: pd.DataFrame, low: str, high: str, scale: alt.Scale, y: alt.Y,
                   edge: float | None, said: list[alt.Tooltip]) -> list[alt.Chart]:  # fmt: skip
    """Lines from `low` to `high` where the frame has them, and a mark at the chart's edge where one is cut
    there, `said` in its tooltip."""
    layers = [
        alt.Chart(long_frame).transform_filter(f"isValid(datum.{low})")
        .mark_rule(color=ink(), strokeWidth=1.5, clip=True)
        .encode(x=alt.X(f"{low}:Q", scale=scale), x2=alt.X2(high), y=y)
    ]  # fmt: skip
    cut = long_frame[long_frame[high] > edge] if edge is not None else long_frame.iloc[0:0]
    if len(cut):
        marks = cut.assign(edge=edge, said="its interval runs past the chart's edge")
        layers.append(
            alt.Chart(marks)
            .mark_point(shape="triangle-right", filled=True, size=70, color=ink())
            .encode(x=alt.X("edge:Q", scale=scale), y=y, tooltip=said)
        )
    return layers


TABLE_CAPTION = (
    "The per-iteration figures add up to the iteration time and the shares to 100%. *Not separated* is the "
    "signed remainder: the iteration time minus the named stalls (differences within the noise, reported "
    "as 0, and time of runs that could not be split into one stall), with its 95% interval. *Not resolved*: "
    "the stall's 95% interval is wider than its value, so it may be zero. *not measured*: not asked for or "
    "not applicable. *not separable*: e.g. the data set does not fit in memory."
)

NOTE_LINE_CHARS = 60  # about what one line of the Note column holds


def epoch_text(row: dict, iterations_per_epoch) -> str:
    """The stall per epoch with its interval: the per-iteration half-width x the iterations of an epoch."""
    ci_s = per_epoch(finite_float(row.get("ci95_s")), finite_float(iterations_per_epoch))
    return seconds_text(row.get("epoch_s"), ci_s)


def epoch_cell(row: dict, iterations_per_epoch) -> str:
    """The Per epoch cell: as the Per iteration one says it where nothing is left over ("0 s", not
    "0 µs ± 0 µs"); a stall at 0 is 0 an epoch too, as its share."""
    if row.get("seconds") is None or _fault(row):
        return "–"
    if row.get("stall") == REMAINDER and row.get("status") == "none":
        return stall_figure(row)
    return epoch_text(row, iterations_per_epoch)


def stall_table(run: dict) -> None:
    """One run's stalls and remainder: figure with interval (or "not resolved"), share, per epoch, notes."""
    details = stall_detail_rows(run)
    rows = [
        {
            "Stall": row["label"],
            "Per iteration": stall_figure(row),
            "Share": "–" if _fault(row) else share_text(row.get("share")),
            "Per epoch": epoch_cell(row, run.get("iterations_per_epoch")),
            "Status": status_text(row),
            "Note": stall_note(row),
        }
        for row in details
    ]
    if not rows:
        st.info("No stall figures for this run.", icon=":material/info:")
        return
    # Notes are sentences: the widest column, wrapped over taller rows when one would not fit on a line.
    long_note = max(len(row["Note"]) for row in rows) > NOTE_LINE_CHARS
    show_table(
        pd.DataFrame(rows), wrap=long_note, column_config={"Note": st.column_config.TextColumn(width="large")}
    )
    download_buttons(stall_download_frame(run), f"stalls_{run['run_id']}", "bd-stalls")
    st.caption(table_caption(details, run.get("warnings")))


def stall_figure(row: dict) -> str:
    """Seconds ± interval; for a stall not resolved, that it was not, instead of a figure like 0 ± 3 s."""
    seconds, ci = row.get("seconds"), row.get("ci95_s")
    if _fault(row):
        return "not valid"
    if row.get("stall") == REMAINDER and row.get("status") == "none":
        return "0 s"  # the named stalls add up to the iteration time
    if row.get("stall") == REMAINDER or row.get("resolved") is not False:
        return seconds_text(seconds, ci)
    spread = f" (± {seconds_text(ci)})" if ci is not None else ""
    if row.get("status") == "clamped_zero" and not seconds:
        return f"not resolved: within the noise{spread}"
    return f"{seconds_text(seconds)}, not resolved{spread}"


def status_text(row: dict) -> str:
    if row.get("stall") == REMAINDER and row.get("status") == "none":
        return "nothing left over"
    if _fault(row):
        return "not valid"
    if row.get("stall") != REMAINDER and row.get("resolved") is False:
        return "not resolved"
    return (row.get("status") or "").replace("_", " ")


def stall_note(row: dict) -> str:
    note = row.get("note") or ""
    if fault := _fault(row):
        return f"stored data: the {row['label']} stall {fault}; its time is in {REMAINDER_LABEL}"
    return note


def table_caption(rows: list[dict], warnings: list | None = None) -> str:
    """The caption under a one-run table; how to resolve stalls is said once there, not in every row (a
    script that ran out of steps is told so by its warnings: analysis/advice.py)."""
    if any(row.get("stall") != REMAINDER and row.get("resolved") is False for row in rows):
        return f"{TABLE_CAPTION} To resolve the stalls not resolved: {resolve_hint(warnings)}."
    return TABLE_CAPTION


def _fault(row: dict) -> str | None:
    """What makes a named stall's stored figure no figure (no value, or below 0 unless 'negative')."""
    return None if row.get("stall") == REMAINDER else stall_fault(row)


FIGURES_HELP = (
    "impossible: the breakdown cannot be (a stall beyond the whole iteration, more workers faster than "
    "fewer); not comparable: the runs did different work per process. The run's page says why."
)

# Headings of the table of runs, short enough for every part to fit beside the run.
SHORT_LABELS = {"cpu": "CPU", "disk": "Disk", "unattributed": "Not separated"}


def runs_table(table: pd.DataFrame, measure: str) -> tuple[pd.DataFrame, dict]:
    """The table of runs as the page shows it: each run's iteration time and its parts in the chosen
    measure (stalls never measured in these runs left out), so that it fits the page; figures rounded to
    what they resolve."""
    suffix, unit = {"seconds": ("_s", "s"), "epoch_s": ("_epoch_s", "s"), "share": ("_share", "%")}[measure]
    shown = pd.DataFrame({"run": table["run_label"]})
    shown["iteration"] = [seconds_text(v, c) for v, c in zip(table["iteration_s"], table["iteration_ci95_s"],
                                                                strict=True)]  # fmt: skip
    # a run whose breakdown cannot be read as stalls ends its label with "impossible" (FIGURES_HELP says why)
    config: dict = {"run": st.column_config.TextColumn("run", pinned=True, help=FIGURES_HELP)}
    for part in (*STALL_LABELS, "unattributed"):
        column = f"{part}{suffix}"
        if column not in table.columns and measure == "epoch_s" and f"{part}_s" in table.columns:
            table = table.assign(**{column: table[f"{part}_s"] * table["epoch_s"] / table["iteration_s"]})
        if column not in table.columns or table[column].isna().all():
            continue
        label = f"{SHORT_LABELS.get(part, PART_LABELS.get(part, part))}"
        # with its spread, as the iteration's: a bare 0.0123 read as sure as the iteration beside it
        spread = table.get(f"{part}_ci95_s", pd.Series(float("nan"), index=table.index))
        if measure == "share":
            shown[column] = [share_text(v) + (f" ± {share_text(c / t)}" if c == c and t else "") for v, c, t
                             in zip(table[column], spread, table["iteration_s"], strict=True)]  # fmt: skip
        else:
            per = table["epoch_s"] / table["iteration_s"] if measure == "epoch_s" else 1.0
            shown[column] = [seconds_text(v, c) for v, c in zip(table[column], spread * per, strict=True)]
        config[column] = st.column_config.TextColumn(label)
    if table["not_resolved"].astype(bool).any():  # a figure of 0.0000 may be a stall within the noise
        shown["not_resolved"] = table["not_resolved"]
        config["not_resolved"] = st.column_config.TextColumn(
            "Not resolved", help="stalls whose figure may be 0: within the noise, or its interval wider"
        )
    return shown, config
