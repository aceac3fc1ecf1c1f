"""Breakdown: filtered runs, their stalls as long frames for charts, one run in detail."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.analysis.coherence import impossible_of_stored
from stash_core.analysis.core_sharing import core_sharing_note
from stash_core.analysis.stalls import stall_resolved
from stash_core.cells import is_missing, plain_records
from stash_core.decide.whatif import whatif as answer
from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store import queries_breakdown
from stash_core.store.impossible_runs import breakdown_marks_of
from stash_core.store.runs import resolve_run_id_in
from stash_core.units import finite_float
from stash_core.views.common import (
    MAX_ITERATION_POINTS,
    MAX_TELEMETRY_POINTS_PER_METRIC,
    NO_INSTANCE,
    STALL_LABELS,
    as_int,
)
from stash_core.views.stall_frames import stall_long_frame, with_remainder_columns
from stash_core.views.telemetry import phase_spans, telemetry_frame, telemetry_spans
from stash_core.zoo_names import model_file

# These live in stall_frames and telemetry; pages reach them through views.breakdown.
__all__ = ["phase_spans", "stall_long_frame", "telemetry_frame", "telemetry_spans"]

# ---------------------------------------------------------------------------------------------------------
# Stall breakdown

FIGURE_KEYS = (("seconds", "_s"), ("ci95_s", "_ci95_s"), ("status", "_status"))  # a stall's view columns


@dataclass
class RunFilter:
    """What the breakdown page filters runs by; empty lists mean "any"."""

    models: list[str] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    workers: list[int] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    statuses: list[str] = field(default_factory=lambda: ["completed"])
    date_from: date | None = None
    date_to: date | None = None
    limit: int = 20


MOST_RUNS_SHOWN = 200  # a chart of more runs is unreadable, and each costs a query's rows
FIRST_RUNS_SHOWN = 15  # "Show at most" before the user sets it


def runs_shown(asked: Any) -> int:
    """The runs the page shows for what "Show at most" holds: within 1 to MOST_RUNS_SHOWN."""
    number = finite_float(asked)
    return FIRST_RUNS_SHOWN if number is None else int(min(max(number, 1), MOST_RUNS_SHOWN))


def model_names(db_path: Path | str) -> list[str]:
    """Models the database knows (the models table), sorted."""
    with store.connect(db_path, read_only=True) as con:
        return queries_breakdown.model_names(con)


def within_options(run_filter: RunFilter, options: dict[str, Any]) -> RunFilter:
    """The filter less values the database has no option for: the page's widgets drop them as they are drawn,
    after the query ran (a model chosen on another database would hide every run until the next click)."""
    statuses = status_choices(options)
    first, last = options.get("first_date"), options.get("last_date")
    date_from, date_to = run_filter.date_from, run_filter.date_to
    if _outside(date_from, date_to, first, last):  # another database's days: the slider opens the range
        date_from = date_to = None
    return replace(
        run_filter,
        date_from=date_from,
        date_to=date_to,
        models=[m for m in run_filter.models if m in options["models"]],
        batch_sizes=[b for b in run_filter.batch_sizes if b in options["batch_sizes"]],
        instances=[i for i in run_filter.instances if i in options["instances"]],
        workers=[w for w in run_filter.workers if w in options["workers"]],
        nodes=[n for n in run_filter.nodes if n in options["nodes"]],
        statuses=[s for s in run_filter.statuses if s in statuses],
    )


def status_choices(options: dict[str, Any]) -> list[str]:
    """The Status widget's choices: the stored statuses, and "completed" (its default) always."""
    return sorted(set(options["statuses"]) | {"completed"})


def filter_options(db_path: Path | str) -> dict[str, Any]:
    """Distinct values to filter on (sorted), and the first and last run date."""
    with store.connect(db_path, read_only=True) as con:
        return _filter_options(con)


def _filter_options(con: Any) -> dict[str, Any]:
    lists = queries_breakdown.filter_option_lists(con, NO_INSTANCE)
    keys = ("models", "batch_sizes", "instances", "workers", "nodes", "statuses")
    options = {key: list(values or []) for key, values in zip(keys, lists[:6], strict=True)}
    options["first_date"], options["last_date"] = lists[6], lists[7]
    return options


