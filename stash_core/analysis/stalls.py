"""Run times -> stall breakdown with confidence intervals (the telescoping differences of DESIGN.md).

Runs form a chain; each stall is the difference between a run and the one before it:

    R0 (compute) -> R1 (interconnect) -> R1n (network) -> R3 (CPU) -> R2 (disk)

Only runs that apply to a setup are in its chain (no R1 for one worker, no R1n for one machine,
no R3/R2 without real data). The stalls of consecutive measured runs add up to the time of the
last run, the realistic iteration time.
"""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.analysis.stats import difference_ci95
from stash_core.units import STALLS

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
) -> dict:
    """Stalls per iteration and per epoch, with 95% intervals and shares of the last run's time."""
    not_separable = not_separable or {}
    measured = [p for p in chain if p in times]
    if not measured:
        raise ValueError("no measured phase to break down")
    reference = measured[-1]
    reference_s = times[reference].mean_s
    warnings: list[str] = []
    stalls: dict[str, dict] = {
        name: _stall(None, None, reference_s, iterations_per_epoch, "not_measured", "") for name in STALLS
    }
    unattributed_s = 0.0
    previous: str | None = None
    for phase in measured:
        name = STALL_OF_PHASE[phase]
        if previous is None:
            if phase != "R0":
                unattributed_s += times[phase].mean_s
            else:
                stalls[name] = _stall(
                    times[phase].mean_s,
                    times[phase].ci95_s,
                    reference_s,
                    iterations_per_epoch,
                    "measured",
                    "",
                )
        elif chain.index(phase) - chain.index(previous) > 1:
            # A gap in the chain: the difference mixes several stalls, so attribute none of them.
            unattributed_s += times[phase].mean_s - times[previous].mean_s
        else:
            stalls[name] = _difference(
                name, times[phase], times[previous], reference_s, iterations_per_epoch, warnings
            )
        previous = phase
    for name, reason in not_separable.items():
        stalls[name] = _stall(None, None, reference_s, iterations_per_epoch, "not_separable", reason)
        warnings.append(f"{name} stall not separable: {reason}")
    return {
        "iteration_s": reference_s,
        "iteration_ci95_s": times[reference].ci95_s,
        "iterations_per_epoch": iterations_per_epoch,
        "epoch_s": reference_s * iterations_per_epoch if iterations_per_epoch else None,
        "reference_phase": reference,
        "unattributed_s": unattributed_s,
        "stalls": stalls,
        "warnings": warnings,
    }


def _difference(
    name: str,
    later: PhaseTime,
    earlier: PhaseTime,
    reference_s: float,
    iterations_per_epoch: int | None,
    warnings: list[str],
) -> dict:
    seconds = later.mean_s - earlier.mean_s
    ci95_s = difference_ci95(later.ci95_s, earlier.ci95_s)
    if seconds >= 0:
        return _stall(seconds, ci95_s, reference_s, iterations_per_epoch, "measured", "")
    if -seconds <= ci95_s:
        note = f"difference {seconds:+.4f} s is within the noise (± {ci95_s:.4f} s); reported as 0"
        return _stall(0.0, ci95_s, reference_s, iterations_per_epoch, "clamped_zero", note, raw_s=seconds)
    note = f"negative beyond the noise: {seconds:+.4f} s ± {ci95_s:.4f} s"
    warnings.append(
        f"{name} stall is {seconds:+.4f} s ± {ci95_s:.4f} s: the later run was faster than the earlier one "
        "beyond the noise (interference from other load, or too few iterations)"
    )
    return _stall(seconds, ci95_s, reference_s, iterations_per_epoch, "negative", note)


def _stall(
    seconds: float | None,
    ci95_s: float | None,
    reference_s: float,
    iterations_per_epoch: int | None,
    status: str,
    note: str,
    raw_s: float | None = None,
) -> dict:
    share = seconds / reference_s if seconds is not None and reference_s > 0 else None
    epoch_s = seconds * iterations_per_epoch if seconds is not None and iterations_per_epoch else None
    return {
        "seconds": seconds,
        "ci95_s": ci95_s,
        "share": share,
        "epoch_s": epoch_s,
        "status": status,
        "note": note,
        "raw_s": seconds if raw_s is None else raw_s,
    }
