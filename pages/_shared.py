"""What every dashboard page shares: the database setting, cached queries, readable errors, downloads.

Not a page itself (the leading underscore keeps it out of the navigation). Pages only read, render and call
stash_core; every read of the database goes through `load(views.<page>.<function>, ...)`, which caches results
(never connections) keyed on the database file's modification, so a run that finishes shows up on the next
rerun and no connection stays open.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import runpy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import altair as alt
import pandas as pd
import streamlit as st

from stash_core import containment, units, views
from stash_core.errors import NewerThanStash, StashError, UsageError
from stash_core.exits import corruption_line, is_database_corruption
from stash_core.pathargs import default_db_text
from stash_core.units import finite_float, share_at_an_end, usd_words
from stash_core.views import code_age
from stash_core.views.common import in_page_words, plain

P = ParamSpec("P")
R = TypeVar("R")
LOG = logging.getLogger("stash.dashboard")
# A user's model code runs in a new interpreter, never in the server every user shares.
containment.enable_fresh_process()

DB_SETTING_KEY = "stash_db_setting"
# The field's text kept apart from the widget: Streamlit drops a widget's state when st.switch_page leaves
# the run that drew it (the Overview's first profile opened the Run page on the default database).
KEPT_DB_TEXT_KEY = "stash_db_text"
CACHE_TTL_S = 20  # short: the signature catches changes; the TTL bounds memory of stale entries
STATUS_ICONS = {
    "completed": ":material/check_circle:",
    "failed": ":material/error:",
    "interrupted": ":material/pause_circle:",
    "cancelled": ":material/cancel:",
    "running": ":material/progress_activity:",
    "starting": ":material/hourglass_top:",
    "lost": ":material/help:",
    "skipped": ":material/skip_next:",
}


# ---------------------------------------------------------------------------------------------------------
# The database setting


# Why $STASH_DB could not be the default; shown while the field is empty.
BAD_DEFAULT_KEY = "stash_bad_default_db"


def database_setting() -> Path | None:
    """The sidebar field choosing the database file; returns the resolved path (None when the text is bad)."""
    if DB_SETTING_KEY not in st.session_state and KEPT_DB_TEXT_KEY in st.session_state:
        st.session_state[DB_SETTING_KEY] = st.session_state[KEPT_DB_TEXT_KEY]
    if DB_SETTING_KEY not in st.session_state and st.query_params.get("db"):  # a reload or a copied link
        st.session_state[DB_SETTING_KEY] = st.query_params["db"]
    if DB_SETTING_KEY not in st.session_state:
        try:
            st.session_state[DB_SETTING_KEY] = default_db_text()
        except UsageError as exc:  # a STASH_DB of spaces or control characters: said, and the field empty
            st.session_state[DB_SETTING_KEY] = ""
            st.session_state[BAD_DEFAULT_KEY] = str(exc)
    with st.sidebar:
        st.text_input(
            "Database file",
            key=DB_SETTING_KEY,
            help="The DuckDB file with your results. Default: $STASH_DB, else results.duckdb in the folder "
            "the dashboard was started from. A file that does not exist yet is created by the first run.",
        )
        st.session_state[KEPT_DB_TEXT_KEY] = st.session_state[DB_SETTING_KEY]
        bad_default = st.session_state.get(BAD_DEFAULT_KEY)
        if bad_default and not st.session_state[DB_SETTING_KEY].strip():
            st.error(plain(bad_default), icon=":material/error:")
            return None
        try:
            path = views.common.resolve_db_path(st.session_state[DB_SETTING_KEY])
        except UsageError as exc:
            st.error(plain(exc), icon=":material/error:")
            return None
        if path.exists():
            st.caption(f":material/database: {plain(path.name)} · {units.size_words(path.stat().st_size)}")
        elif why := views.common.uncreatable_because(path):  # a file in its path, or a folder not ours
            st.warning(f"{plain(path)} cannot be created: {plain(why)}")
        else:  # the first write makes it, and any folder it lacks
            st.caption(f":material/database: {plain(views.common.new_database_words(path))}")
    st.session_state["stash_db_path"] = str(path)
    _keep_in_address(st.session_state[DB_SETTING_KEY])
    return path


def _keep_in_address(text: str) -> None:
    """The chosen database in the page's address (?db=), so that a reload, a new tab or a copied link opens
    the same one; none there for the default."""
    try:
        default = default_db_text()
    except UsageError:
        default = None
    if text == default:
        if "db" in st.query_params:
            del st.query_params["db"]
    elif st.query_params.get("db") != text:
        st.query_params["db"] = text


def current_db() -> Path:
    """The database the sidebar chose (falls back to the default when a page runs on its own)."""
    text = st.session_state.get("stash_db_path")
    return Path(text) if text else views.common.resolve_db_path(None)


# ---------------------------------------------------------------------------------------------------------
# Cached queries


def load(function: Callable[Concatenate[Path, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
    """function(current database, *args, **kwargs) for a stash_core.views function, cached until the database
    file changes: `load(views.compare.compare_configurations, model, batch_size)`."""
    db = current_db()
    return _cached_call(
        f"{function.__module__}.{function.__qualname__}",
        views.common.db_signature(db),
        args,
        tuple(sorted(kwargs.items())),
        _function=function,
        _db=db,
    )


@st.cache_data(ttl=CACHE_TTL_S, max_entries=256, show_spinner=False)
def _cached_call(
    function_name: str,
    db_signature: tuple,
    args: tuple,
    kwargs: tuple,
    _function: Callable[..., Any],
    _db: Path,
) -> Any:
    """The cache behind load(): keyed on the function's module and qualified name, the database file's
    signature and the arguments (the function and the path themselves are not hashed)."""
    return _function(_db, *args, **dict(kwargs))


def forget_cached_queries() -> None:
    """Drop everything load() remembers (after this session wrote to the database)."""
    _cached_call.clear()


# ---------------------------------------------------------------------------------------------------------
# Errors


def _run_through_the_frame() -> None:
    """Run app.py instead of this page when Streamlit ran the page file on its own.

    Until app.py has called st.navigation once, a freshly started server treats pages/ as an old-style
    multipage folder: opening (or reloading) a page's URL first would run that page without the frame (no
    navigation, no database setting). Then app.py runs here, which takes over the navigation for good.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        runpy.run_path(str(repo_root() / "app.py"), run_name="__main__")
        st.stop()


