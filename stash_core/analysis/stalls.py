"""Run times -> stall breakdown with confidence intervals (the telescoping differences of docs/profiling.md,
"The differential runs").

Runs form a chain; each stall is the difference between a run and the one before it:

    R0 (compute) -> R1 (interconnect) -> R1n (network) -> R3 (CPU) -> R2 (disk)

Only runs that apply to a setup are in its chain (no R1 for one worker, no R1n for one machine,
no R3/R2 without real data). The stalls of consecutive measured runs add up to the time of the
last run, the realistic iteration time.

What the named stalls cannot claim is kept in an explicit, signed remainder, `unattributed` (shown as
"not separated"), so that compute + interconnect + network + cpu + disk + unattributed = t2 exactly and
the shares add up to 100%. A breakdown written before the remainder existed gets it computed on the fly
(remainder_of, with_remainder).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stash_core.analysis.epochs import per_epoch
from stash_core.analysis.remainder_parts import ROUNDING_SHARE, parts_from_stalls
from stash_core.analysis.stats import (
    combination_by_round,
    launch_of_rounds,
    linear_combination_ci95,
    paired_rounds,
    pool_rounds,
    resolved,
)
from stash_core.units import STALLS, UNRESOLVED_NOTE, decimals_for, finite_float

# The signed remainder of a breakdown: t2 minus the named stalls. Its key in the breakdown, and its label.
REMAINDER = "unattributed"
REMAINDER_LABEL = "not separated"
REMAINDER_STATUSES = ("none", "within_noise", "not_separated")
RESOLVE_HINT = (
    "more iterations per run (--iterations N, or a smaller --target-ci), or a quieter machine "
    "(other load widens the intervals)"
)
_PART_TEXT = {
    # the stall's own line says 0: the difference it leaves here is named as the stall's, not as its figure
    "within_noise": "{what}'s difference {seconds} s (within the noise; {what} itself is reported as 0)",
    "gap": "{what} {seconds} s (a gap in the chain: the difference mixes several stalls)",
    "not_separable": "{what} {seconds} s (not separable)",
    "no_compute_run": "{what} {seconds} s (the first run measured, with no R0 to split it)",
    "no_compute_stored": "{seconds} s of the first run measured, with no R0 to split it",
    "other": "{seconds} s of runs that were not split into named stalls",
    "unusable": "{seconds} s not split into named stalls: {what}",
}
# Statuses of a stall that has a figure: one stored without it is not valid, as is a 'measured' one below 0.
WITH_FIGURE = ("measured", "clamped_zero", "negative")

STALL_OF_PHASE = {"R0": "compute", "R1": "interconnect", "R1n": "network", "R3": "cpu", "R2": "disk"}
PHASE_OF_STALL = {stall: phase for phase, stall in STALL_OF_PHASE.items()}
CHAIN = ("R0", "R1", "R1n", "R3", "R2")


@dataclass(frozen=True)
class PhaseTime:
    mean_s: float
    ci95_s: float


def applicable_chain(workers_total: int, nodes: int, real_data: bool) -> list[str]:
    """The runs that make sense for a setup, in chain order."""
    chain = ["R0"]
    if workers_total // max(nodes, 1) > 1 or nodes > 1:
        chain.append("R1")
    if nodes > 1:
        chain.append("R1n")
    if real_data:
        chain += ["R3", "R2"]
    return chain


def phases_for_stalls(requested: list[str], chain: list[str]) -> list[str]:
    """The runs needed to measure the requested stalls: each stall's run and the one before it."""
    needed: set[str] = set()
    for stall in requested:
        phase = PHASE_OF_STALL[stall]
        if phase not in chain:
            continue
        needed.add(phase)
        index = chain.index(phase)
        if index > 0:
            needed.add(chain[index - 1])
    return [p for p in chain if p in needed]