def find_runs(db_path: Path | str, run_filter: RunFilter) -> tuple[pd.DataFrame, int]:
    """(stall_breakdown rows matching the filter, newest first, at most `run_filter.limit`, labelled;
    how many runs match in all)."""
    with store.connect(db_path, read_only=True) as con:
        return _find_runs(con, run_filter)


def _find_runs(con: Any, run_filter: RunFilter) -> tuple[pd.DataFrame, int]:
    condition, params = queries_breakdown.run_filter_sql(run_filter, NO_INSTANCE)
    total = queries_breakdown.count_runs(con, condition, params)
    return breakdown_rows(con, condition, params, max(1, int(run_filter.limit))), total


def breakdown_page(
    db_path: Path | str, run_filter: RunFilter, linked_run: str | None = None, previous_run: str | None = None
) -> dict[str, Any]:
    """What the Stall breakdown page shows, read over one connection: "options" (filter_options), "runs" and
    "total" (find_runs), "detail" (run_detail), "linked" (the stored run id `linked_run` names, else None) and
    "missing" (why `linked_run` names no stored run: "no run X in this database", or the several it matches).

    The detail is of `linked_run` (a run opened by a link: its id or any unique part of it, as `stash show`
    takes it) when it names a stored run, else of `previous_run` (the one shown before) when it still
    matches the filter, else of the newest matching run.
    """
    with store.connect(db_path, read_only=True) as con:
        options = _filter_options(con)
        runs, total = _find_runs(con, within_options(run_filter, options))
        linked, missing = None, None
        if linked_run:
            try:
                linked = resolve_run_id_in(con, linked_run)
            except UsageError as exc:  # a part of several runs' ids
                missing = str(exc)
        detail = _run_detail(con, linked) if linked else None
        if linked_run and detail is None and missing is None:
            missing = f"No run {linked_run} in this database"
        shown = set(runs["run_id"])
        if detail is None and previous_run in shown:
            detail = _run_detail(con, previous_run)
        if detail is None and not runs.empty:
            detail = _run_detail(con, str(runs["run_id"].iloc[0]))
    return {"options": options, "runs": runs, "total": total, "detail": detail, "linked": linked,
            "missing": missing}  # fmt: skip


