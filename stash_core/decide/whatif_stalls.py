"""A stored run's stall figures as the what-if answers read them: which are valid, which are hidden already,
and the one line said where a question has no answer."""

from __future__ import annotations

from typing import Any

from stash_core.analysis.stalls import stall_fault
from stash_core.analysis.stats import resolved
from stash_core.units import finite_float

NOISE_SHARE = 0.02  # a stall below 2% of the iteration (or its CI) counts as already hidden
DEFAULT_TARGET_SHARE = 0.05  # the network stall whatif aims for, a share of the rest of the iteration
# The smallest share asked for: below it the bandwidth asked grows past any link (1e-300 asked for 1e299
# Gbit/s), and the stall is already far below what a profile resolves
MIN_TARGET_SHARE = 0.001


def checked_figure(entry: dict[str, Any]) -> dict[str, Any]:
    """A stored stall, marked "invalid" where its figure is no valid one (an inf or NaN, a negative
    "measured"; a hand-edited or damaged row), as `stash show` and the breakdown view set it aside."""
    if stall_fault(entry) is None:  # the rule `stash show` and the store apply
        return entry
    stored = entry.get("seconds")
    note = "stored without a figure" if stored is None else f"stored as {stored!r}, not a valid figure"
    return {**entry, "status": "invalid", "note": note}


def why_not(entry: dict[str, Any], stall: str, has_phases: bool, phases: str) -> str:
    """Why a stall's question has no answer: a stall that could not be separated says why (a script without
    --data-dir runs no cached phase: its missing R3 is not the reason), else the runs missing, else its
    status (negative)."""
    status, note = entry.get("status"), entry.get("note") or ""
    if status == "not_separable":
        return f"not separable: {note}"
    if not has_phases:
        return f"not measured: the run has no {phases}"
    if status == "negative":
        return f"not answered: the {stall} stall came out {note}, so the runs measured none to hide"
    if status == "invalid":
        return f"not answered: the {stall} stall is {note}"
    return f"not measured: the run did not measure the {stall} stall"


def unanswered(status: str) -> dict[str, Any]:
    return {"status": status, "predicted_iteration_s": None, "summary": status}


def seconds_of(entry: dict | None) -> float | None:
    return finite_float(entry.get("seconds")) if entry else None


def phase_times(run: dict[str, Any]) -> tuple[dict[str, dict], dict[str, float]]:
    """The run's completed phases by name, and their mean iteration seconds."""
    phases = {p["phase"]: p for p in run.get("phases") or [] if p.get("status") == "completed"}
    return phases, {
        name: mean for name, p in phases.items() if (mean := finite_float(p.get("mean_s"))) is not None
    }


SYNTHETIC_RUNS = ("R1n", "R1", "R0")  # the step with the data ready: the one nearest to R3 first


def synthetic_step_s(times: dict[str, float]) -> float | None:
    """The step with the data ready: the synthetic-data run nearest to R3 (R1n, R1, else R0)."""
    return next((times[name] for name in SYNTHETIC_RUNS if times.get(name)), None)


def unresolved_step(phases: dict[str, dict], times: dict[str, float]) -> str | None:
    """'R0 0.00063 s ± 0.0018 s' where the step with the data ready (synthetic_step_s's run) is within its
    noise: a core count worked out over it tells nothing; None where it is resolved, or its interval is not
    known."""
    for name in SYNTHETIC_RUNS:
        if times.get(name):
            ci95_s = finite_float((phases.get(name) or {}).get("ci95_s"))
            resolved_ = ci95_s is None or ci95_s < times[name]
            return None if resolved_ else f"{name} {times[name]:.4g} s ± {ci95_s:.2g} s"
    return None


def step_noise_answer(base: dict[str, Any], step: str) -> dict[str, Any]:
    """The CPU answer where the step with the data ready (unresolved_step's words) is within its noise."""
    unknown = dict.fromkeys(("cores_per_worker_needed", "predicted_iteration_s"))
    said = (f"the step with the data ready ({step}) is within its noise: the cores that would hide the CPU "
            "stall cannot be told (a smaller --target-ci resolves it)")  # fmt: skip
    return {**base, **unknown, "predictions": [], "status": "within the noise", "summary": said}


def within_noise(entry: dict[str, Any], reference_s: float, raw_s: float = 0.0) -> bool:
    """A stall that tells nothing, neither hidden nor a size: measured with an interval wider than itself,
    or clamped to 0 with an interval that reaches past the share counted as hidden (raw_s: the difference
    of its runs before the clamp)."""
    status, ci95_s = entry.get("status"), entry.get("ci95_s")
    if status == "measured":
        return not resolved(entry.get("seconds") or 0.0, ci95_s)
    return status == "clamped_zero" and (ci95_s is None or raw_s + ci95_s > NOISE_SHARE * reference_s)


def hidden(stall_s: float, entry: dict[str, Any], reference_s: float) -> bool:
    ci = entry.get("ci95_s") or 0.0
    return stall_s <= max(ci, NOISE_SHARE * reference_s)