def breakdown(
    times: dict[str, PhaseTime],
    chain: list[str],
    iterations_per_epoch: int | None,
    not_separable: dict[str, str] | None = None,
    rounds: dict | None = None,
) -> dict:
    """Stalls per iteration and per epoch, with 95% intervals and shares of the last run's time.

    rounds: each run's (mean_s, ci95_s) per round when it was launched several times (a list from round 0,
    or a dict by round; `times` their pooled figures). A stall whose runs share their rounds takes its
    interval from its paired per-round differences (stats.pool_rounds); otherwise from its two runs'
    intervals in quadrature.

    The five named stalls and the signed remainder `unattributed` (see remainder_of) add up to the
    iteration time exactly, and their shares to 1. The remainder holds what no named stall can claim:
    a difference within the noise that is reported as 0, the difference across a gap in the chain (it
    mixes several stalls), and stalls that are not separable. `unattributed_s` and
    `unattributed_ci95_s` repeat its seconds and interval.
    """
    not_separable = not_separable or {}
    measured = [p for p in chain if p in times]
    if not measured:
        raise ValueError("no measured phase to break down")
    reference = measured[-1]
    reference_s = times[reference].mean_s
    warnings: list[str] = []
    if reference != chain[-1]:  # the stalls asked for, or an interrupted profile, stopped short of the job
        # R0 (one worker) below R1, or R1 (one machine) below R1n, runs fewer workers than the job: an epoch
        # of the job's iterations at its step is no epoch that ran.
        other_layout = (reference == "R0" and "R1" in chain) or (reference == "R1" and "R1n" in chain)
        iterations_per_epoch = None if other_layout else iterations_per_epoch
        warnings.append(
            f"the iteration time is {reference}'s: {chain[-1]}, the job as set up, was not timed (its "
            "stall not asked for, or the profile ended first), so the iteration and the shares are of "
            f"{reference}"
            + (f", and no epoch time is given ({reference} runs fewer workers)" if other_layout else "")
        )
    stalls: dict[str, dict] = {
        name: _stall(None, None, reference_s, iterations_per_epoch, "not_measured", "") for name in STALLS
    }
    terms: dict[str, dict[str, int]] = {}  # each stall with a figure, as a combination of run times
    parts: list[dict] = []  # what the remainder holds, one entry per source
    gap_s: dict[str, float] = {}  # a not-separable stall's difference, kept as its raw_s
    previous: str | None = None
    for phase in measured:
        name = STALL_OF_PHASE[phase]
        if previous is None and phase != "R0":
            parts.append(_part("no_compute_run", phase, times[phase].mean_s))
        elif previous is None:
            stalls[name] = _stall(
                times[phase].mean_s, times[phase].ci95_s, reference_s, iterations_per_epoch, "measured", ""
            )
            terms[name] = {phase: 1}
        elif chain.index(phase) - chain.index(previous) > 1:
            # A gap in the chain: the difference mixes several stalls, so attribute none of them; named as
            # the stalls it spans where all of them are not separable (as a stored run's remainder says it).
            spanned = [STALL_OF_PHASE[p] for p in chain[chain.index(previous) + 1 : chain.index(phase) + 1]]
            apart = all(name in not_separable for name in spanned)
            named = ("not_separable", " and ".join(spanned)) if apart else ("gap", f"{previous}->{phase}")
            parts.append(_part(*named, times[phase].mean_s - times[previous].mean_s))
            if apart:  # kept on the gap's last stall: a stored run's remainder names the parts again
                gap_s[spanned[-1]] = parts[-1]["seconds"]
        else:
            ci95_s = _combination_ci95({phase: 1, previous: -1}, times, rounds)
            stalls[name] = _difference(
                name, times[phase], times[previous], ci95_s, reference_s, iterations_per_epoch, warnings
            )
            terms[name] = {phase: 1, previous: -1}
        previous = phase
    for name, reason in not_separable.items():
        warnings = [w for w in warnings if not w.startswith(f"{name} stall ")]  # its figure is not one
        if name in terms:
            gap_s[name] = stalls[name]["raw_s"]
            parts.append(_part("not_separable", name, gap_s[name]))
            terms.pop(name)
        raw_s = gap_s.get(name)
        stalls[name] = _stall(None, None, reference_s, iterations_per_epoch, "not_separable", reason, raw_s)
    for reason in dict.fromkeys(not_separable.values()):  # stalls of one reason in one warning
        names = [name for name, said in not_separable.items() if said == reason]
        warnings.append(f"{' and '.join(names)} stall{'s' * (len(names) > 1)} not separable: {reason}")
    remainder = _closing_remainder(times, reference, stalls, terms, parts, iterations_per_epoch, rounds)
    return {
        "iteration_s": reference_s,
        "iteration_ci95_s": times[reference].ci95_s,
        "iterations_per_epoch": iterations_per_epoch,
        "epoch_s": per_epoch(reference_s, iterations_per_epoch),
        "epoch_ci95_s": per_epoch(times[reference].ci95_s, iterations_per_epoch),
        "reference_phase": reference,
        "unattributed_s": remainder["seconds"],
        "unattributed_ci95_s": remainder["ci95_s"],
        REMAINDER: remainder,
        "stalls": stalls,
        "warnings": warnings,
    }