def add_run_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Add `run_label`: model, batch, workers x nodes, instance and the run id's tail - unique per run - and
    the `figures` mark where a row has one (an impossible breakdown is not drawn as if it were a run's)."""
    frame = frame.copy()
    if frame.empty:
        frame["run_label"] = pd.Series(dtype="object")
        return frame
    labels = []
    for row in frame.itertuples(index=False):
        row_dict = row._asdict()
        workers = as_int(row_dict.get("workers_per_node"))
        nodes = as_int(row_dict.get("nodes")) or 1
        scale = f"{workers or '?'}w" + (f"x{nodes}n" if nodes > 1 else "")
        instance = row_dict.get("instance")
        # NaN, not None, where other rows have a label
        instance = NO_INSTANCE if is_missing(instance) or not instance else instance
        batch = as_int(row_dict.get("batch_size")) or "?"
        parts = [short_model(row_dict.get("model")), f"b{batch}", scale, str(instance),
                 short_run_id(str(row_dict.get("run_id")))]  # fmt: skip
        if isinstance(mark := row_dict.get("figures"), str) and mark:
            parts.append(mark)
        labels.append(" · ".join(parts))
    frame["run_label"] = labels
    return frame


def short_run_id(run_id: str) -> str:
    """The random tail of a run id (unique enough to tell runs apart on a chart)."""
    return run_id.rsplit("-", 1)[-1] if "-" in run_id else run_id[-8:]


# A run id as Stash makes it (its start, then 8 random hex digits): listed as its tail; any other whole
STASH_RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")


def listed_run_ids(run_ids: list[str]) -> list[str]:
    """Run ids as a list of runs shows them: the tail of one Stash made (`stash show` takes it), any other
    whole, and all whole where two tails are alike."""
    short = [short_run_id(run_id) if STASH_RUN_ID.fullmatch(run_id) else run_id for run_id in run_ids]
    return short if len(set(short)) == len(short) else list(run_ids)


def short_model(model: Any) -> str:
    """A model name fit for a chart label: a user model /path/to/FILE.py:FACTORY shows as FILE.py:FACTORY."""
    if not model or (isinstance(model, float) and math.isnan(model)):
        return "?"
    text = str(model).strip()
    file = model_file(text)  # only a real FILE.py:FACTORY: a name with a '/' of its own is shown whole
    return f"{file.rsplit('/', 1)[-1]}{text[len(file) :]}" if file else text


def breakdown_table(breakdown: pd.DataFrame) -> pd.DataFrame:
    """A readable per-run table: seconds and share of each stall next to the run's identity, and the signed
    remainder (`unattributed_*`: t2 minus the named stalls), so that each row's parts add up to t2; and
    `not_resolved`, the stalls whose figure may be zero (within the noise, or a wider interval), by name."""
    columns = ["run_label", "run_id", "started_at", "status", "figures", "iteration_s", "iteration_ci95_s",
               "epoch_s", "epoch_ci95_s"]  # fmt: skip
    table = breakdown[[c for c in columns if c in breakdown.columns]].copy()
    for stall in STALL_NAMES:
        if f"{stall}_s" in breakdown.columns:
            table[f"{stall}_s"] = breakdown[f"{stall}_s"]
            if f"{stall}_ci95_s" in breakdown.columns:
                table[f"{stall}_ci95_s"] = breakdown[f"{stall}_ci95_s"]
            table[f"{stall}_share"] = breakdown[f"{stall}_share"]
    if "iteration_s" in breakdown.columns:
        remainders = with_remainder_columns(breakdown)
        for column in ("unattributed_s", "unattributed_ci95_s", "unattributed_share"):
            table[column] = remainders[column]
    table["not_resolved"] = [_not_resolved(row) for row in breakdown.to_dict(orient="records")]
    return table


def _not_resolved(record: dict[str, Any]) -> str:
    """The stalls of one breakdown row that were not resolved (their figure may be zero), by name: a table
    of figures shows 0.0000 for one within the noise as for one truly at zero."""
    entries = {
        stall: {key: record.get(f"{stall}{suffix}") for key, suffix in FIGURE_KEYS} for stall in STALL_NAMES
    }
    return ", ".join(STALL_LABELS[s] for s, entry in entries.items() if stall_resolved(entry) is False)


def run_detail(
    db_path: Path | str,
    run_id: str,
    max_iterations: int = MAX_ITERATION_POINTS,
    max_points_per_metric: int = MAX_TELEMETRY_POINTS_PER_METRIC,
) -> dict[str, Any] | None:
    """One stored run, read over one connection: the runs row (spec, fingerprint, warnings parsed), "phases"
    and "stalls" (lists of dicts, as store.get_run gives them), "samples" (per-iteration times, evenly
    thinned within each phase past `max_iterations`; "samples_stored" counts them all) and "telemetry" (see
    telemetry_frame). None when there is no such run."""
    with store.connect(db_path, read_only=True) as con:
        return _run_detail(con, run_id, max_iterations, max_points_per_metric)


def _run_detail(
    con: Any,
    run_id: str,
    max_iterations: int = MAX_ITERATION_POINTS,
    max_points_per_metric: int = MAX_TELEMETRY_POINTS_PER_METRIC,
) -> dict[str, Any] | None:
    frames = queries_breakdown.run_frames(con, run_id, STALL_NAMES, max_iterations, max_points_per_metric)
    if frames is None:
        return None
    runs, phases, stalls = frames["runs"], frames["phases"], frames["stalls"]
    samples, telemetry = frames["samples"], frames["telemetry"]
    run = _records(runs)[0]
    for column in ("spec", "fingerprint", "warnings", "hosts"):
        if isinstance(run.get(column), str):
            run[column] = json.loads(run[column])
    for column in ("started_at", "finished_at", "ingested_at"):
        if isinstance(run.get(column), str):
            run[column] = datetime.fromisoformat(run[column])
    run["phases"] = _records(phases)
    run["stalls"] = _records(stalls)
    run["impossible"] = impossible_of_stored(run.get("warnings"), run["stalls"], run)  # a headline, no share
    run["core_sharing"] = _core_sharing(run)
    run["samples"] = samples
    run["samples_stored"] = frames["samples_stored"]
    run["telemetry"] = telemetry_frame(telemetry, run["phases"])
    return run


def _core_sharing(run: dict[str, Any]) -> str | None:
    """The note `stash profile` and `stash show` give a CPU run whose workers took every core."""
    communication = run.get("communication")
    try:
        communication = json.loads(communication) if isinstance(communication, str) else communication
    except ValueError:
        communication = None  # a hand-edited column: the note goes without the probe's time
    stalls = {row.get("stall"): row for row in run["stalls"]}
    breakdown = {"stalls": stalls, "communication": communication or {}}
    machine = {key: run.get(key) for key in ("spec", "fingerprint", "hosts", "phases")}
    return core_sharing_note({**machine, "breakdown": breakdown})


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of plain values as a result document holds them: times as ISO text, no NaN or infinities."""
    return plain_records(frame, times="iso", finite=True)


def headline_stall(run: dict[str, Any]) -> dict[str, Any] | None:
    """The stall a run's page headlines: the largest resolved one (a stall within the noise or wider than its
    interval is no headline), none for an impossible breakdown (its warning is the headline)."""
    if run.get("impossible"):
        return None
    candidates = [
        stall
        for stall in run.get("stalls") or []
        if finite_float(stall.get("seconds")) is not None
        and stall.get("status") == "measured"
        and finite_float(stall.get("seconds")) >= abs(finite_float(stall.get("ci95_s")) or 0.0)
    ]
    return max(candidates, key=lambda s: s["seconds"]) if candidates else None


def headline_rivals(run: dict[str, Any], largest: dict[str, Any]) -> list[dict[str, Any]]:
    """The other stalls whose 95% interval reaches the headline's (headline_stall), largest first: which of
    them is the largest is not told apart (a stall not resolved, too, may be the largest)."""
    low_s = largest["seconds"] - abs(finite_float(largest.get("ci95_s")) or 0.0)
    rivals = [
        stall
        for stall in run.get("stalls") or []
        if stall is not largest
        and stall.get("status") in ("measured", "clamped_zero")
        and (seconds := finite_float(stall.get("seconds"))) is not None
        and seconds + abs(finite_float(stall.get("ci95_s")) or 0.0) >= low_s
    ]
    return sorted(rivals, key=lambda stall: -stall["seconds"])


def breakdown_rows(con: Any, where: str, params: list[Any], limit: int) -> pd.DataFrame:
    """stall_breakdown rows of the newest `limit` runs matching `where` (a condition on runs made by
    store/queries_breakdown.py), labelled, newest first; `figures` says which breakdowns cannot be
    ("impossible") or mix other work ("not comparable"), as their own page does; the label ends with it."""
    frame = queries_breakdown.newest_breakdowns(con, where, params, limit)
    marks = breakdown_marks_of(con, frame["run_id"].tolist())
    return add_run_labels(frame.assign(figures=[marks.get(run_id, "") for run_id in frame["run_id"]]))


def whatif(db_path: Path, run_id: str) -> dict:
    """What would hide a run's CPU, disk and network stalls (see stash_core.decide.whatif)."""

    return answer(db_path, run_id)