@contextmanager
def page_guard(words: dict[str, str] | None = None) -> Iterator[None]:
    """What goes wrong in a page as a readable message, not a traceback (options in the page's words)."""
    _run_through_the_frame()
    try:
        yield
    except StashError as exc:
        restart = isinstance(exc, NewerThanStash) and code_age.known_changed()  # this Stash's update wrote it
        said = plain(in_page_words(str(exc), words))
        said = f"{code_age.RESTART_ADVICE}. ({said})" if restart else said
        st.error(said, icon=":material/restart_alt:" if restart else ":material/error:")
    except Exception as exc:
        if is_database_corruption(exc):  # damage the open-time checks did not read: the way out, not a bug
            st.error(plain(in_page_words(corruption_line(exc), words)), icon=":material/error:")
            return
        LOG.exception("dashboard page failed")  # a bug: keep the page usable, the details in the server log
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        failure = f"{type(exc).__name__}{': ' + text if text else ''}"
        if code_age.known_changed():  # old modules called with new arguments: not a bug to report
            st.error(f"{code_age.RESTART_ADVICE}. ({failure})", icon=":material/restart_alt:")
            return
        st.error(
            f"Something went wrong on this page: {failure}. The details are in the dashboard's log.",
            icon=":material/error:",
        )


# ---------------------------------------------------------------------------------------------------------
# Charts and downloads


def show_chart(chart: alt.TopLevelMixin) -> None:
    """Draw an Altair chart. Altair's JSON-schema validation costs 0.1-0.4 s per chart, so it is left to the
    tests (STASH_VALIDATE_CHARTS=1), which build every chart the pages draw."""
    if os.environ.get("STASH_VALIDATE_CHARTS") != "1":
        # Streamlit calls chart.to_dict(); an instance attribute (set past Altair's __setattr__, which would
        # store it in the spec) makes that call skip validation.
        object.__setattr__(chart, "to_dict", functools.partial(chart.to_dict, validate=False))
    st.altair_chart(chart, width="stretch")


MISSING_TEXT = views.common.MISSING_TEXT
# Streamlit wraps a cell's text only in rows taller than 4rem (64 px): this fits three lines.
WRAPPED_ROW_HEIGHT_PX = 66


def show_table(data: Any, **options: Any) -> Any:
    """st.dataframe as every page shows a table: as wide as the page, no index, a missing value as "—",
    headings in words with their units (views.labels), columns narrowed to keep the table inside the page
    (fit_to_page), and (`wrap=True`) long text wrapped over a taller row instead of cut off at the column's
    edge. `labels=False, fit=False` show a frame as it is (a user's own query, its names as written, as wide
    as it asks). Other options go to st.dataframe; its return value (a selection state with on_select) is
    returned."""
    wrap = options.pop("wrap", False)
    if options.pop("labels", True) and isinstance(data, pd.DataFrame):
        options["column_config"] = views.labels.labelled_config(data.columns, options.get("column_config"))
    fits = options.pop("fit", True) and options.get("width") in (None, "stretch")
    if fits and isinstance(data, pd.DataFrame):
        fit_to_page(data, options)  # a row as tall as its narrowed text needs
    if wrap:
        options.setdefault("row_height", WRAPPED_ROW_HEIGHT_PX)
    options.setdefault("hide_index", True)
    options.setdefault("width", "stretch")
    options.setdefault("placeholder", MISSING_TEXT)
    if "row_height" in options and isinstance(data, pd.DataFrame):  # "auto" cut the last of taller rows
        options.setdefault("height", views.table_fit.table_height_px(len(data), options["row_height"]))
    return st.dataframe(data, **options)