def _closing_remainder(
    times: dict[str, PhaseTime],
    reference: str,
    stalls: dict[str, dict],
    terms: dict[str, dict[str, int]],
    parts: list[dict],
    iterations_per_epoch: int | None,
    rounds: dict | None = None,
) -> dict:
    """The remainder of a fresh breakdown: t2 minus the named stalls, its interval that of the same
    combination of run times (t2 minus each stall's runs: what is left has nonzero coefficients)."""
    coefficients: dict[str, int] = {reference: 1}
    for name, term in terms.items():
        if stalls[name]["status"] == "clamped_zero":
            parts.append(_part("within_noise", name, stalls[name]["raw_s"]))
            continue
        for phase, sign in term.items():
            coefficients[phase] = coefficients.get(phase, 0) - sign
    ci95_s = _combination_ci95(coefficients, times, rounds)
    reference_s = times[reference].mean_s
    named_s = math.fsum(s["seconds"] for s in stalls.values() if s["seconds"] is not None)
    remainder_s = reference_s - named_s if any(coefficients.values()) else 0.0
    return _remainder(remainder_s, ci95_s, reference_s, iterations_per_epoch, parts, estimated=False)


def _combination_ci95(
    coefficients: dict[str, int], times: dict[str, PhaseTime], rounds: dict | None
) -> float:
    """The 95% half-width of sum(c_k * t_k): from the paired rounds when every run in it has the same rounds,
    else from the runs' own intervals in quadrature (independent launches)."""
    used = [key for key, c in coefficients.items() if c]
    if not used:
        return 0.0
    paired = paired_rounds(rounds, used)
    if paired is not None:
        keys, figures = paired
        return pool_rounds(*combination_by_round(coefficients, figures), launch_of_rounds(keys)).ci95
    return linear_combination_ci95(coefficients, {p: t.ci95_s for p, t in times.items()})


def _difference(name: str, later: PhaseTime, earlier: PhaseTime, ci95_s: float, reference_s: float,
                iterations_per_epoch: int | None, warnings: list[str]) -> dict:  # fmt: skip
    seconds = later.mean_s - earlier.mean_s
    if seconds >= 0:  # one wider than its interval says so in the file, as its stored row does
        note = "" if stall_resolved({"seconds": seconds, "ci95_s": ci95_s}) is not False else UNRESOLVED_NOTE
        return _stall(seconds, ci95_s, reference_s, iterations_per_epoch, "measured", note)
    difference, spread = signed_seconds(seconds), signed_seconds(ci95_s, "")
    if -seconds <= ci95_s:
        note = (
            f"difference {difference} s is within the noise (± {spread} s): not resolved, reported as 0 and "
            f"kept in the remainder ({REMAINDER_LABEL})"
        )
        return _stall(0.0, ci95_s, reference_s, iterations_per_epoch, "clamped_zero", note, raw_s=seconds)
    note = f"negative beyond the noise: {difference} s ± {spread} s"
    warnings.append(
        f"{name} stall is {difference} s ± {spread} s: the later run was faster than the earlier one beyond "
        "the noise (interference from other load, or too few iterations)"
    )
    return _stall(seconds, ci95_s, reference_s, iterations_per_epoch, "negative", note)


def _stall(seconds: float | None, ci95_s: float | None, reference_s: float, iterations_per_epoch: int | None,
           status: str, note: str, raw_s: float | None = None) -> dict:  # fmt: skip
    share = seconds / reference_s if seconds is not None and reference_s > 0 else None
    epoch_s, epoch_ci95_s = (per_epoch(value, iterations_per_epoch) for value in (seconds, ci95_s))
    return {"seconds": seconds, "ci95_s": ci95_s, "share": share, "epoch_s": epoch_s,
            "epoch_ci95_s": epoch_ci95_s, "status": status, "note": note,
            "raw_s": seconds if raw_s is None else raw_s}  # fmt: skip


def signed_seconds(seconds: float, sign: str = "+") -> str:
    """Seconds at 4 decimals, or as many as show 2 significant figures of a smaller value (9 at most), signed
    unless `sign` is "": a remainder part of -34 us read "-0.0000 s"."""
    decimals = 4
    if seconds and math.isfinite(seconds) and abs(seconds) < 1e-3:
        decimals = min(9, decimals_for(seconds, 2))
    return f"{seconds:{sign}.{decimals}f}"


def _part(kind: str, what: str, seconds: float) -> dict:
    return {"kind": kind, "what": what, "seconds": seconds}


def _remainder(
    seconds: float,
    ci95_s: float | None,
    reference_s: float,
    iterations_per_epoch: int | None,
    parts: list[dict],
    estimated: bool,
) -> dict:
    """The remainder entry: like a stall's (seconds, ci95_s, share, epoch_s, status, note) plus its parts."""
    if seconds == 0.0 and not parts:
        status, note = "none", "the named stalls add up to the iteration time"
    else:
        status = "within_noise" if ci95_s is not None and abs(seconds) <= ci95_s else "not_separated"
        texts = [
            _PART_TEXT.get(part.get("kind"), _PART_TEXT["other"]).format(
                what=part.get("what"), seconds=signed_seconds(part.get("seconds") or 0.0)
            )
            for part in parts
        ]
        note = "iteration time minus the named stalls" + (": " + "; ".join(texts) if texts else "")
        if estimated:
            note += " (interval estimated: no interval was stored for the remainder)"
    entry = _stall(seconds, ci95_s, reference_s, iterations_per_epoch, status, note)
    entry.pop("raw_s")
    return {"label": REMAINDER_LABEL, **entry, "parts": parts, "estimated": estimated}


