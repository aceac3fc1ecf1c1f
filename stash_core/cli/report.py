"""Plain-text rendering of a stall breakdown (the CLI's table).

Every line with a figure reads `label  seconds s  share%`: the named stalls and the signed remainder ("not
separated") add up to the iteration time on the first line, and their shares to 100%. A stall whose 95%
interval is wider than its value is marked "not resolved", with what would resolve it; one within the
noise (reported as 0) shows its difference instead of a figure, since that difference is in the remainder. A
stored stall without a valid figure (no value, or below 0 without status 'negative') says so, and its time is
in the remainder.
"""

from __future__ import annotations

import math

from stash_core.analysis.advice import resolve_hint
from stash_core.analysis.coherence import impossible_of_stored
from stash_core.analysis.epochs import per_epoch
from stash_core.analysis.stalls import (
    REMAINDER_LABEL,
    STALLS,
    remainder_of,
    stall_fault,
    stall_resolved,
)
from stash_core.analysis.unmeasured import NOT_ASKED
from stash_core.terminal import one_line
from stash_core.units import decimals_for, finite_float, share_at_an_end

LABELS = {
    "compute": "compute",
    "interconnect": "interconnect",
    "network": "network",
    "cpu": "CPU prep",
    "disk": "disk fetch",
}
LABEL_WIDTH = 15


# What one sample of an epoch is, by the model's kind (a script's or an unknown kind's: samples).
SAMPLE_WORDS = {"image": "images", "tokens": "documents"}


def format_breakdown(
    breakdown: dict, dataset_images: int | None = None, model_kind: str | None = None
) -> str:
    """The breakdown table: iteration time with its interval, then one line per stall and the remainder."""
    iteration_s = breakdown["iteration_s"]
    digits = decimals(iteration_s)
    ci = finite_float(breakdown.get("iteration_ci95_s"))  # inf (one launch, one kept block): none, as stored
    relative = f" ± {ci / iteration_s:.1%}" if ci is not None and iteration_s else ""
    head = f"iteration {iteration_s:.{digits}f} s{relative}"
    if breakdown.get("epoch_s") is not None:
        images = (
            f"{dataset_images} {SAMPLE_WORDS.get(model_kind or '', 'samples')}"
            if dataset_images
            else f"{breakdown['iterations_per_epoch']} iterations"
        )
        # the iteration's interval times the iterations of an epoch (analysis/epochs.per_epoch)
        epoch_ci = per_epoch(ci, breakdown.get("iterations_per_epoch"))
        spread = "" if epoch_ci is None else f" ± {format_seconds(epoch_ci)}"
        head += f"  (epoch of {images}: {format_seconds(breakdown['epoch_s'])}{spread})"
    lines = [head]
    headline = impossible_of_stored(breakdown.get("warnings"), breakdown.get("stalls"), breakdown)
    if headline:  # said before any figure: the figures below are not a breakdown of the iteration
        lines.append(f"warning: {one_line(headline)}")
    unresolved, apart = [], {}  # apart: a not-separable reason -> the first stall line that gave it
    for name in STALLS:
        stall = breakdown["stalls"].get(name) or {}
        line = stall_line(LABELS[name], stall, iteration_s, digits)
        note = stall.get("note") if stall.get("status") == "not_separable" else None
        if line is not None and note in apart:  # the same reason once: the next stall refers to it
            line = f"  {LABELS[name]:<{LABEL_WIDTH}}not separable: as {apart[note]}"
        elif line is not None and note:
            apart[note] = LABELS[name]
        if line is not None:
            lines.append(line)
        if stall_resolved(stall) is False:
            unresolved.append(LABELS[name])
    lines.extend(remainder_lines(breakdown, digits))
    lines.extend(epoch_lines(breakdown))
    lines.extend(not_measured_lines(breakdown))
    if unresolved:
        hint = resolve_hint(breakdown.get("warnings"))
        lines.append(f"not resolved: {', '.join(unresolved)}; to resolve: {hint}")
    for warning in breakdown.get("warnings") or []:
        said = any(warning.endswith(f"not separable: {note}") for note in apart)  # in the table above
        if warning != headline and not said:
            lines.append(f"warning: {one_line(warning)}")
    return "\n".join(lines)


def not_measured_lines(breakdown: dict) -> list[str]:
    """'not measured: network - one machine: ...', one line per reason ('CPU prep and disk fetch - no data
    is loaded: ...'): the stalls left out of the table (a run stored before reasons were kept: names
    alone)."""
    missing: dict[str, list[str]] = {}
    for name in STALLS:
        stall = breakdown["stalls"].get(name) or {}
        if stall.get("status", "not_measured") == "not_measured" and stall_fault(stall) is None:
            missing.setdefault(one_line(stall.get("note") or ""), []).append(LABELS[name])
    # a stall left out of --stalls was the user's choice: its note says so in the data, the table is quiet
    return [f"not measured: {_names(names)}" + (f" - {why}" if why else "")
            for why, names in missing.items() if why != NOT_ASKED]  # fmt: skip