def fit_to_page(data: pd.DataFrame, options: dict[str, Any], editor: bool = False) -> None:
    """Column widths that keep a table inside the page (views.table_fit), its text wrapped when they had to
    narrow it: no table scrolls sideways with its right-hand columns cut off."""
    config = dict(options.get("column_config") or {})
    shown = [column for column in data.columns if config.get(str(column), ...) is not None]
    headings = {column: _heading(config.get(str(column)), column) for column in shown}
    extra = views.table_fit.EDITOR_ICON_PX if editor else 0
    widths, wrap = views.table_fit.fitted_widths(data[shown], headings, heading_extra_px=extra)
    for column, width in widths.items():
        given = config.get(str(column))
        config[str(column)] = {
            **(given if isinstance(given, dict) else {"label": headings[column]}),
            "width": width,
        }
    if widths:
        options["column_config"] = config
    if wrap:
        options.setdefault("row_height", views.table_fit.wrapped_row_px(data[shown], widths))


def _heading(given: Any, column: Any) -> str:
    if isinstance(given, str):
        return given
    return str((given.get("label") if isinstance(given, dict) else None) or column)


def chart_with_download(chart: alt.TopLevelMixin, data: pd.DataFrame, name: str, key: str) -> None:
    """Draw an Altair chart and offer its data as CSV right under it."""
    show_chart(chart)
    download_buttons(data, name, key, parquet=False, label="Chart data")


def download_buttons(
    data: pd.DataFrame, name: str, key: str, parquet: bool = True, label: str = "Download"
) -> None:
    """CSV (and Parquet) download buttons for a frame; files are built only when clicked."""
    row = st.container(horizontal=True, gap="small")
    row.download_button(
        f"{label} (CSV)",
        data=lambda: views.common.frame_to_csv(data),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"{key}-csv",
        on_click="ignore",
        icon=":material/download:",
    )
    if parquet:
        row.download_button(
            f"{label} (Parquet)",
            data=lambda: views.common.frame_to_parquet(data),
            file_name=f"{name}.parquet",
            mime="application/octet-stream",
            key=f"{key}-parquet",
            on_click="ignore",
            icon=":material/download:",
        )


def stall_scale() -> alt.Scale:
    """The same colour for each stall on every chart."""
    return alt.Scale(
        domain=[views.common.STALL_LABELS[s] for s in views.common.STALL_COLORS],
        range=list(views.common.STALL_COLORS.values()),
    )


MEASURES = {
    "seconds": ("Seconds per iteration", "s", ".3f"),
    "epoch_s": ("Seconds per epoch", "s", ".1f"),
    "share": ("Share of the iteration", "", ".1%"),
}


# ---------------------------------------------------------------------------------------------------------
# Formatting


def seconds_text(value: Any, ci: Any = None) -> str:
    """0.2051 -> '205 ms'; 12.5 -> '12.5 s'; with ± interval when given; '-' when unknown."""
    number = finite_float(value)
    if number is None:
        return "–"
    return units.seconds_short(number, finite_float(ci))


def number_text(value: Any, digits: int = 1) -> str:
    number = finite_float(value)
    return "–" if number is None else f"{number:,.{digits}f}"


def share_text(value: Any) -> str:
    """0.37 -> '37.0%', one decimal as `stash show` writes a share (a column read '52%' beside '10.0%'); one
    that would round to an end says so: '<0.1%', '>99.9%', never '0.0%' beside a stall that is measured or
    '100.0%' beside one that is not nothing; 0 and 1 exactly as '0%' and '100%'."""
    number = finite_float(value)
    if number is None:
        return "–"
    if (at_an_end := share_at_an_end(number)) is not None:
        return at_an_end
    return f"{number:.0%}" if number in (0, 1) else f"{number:.1%}"


def usd_text(value: Any) -> str:
    number = finite_float(value)
    return "–" if number is None else usd_words(number)


def ago_text(moment: Any) -> str:
    """'3 min ago', '2 days ago' for a UTC time; '-' when unknown."""
    if moment is None or (isinstance(moment, float) and math.isnan(moment)) or moment is pd.NaT:
        return "–"
    when = pd.Timestamp(moment)
    if when.tzinfo is None:
        when = when.tz_localize("UTC")
    seconds = (datetime.now(UTC) - when.to_pydatetime()).total_seconds()
    if seconds < -60:  # a run from a machine whose clock runs ahead of this one's: not "0 s ago"
        return f"{_age_words(-seconds)} ahead of this clock"
    return f"{_age_words(max(seconds, 0))} ago"


def _age_words(seconds: float) -> str:
    for limit, size, unit in ((90, 1, "s"), (5400, 60, "min"), (86400 * 1.5, 3600, "h")):
        if seconds < limit:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds / 86400:.0f} days"


def page_header(title: str, caption: str) -> None:
    st.title(title)
    st.caption(caption)


def empty_state(message: str, action: Callable[[], None] | None = None) -> None:
    """What a page shows when the database holds nothing for it yet."""
    st.info(message, icon=":material/info:")
    if action is not None:
        action()


def run_link(run_id: str, label: str | None = None) -> None:
    """A link to a run's detail on the Stall breakdown page."""
    st.page_link(
        "pages/breakdown.py",
        label=label or f"Open run {run_id} on the Stall breakdown page",
        icon=":material/stacked_bar_chart:",
        query_params={"run": run_id},
    )


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