def remainder_of(breakdown: dict) -> dict | None:
    """The remainder of any breakdown, this version's or an older one's: t2 minus the named stalls.

    The seconds are always recomputed, so that the identity holds for whatever the stalls hold; the interval
    is the stored one (`unattributed.ci95_s`, or `unattributed_ci95_s` as the store gives it) or, for a
    result that predates it, estimated: the within-noise stalls' intervals in quadrature, or the iteration
    time's interval when nothing was clamped. None when the breakdown has no iteration time.
    """
    iteration_s = finite_float(breakdown.get("iteration_s"))
    if iteration_s is None:
        return None
    stalls = breakdown.get("stalls") or {}
    valid = [stalls.get(name) or {} for name in STALLS if not stall_fault(stalls.get(name))]
    named = [finite_float(entry.get("seconds")) for entry in valid]
    seconds = iteration_s - math.fsum(value for value in named if value is not None)
    if abs(seconds) <= ROUNDING_SHARE * abs(iteration_s):
        seconds = 0.0
    stored = breakdown.get(REMAINDER) if isinstance(breakdown.get(REMAINDER), dict) else {}
    ci95_s = finite_float(stored.get("ci95_s"))
    if ci95_s is None:
        ci95_s = finite_float(breakdown.get("unattributed_ci95_s"))
    parts = stored.get("parts") if isinstance(stored.get("parts"), list) else None
    estimated = seconds != 0.0 and (ci95_s is None or stored.get("estimated") is True)
    if ci95_s is None and estimated:
        ci95_s = _estimated_ci95(stalls, finite_float(breakdown.get("iteration_ci95_s")))
    if parts is None:  # a stored run's: the database keeps the stalls, not the parts
        parts = parts_from_stalls(stalls, seconds, stall_fault)
    per_epoch = breakdown.get("iterations_per_epoch")
    return _remainder(seconds, ci95_s if seconds != 0.0 else 0.0, iteration_s, per_epoch, parts, estimated)


def with_remainder(breakdown: dict) -> dict:
    """A copy of the breakdown whose `unattributed` entry, `unattributed_s` and `unattributed_ci95_s` are
    those of remainder_of (the breakdown itself is left alone)."""
    remainder = remainder_of(breakdown)
    if remainder is None:
        return dict(breakdown)
    return {
        **breakdown,
        REMAINDER: remainder,
        "unattributed_s": remainder["seconds"],
        "unattributed_ci95_s": remainder["ci95_s"],
    }


def stall_resolved(entry: dict | None) -> bool | None:
    """Whether a stall was resolved: False when it is within the noise, or its 95% interval is wider than its
    value or unknown (it could be zero); None when it has no figure (not measured, not separable)."""
    if not entry or finite_float(entry.get("seconds")) is None or stall_fault(entry):
        return None
    if entry.get("status") == "clamped_zero" or entry.get("status") == "within_noise":
        return False
    ci95_s = finite_float(entry.get("ci95_s"))
    if ci95_s is None:  # no spread known (one round and none of its own, infinite in memory, null in a
        return False  # result file): nothing says the stall is not zero
    return resolved(entry["seconds"], ci95_s)


def stall_fault(entry: dict | None) -> str | None:
    """What is wrong with a stored stall whose status says it has a figure: "has no value stored" (NULL or
    not a number), or that a 'measured' one is below 0 (a negative difference has status 'negative'); None
    for a valid one. Such a stall is no part of the named stalls: its time is in the remainder."""
    status = (entry or {}).get("status")
    seconds = finite_float((entry or {}).get("seconds"))
    if seconds is None:
        return "has no value stored" if status in WITH_FIGURE else None
    return (
        f"is stored as {signed_seconds(seconds)} s, not valid for 'measured'"
        if status == "measured" and seconds < 0
        else None
    )


def _estimated_ci95(stalls: dict, iteration_ci95_s: float | None) -> float | None:
    clamped = [finite_float(entry.get("ci95_s")) for entry in stalls.values()
               if isinstance(entry, dict) and entry.get("status") == "clamped_zero"]  # fmt: skip
    clamped = [ci for ci in clamped if ci is not None]
    return math.sqrt(math.fsum(ci**2 for ci in clamped)) if clamped else iteration_ci95_s
