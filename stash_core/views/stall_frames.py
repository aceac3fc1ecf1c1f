"""Stalls as the charts and tables draw them: laid end to end, closing at the iteration time.

Every run's parts are the five named stalls and the signed remainder ("Not separated": the iteration time
minus the named stalls, see analysis.stalls.remainder_of), so that a stacked bar ends exactly at t2 (or 100%
of it) whatever was clamped. The remainder is computed here from the stall_breakdown row (iteration_s and
the five stalls), so that runs stored before it existed close too; its interval is the row's
`unattributed_ci95_s` when the store gives one, else estimated.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from stash_core.analysis.stalls import (
    REMAINDER,
    remainder_of,
    stall_fault,
    stall_resolved,
)
from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.units import UNRESOLVED_NOTE, finite_float
from stash_core.views.common import STALL_LABELS

__all__ = ["REMAINDER", "stall_detail_rows", "stall_long_frame", "with_remainder_columns"]

REMAINDER_LABEL = "Not separated"
REMAINDER_COLOR = "#9D9D9D"
REMAINDER_ORDER = len(STALL_NAMES)
PART_LABELS = {**STALL_LABELS, REMAINDER: REMAINDER_LABEL}
# A part smaller than this share of the total is float rounding, not a remainder to draw.
ROUNDING_SHARE = 1e-9
LONG_COLUMNS = ["run_id", "run_label", "stall", "stall_label", "stall_order", "status", "value", "ci95",
                "bar_start", "bar_end", "error_low", "error_high", "resolved", "note", "unit"]  # fmt: skip
# What `value` and the columns after it hold, per measure: a chart's data downloaded says it in each row.
MEASURE_UNITS = {"seconds": "s per iteration", "epoch_s": "s per epoch", "share": "share of the iteration"}


def record_breakdown(record: dict[str, Any]) -> dict[str, Any]:
    """A breakdown dict (as analysis.stalls gives) from one stall_breakdown row."""
    stalls = {
        stall: {
            "seconds": finite_float(record.get(f"{stall}_s")),
            "ci95_s": finite_float(record.get(f"{stall}_ci95_s")),
            "status": record.get(f"{stall}_status"),
        }
        for stall in STALL_NAMES
    }
    return {
        "iteration_s": finite_float(record.get("iteration_s")),
        "iteration_ci95_s": finite_float(record.get("iteration_ci95_s")),
        "iterations_per_epoch": finite_float(record.get("iterations_per_epoch")),
        "unattributed_ci95_s": finite_float(record.get("unattributed_ci95_s")),
        "stalls": stalls,
    }


def stall_long_frame(breakdown: pd.DataFrame, measure: str = "seconds") -> pd.DataFrame:
    """Stall rows (one per run and part) for a stacked bar, with explicit bar ends and error-bar ends.

    `measure`: "seconds" (per iteration), "epoch_s" (per epoch) or "share" (of the iteration). The bars of one
    run are laid end to end in STALL_NAMES order, a negative one (status negative) after the others, then the
    remainder (stall "unattributed", label "Not separated") when there is one, so that the last bar ends at
    the run's total: t2, t2 x iterations per epoch, or 1. A negative stall or remainder runs backwards, from
    the end of the parts before it; nothing is
    drawn below zero (bar ends and interval ends are cut at it, `value` keeps the figure). An error
    bar sits at the end of its part's bar and spans its 95% interval. `resolved` is False for a stall within
    the noise or whose interval is wider than its value. Stalls without a value (not measured) are left out.
    `unit` says what `value`, `ci95` and the ends are in (MEASURE_UNITS).
    """
    if measure not in ("seconds", "epoch_s", "share"):
        raise UsageError(f"unknown measure {measure!r}")
    rows = []
    for record in breakdown.to_dict(orient="records"):
        rows.extend(_record_rows(record, measure))
    return pd.DataFrame(rows, columns=LONG_COLUMNS).assign(unit=MEASURE_UNITS[measure])


def _record_rows(record: dict[str, Any], measure: str) -> list[dict[str, Any]]:
    iteration_s = finite_float(record.get("iteration_s"))
    per_epoch = finite_float(record.get("iterations_per_epoch"))
    scales = {"seconds": 1.0, "epoch_s": per_epoch, "share": 1.0 / iteration_s if iteration_s else None}
    scale = scales[measure]
    parts = []
    for order, stall in enumerate(STALL_NAMES):
        seconds = finite_float(record.get(f"{stall}_s"))
        ci_s = finite_float(record.get(f"{stall}_ci95_s"))
        if measure == "seconds":
            value = seconds
        elif measure == "epoch_s":
            value = finite_float(record.get(f"{stall}_epoch_s"))
            if value is None and seconds is not None and per_epoch:
                value = seconds * per_epoch
        else:
            value = finite_float(record.get(f"{stall}_share"))
        status = record.get(f"{stall}_status")
        if value is None or stall_fault({"seconds": seconds, "status": status}):
            continue  # a stall stored without a valid figure: its time is in the remainder, as the table says
        resolved = stall_resolved({"seconds": seconds, "ci95_s": ci_s, "status": status})
        note = UNRESOLVED_NOTE if resolved is False else ""
        ci = ci_s * scale if ci_s is not None and scale else None
        parts.append((stall, order, status, value, ci, resolved, note))
    # a negative stall after the others: it runs backwards from where they end, as a negative remainder does,
    # over no stall but the last (laid in its place it was drawn over the stalls after it)
    parts.sort(key=lambda part: part[3] < 0)
    total = _total(record, measure, iteration_s, per_epoch)
    remainder = remainder_of(record_breakdown(record)) if total is not None else None
    if remainder is not None:
        value = total - math.fsum(part[3] for part in parts)
        if abs(value) > ROUNDING_SHARE * abs(total) and remainder["status"] != "none":
            ci_s = remainder["ci95_s"]
            ci = ci_s * scale if ci_s is not None and scale else None
            parts.append((REMAINDER, REMAINDER_ORDER, remainder["status"], value, ci,
                          stall_resolved(remainder), remainder["note"]))  # fmt: skip
    return _lay_end_to_end(record, parts, total)


def _total(
    record: dict[str, Any], measure: str, iteration_s: float | None, per_epoch: float | None
) -> float | None:
    if iteration_s is None:
        return None
    if measure == "seconds":
        return iteration_s
    if measure == "share":
        return 1.0
    return iteration_s * per_epoch if per_epoch else finite_float(record.get("epoch_s"))


def _lay_end_to_end(record: dict[str, Any], parts: list[tuple], total: float | None) -> list[dict[str, Any]]:
    rows, start = [], 0.0
    for index, (stall, order, status, value, ci, resolved, note) in enumerate(parts):
        last = index == len(parts) - 1 and stall == REMAINDER
        end = total if last and total is not None else start + value
        rows.append(
            {
                "run_id": record.get("run_id"),
                "run_label": record.get("run_label") or record.get("run_id"),
                "stall": stall,
                "stall_label": PART_LABELS[stall],
                "stall_order": order,
                "status": status,
                "value": value,
                "ci95": ci,
                # Nothing is drawn below zero: a bar or an interval that would reach below it (negative
                # stalls larger than the parts before them) is cut there; `value` keeps the figure.
                "bar_start": max(0.0, start),
                "bar_end": max(0.0, end),
                "error_low": None if ci is None else max(0.0, end - ci),
                "error_high": None if ci is None else max(0.0, end + ci),
                "resolved": resolved,
                "note": note,
            }
        )
        start = end
    return rows


def stall_detail_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """One run's stall rows (the `stalls` of run_detail) plus its remainder, each with `label`, `resolved`
    (False: not resolved, None: no figure) and, for the remainder, what it holds in `note`. The remainder's
    row is there whenever the run has an iteration time, 0 included, so that the rows add up to it."""
    named = [row for row in run.get("stalls") or [] if row.get("stall") in STALL_NAMES]
    rows = [{**row, "label": STALL_LABELS[row["stall"]], "resolved": stall_resolved(row)} for row in named]
    breakdown = {
        "iteration_s": finite_float(run.get("iteration_s")),
        "iteration_ci95_s": finite_float(run.get("iteration_ci95_s")),
        "iterations_per_epoch": finite_float(run.get("iterations_per_epoch")),
        "unattributed_ci95_s": finite_float(run.get("unattributed_ci95_s")),
        "stalls": {row["stall"]: row for row in named},
    }
    remainder = remainder_of(breakdown)
    if remainder is not None:
        rows.append(
            {**remainder, "stall": REMAINDER, "label": REMAINDER_LABEL, "resolved": stall_resolved(remainder)}
        )
    return rows


def stall_download_frame(run: dict[str, Any]) -> pd.DataFrame:
    """The stall table's rows as a download: the stalls, then the remainder, so that they add up to the
    iteration (the stored stalls alone did not), in the columns of the stalls table."""
    columns = ["run_id", "stall", "seconds", "ci95_s", "share", "epoch_s", "status", "note"]
    detail = [{**row, "run_id": run.get("run_id")} for row in stall_detail_rows(run)]
    return pd.DataFrame(detail).reindex(columns=columns)


def with_remainder_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame (stall_breakdown rows) with `unattributed_s`, `unattributed_ci95_s` and `unattributed_share`
    computed per row: t2 minus the named stalls (0 when there is none), its interval, its share of t2."""
    frame = frame.copy()
    remainders = [remainder_of(record_breakdown(record)) for record in frame.to_dict(orient="records")]
    frame["unattributed_s"] = [None if r is None else r["seconds"] for r in remainders]
    frame["unattributed_ci95_s"] = [None if r is None else r["ci95_s"] for r in remainders]
    frame["unattributed_share"] = [None if r is None else r["share"] for r in remainders]
    return frame