def _names(names: list[str]) -> str:
    """'network', 'CPU prep and disk fetch', 'interconnect, network and CPU prep'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def stall_line(label: str, stall: dict, iteration_s: float, digits: int) -> str | None:
    """One stall's line, or None for a stall that was not measured."""
    status = stall.get("status", "not_measured")
    fault = stall_fault(stall)
    if fault is not None:  # stored data that is no figure: said, not shown as one
        return f'  {label:<{LABEL_WIDTH}}{fault}; its time is counted in "{REMAINDER_LABEL}"'
    if status == "not_measured" or (status != "not_separable" and stall.get("seconds") is None):
        return None
    head = f"  {label:<{LABEL_WIDTH}}"
    if status == "not_separable":
        return f"{head}not separable: {one_line(stall.get('note') or '')}"
    ci = stall.get("ci95_s")
    # Reported as 0: the difference itself is in the remainder, so the line gives it instead of a figure.
    if status == "clamped_zero" and not stall.get("seconds"):
        raw = stall.get("raw_s")
        spread = f"± {ci:.{digits}f} s" if ci is not None else "no interval"
        kept = f'kept in "{REMAINDER_LABEL}"'
        if raw is None:
            return f"{head}not resolved: within the noise ({spread}); {kept}"
        return f"{head}not resolved: difference {raw:+.{digits}f} s {spread}, within the noise; {kept}"
    seconds = stall["seconds"]
    line = f"{head}{figure(seconds, iteration_s, digits)}"
    if status == "clamped_zero":
        return f"{line}  not resolved: within the noise"
    if stall_resolved(stall) is False:
        if finite_float(ci) is None:  # one round and no spread of its own: nothing says it is not zero
            return f"{line}  not resolved: no interval"
        return f"{line}  not resolved: ± {ci:.{digits}f} s is wider than the value"
    if ci is not None:
        line += f"  ± {interval_text(ci, digits)} s"
    if status == "negative":
        line += "  (negative beyond noise)"
    elif seconds > iteration_s > 0:  # a share over 100% is pasted into reports: said as what it is
        line += "  (more than the whole iteration)"
    return line


def epoch_lines(breakdown: dict) -> list[str]:
    """'per epoch (8 iterations): compute 0.361 s ± 0.017 s, ...': each stall with a figure per epoch (its
    seconds per iteration times the iterations of an epoch), as the head gives the whole epoch."""
    if breakdown.get("epoch_s") is None:
        return []
    parts = []
    for name in STALLS:
        stall = breakdown["stalls"].get(name) or {}
        epoch_s = finite_float(stall.get("epoch_s"))
        within_noise = stall.get("status") == "clamped_zero" and not epoch_s  # in "not separated"
        no_figure = stall_fault(stall) is not None or stall.get("status") == "not_separable"
        if epoch_s is None or within_noise or no_figure:
            continue
        spread = finite_float(stall.get("epoch_ci95_s"))
        shown = "" if spread is None else f" ± {format_seconds(spread)}"
        parts.append(f"{LABELS[name]} {format_seconds(epoch_s)}{shown}")
    iterations = breakdown.get("iterations_per_epoch")
    return [f"per epoch ({iterations} iterations): {', '.join(parts)}"] if parts else []


def remainder_lines(breakdown: dict, digits: int) -> list[str]:
    """The "not separated" line (iteration time minus the named stalls, signed) and what it holds."""
    remainder = remainder_of(breakdown)
    if remainder is None or remainder["status"] == "none":
        return []
    iteration_s = breakdown["iteration_s"]
    line = f"  {REMAINDER_LABEL:<{LABEL_WIDTH}}{figure(remainder['seconds'], iteration_s, digits)}"
    if remainder.get("ci95_s") is not None:
        line += f"  ± {interval_text(remainder['ci95_s'], digits)} s"
    line += "  (within the noise)" if remainder["status"] == "within_noise" else ""
    return [line, f"      = {remainder['note']}"]


def interval_text(ci95_s: float, digits: int) -> str:
    """A stall's interval at the breakdown's decimals, or at two significant figures where those would show a
    nonzero interval as 0.0000."""
    shown = f"{ci95_s:.{digits}f}"
    return shown if float(shown) != 0.0 or ci95_s == 0.0 else f"{ci95_s:.{decimals_for(ci95_s, 2)}f}"


def figure(seconds: float, iteration_s: float, digits: int) -> str:
    """'  0.180 s    87.8%': a share that would show as 0.0% or 100.0% while it is not says so ('<0.1%'), as
    the dashboard does."""
    share = seconds / iteration_s if iteration_s else math.nan
    shown = share_at_an_end(share) or f"{share:.1%}"
    return f"{seconds:>{digits + 4}.{digits}f} s  {shown:>7}"


def decimals(iteration_s: float) -> int:
    """Decimals that show about three significant digits of the iteration time (at least 3, at most 6)."""
    if not iteration_s or not math.isfinite(iteration_s):
        return 3
    return min(6, max(3, 2 - math.floor(math.log10(abs(iteration_s)))))


def format_seconds(seconds: float) -> str:
    """An epoch's time or interval: three significant figures below two minutes (0.0656 s, not 0.1 s)."""
    if seconds < 120:
        return f"{seconds:.{decimals_for(seconds, 3)}f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