def open_ended_days(chosen: Any, bounds: Any) -> tuple[date | None, date | None]:
    """The days a range slider holds (`chosen`, drawn between `bounds`) as a filter: an end left at its bound
    is open, so that a run of a later (or earlier) day is in at once; None for no range."""
    if not chosen:
        return None, None
    start, end = _day(chosen[0]), _day(chosen[1])
    if not bounds:
        return start, end
    return (None if chosen[0] <= bounds[0] else start), (None if chosen[1] >= bounds[1] else end)


def kept_days(chosen: Any, bounds: Any, first: date, last: date) -> tuple[date, date]:
    """The slider's range when its bounds become `first`..`last`: ends left at the old bounds move with
    them, a narrowed end stays where it was (within the new bounds); a range with no day between them (of
    another database) opens to them."""
    if not chosen or not bounds or _outside(_day(chosen[0]), _day(chosen[1]), first, last):
        return first, last
    start = first if chosen[0] <= bounds[0] else min(max(chosen[0], first), last)
    end = last if chosen[1] >= bounds[1] else max(min(chosen[1], last), start)
    return start, end


def _outside(start: date | None, end: date | None, first: Any, last: Any) -> bool:
    """Whether the days start..end (None: open) hold none of first..last."""
    if not isinstance(first, date) or not isinstance(last, date):
        return False
    return (start is not None and start > last) or (end is not None and end < first)


def _day(value: Any) -> date | None:
    return value if isinstance(value, date) else None
