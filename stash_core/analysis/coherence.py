"""Whether a differential breakdown is physically possible, and what to say when it is not.

The stalls are differences of runs that must do the same work per process: R1 adds workers to R0, so it
cannot be faster per iteration than R0; R3 adds loading to R1, so it cannot be faster than R1. A run faster
than the one before it beyond the noise, a stall larger than the whole iteration, or a share above 100%
means the runs did different work per process. The usual cause is a script whose work per process depends
on the world size: threads (torch.set_num_threads(os.cpu_count() // WORLD_SIZE)), batch size per process
(a global batch divided by the world size) or data sharding. Pure functions: the caller passes the runs.
"""

from __future__ import annotations

import math

from stash_core.analysis.stalls import STALL_OF_PHASE
from stash_core.analysis.stats import run_difference
from stash_core.units import finite_float, format_time

# The prefix of the warning, so that pages and commands can find it among the breakdown's warnings.
IMPOSSIBLE = "impossible differential run"
DIFFERENT_WORK = "runs not comparable"
# ...and of a profile on the emulated cluster whose links changed as it ran: its network figures mix two links
LINKS_CHANGED = "the emulated cluster's links changed while it ran"
WHAT_TO_DO = (
    "make each process do the same work whatever the world size (a fixed torch.set_num_threads and batch "
    "size per process, the same data per process) and profile again; until then these stalls are not a "
    "breakdown of the iteration"
)
# A share beyond this is more than the whole iteration (float rounding aside).
_SHARE_LIMIT = 1.0 + 1e-9
# Why a script's stall is not separable where two of its runs did the same work (the engine says them): a
# script without a DataLoader gives Stash no loading to swap for synthetic data (its R3 runs as its R1, and
# so does its R2 where no data folder is evicted), and a cold run over a data folder the script never opened
# reads what the cached one read
NO_LOADER = (
    "the script iterates no torch DataLoader, so its data loading cannot be told apart from its compute"
)
UNREAD_DATA_DIR = "the script opened no file under"


def per_process_differences(runs: dict[str, dict]) -> list[str]:
    """What differed per process between the runs, as measured in the workers: threads, batch size.

    runs: run name -> {"workers": int, "threads": int | None, "batch_size": int | None}.
    """
    found = []
    for key, label in (("threads", "torch threads per process"), ("batch_size", "batch size per process")):
        values = {name: run.get(key) for name, run in runs.items() if run.get(key) is not None}
        if len(set(values.values())) > 1:
            found.append(f"{label} " + ", ".join(f"{name} {value}" for name, value in values.items()))
    return found


def faster_pairs(
    times: dict[str, tuple[float, float]], chain: list[str], stalls: dict[str, dict] | None = None
) -> list[tuple[str, str, float]]:
    """(earlier, later, the difference's ci95_s) of the chain's runs where the later one, which does more, is
    faster beyond the noise. `stalls`: the breakdown's, whose difference and interval (paired by round where
    the runs shared rounds) decide for the stall a pair is, so that this verdict is the stall's own. A pair
    that ran the same work (_same_work) is not judged: the later one does no more, and their difference is
    the launches' noise."""
    measured = [name for name in chain if name in times]
    pairs = []
    for earlier, later in zip(measured, measured[1:], strict=False):
        if _same_work(earlier, later, stalls or {}):
            continue
        seconds, ci95_s = _difference(times, earlier, later, stalls)
        if seconds < 0 and -seconds > ci95_s:
            pairs.append((earlier, later, ci95_s))
    return pairs


def _same_work(earlier: str, later: str, stalls: dict[str, dict]) -> bool:
    """Whether two runs did the same work, by why the later one's stall is not separable: R3 of a script
    without a DataLoader, its R2 after a synthetic run (no data folder to evict), and R2 after R3 over a data
    folder the script never opened. Every other reason (no --data-dir for a script that has a DataLoader, a
    data set too large for memory) leaves R2 with more to do than the run before it."""
    entry = stalls.get(STALL_OF_PHASE.get(later, "")) or {}
    if entry.get("status") != "not_separable":
        return False
    note = str(entry.get("note") or "")
    if later == "R3":
        return note == NO_LOADER
    return later == "R2" and (note.startswith(UNREAD_DATA_DIR) or (note == NO_LOADER and earlier != "R3"))


def _difference(
    times: dict[str, tuple[float, float]], earlier: str, later: str, stalls: dict[str, dict] | None
) -> tuple[float, float]:
    """later - earlier and its interval: the breakdown's stall of the pair where it has a figure, else the two
    runs' intervals combined."""
    entry = (stalls or {}).get(STALL_OF_PHASE.get(later, "")) or {}
    if entry.get("status") in ("measured", "clamped_zero", "negative"):
        raw_s = finite_float(entry.get("raw_s", entry.get("seconds")))
        ci95_s = finite_float(entry.get("ci95_s"))
        if raw_s is not None and ci95_s is not None:
            return raw_s, ci95_s
    return run_difference(times[later], times[earlier])


def load_cause(quiet_load: str = "") -> str:
    """Other load as the cause of an impossible breakdown, unless it was measured and small (`quiet_load`, the
    load in words): then the launches or the work are the causes left."""
    if quiet_load:
        return (f"not other load ({quiet_load}): the runs' launches disagreed (too few, or too short), or "
                "the work in them differed")  # fmt: skip
    return "other load on the machine slowed one of them"


def to_do(quiet_load: str = "") -> str:
    if quiet_load:
        return "profile again with more rounds of launches (--launches) or longer ones (--max-phase-seconds)"
    return LOAD_TO_DO


def same_world(runs: dict[str, dict], quiet_load: str = "") -> str:
    """Where every run ran the same workers (a one-worker profile), a cause other than the world size."""
    workers = {run.get("workers") for run in runs.values()}
    if len(workers) != 1 or None in workers:
        return ""
    disagreed = "" if quiet_load else ", or its launches disagreed"
    return (f"every run ran the same {workers.pop()} worker(s), so the world size is not the cause: "
            f"{load_cause(quiet_load)}{disagreed}")  # fmt: skip


def same_processes_cause(
    times: dict[str, tuple], chain: list[str], runs: dict[str, dict], stalls: dict[str, dict] | None = None,
    quiet_load: str = "",
) -> str:
    """Where every run faster than the one before it runs the same workers (R2 after R3), a cause other than
    the world size; '' otherwise. runs: run name -> {"workers": int | None, ...}; stalls: the breakdown's;
    quiet_load: the other load measured, in words, where it was too small to be the cause."""
    pairs = [(a, b) for a, b, _ in faster_pairs(times, chain, stalls)]
    workers = {name: (runs.get(name) or {}).get("workers") for pair in pairs for name in pair}
    if not pairs or any(workers[a] is None or workers[a] != workers[b] for a, b in pairs):
        return ""
    named = "; ".join(f"{a} and {b} run the same {workers[a]} worker(s)" for a, b in pairs)
    # named where R2's launches found data cached (its warning says so) or could not tell
    cache = ("R3", "R2") in pairs and (runs.get("R2") or {}).get("started_cached") is not False
    why = "R2's data was still in the page cache when it read it (see its warning), or " if cache else ""
    return f"{named}, so the world size is not the cause: {why}{load_cause(quiet_load)}"


def impossible_findings(
    breakdown: dict, times: dict[str, tuple[float, float]], chain: list[str]
) -> list[str]:
    """What makes a breakdown physically impossible, one phrase each (empty when it is possible).

    times: run name -> (mean_s, ci95_s) of the runs measured, in `chain` order.
    """
    findings = []
    for earlier, later, ci95_s in faster_pairs(times, chain, breakdown.get("stalls")):
        findings.append(
            f"{earlier} took {format_time(times[earlier][0])} per iteration and {later} "
            f"{format_time(times[later][0])}: {later} does more than {earlier} and cannot be faster beyond "
            f"the noise (± {format_time(ci95_s)})"
        )
    findings += share_findings(breakdown)
    return findings


def share_findings(breakdown: dict) -> list[str]:
    """Stalls (and the signed remainder) whose share of the iteration is beyond 100% either way by more than
    the noise: their seconds beyond the iteration's by more than the two intervals (in quadrature). Within
    them, a compute of 104% is a remainder of -4% within the noise, as every other difference is."""
    found = []
    stalls = dict(breakdown.get("stalls") or {})
    remainder = breakdown.get("unattributed")
    if isinstance(remainder, dict):
        stalls["not separated"] = remainder
    iteration_ci95_s = _finite(breakdown.get("iteration_ci95_s")) or 0.0
    for name, entry in stalls.items():
        entry = entry or {}
        share = _finite(entry.get("share"))
        if share is None or abs(share) <= _SHARE_LIMIT:
            continue
        seconds, ci95_s = _finite(entry.get("seconds")), _finite(entry.get("ci95_s"))
        if seconds is not None and ci95_s is not None and share:
            whole_s = _finite(breakdown.get("iteration_s")) or abs(seconds / share)
            if abs(seconds) - whole_s <= math.hypot(ci95_s, iteration_ci95_s):
                continue  # beyond the whole by less than the noise
        found.append(f"{name} is {share:.0%} of the iteration")
    return found


LOAD_TO_DO = (
    "profile again when the machine is quiet (nothing else running), or with more rounds of launches "
    "(--launches) so that one disturbed launch weighs less; the code needs no change"
)


def impossible_warning(
    findings: list[str], per_process: list[str], same_work: str = "", same_processes: str = "",
    quiet_load: str = "",
) -> str | None:
    """The one warning line for an impossible breakdown: what, the likely cause, what to do. Runs that did
    different work per process are warned about even when their differences look possible: each stall
    then mixes that change with what it names. `same_work`: what was measured the same in every run's
    processes (threads, batch size); then the work did not change and other load is the likely cause."""
    if not findings and not per_process:
        return None
    if per_process:
        cause = "the runs did different work per process: " + "; ".join(per_process)
    elif same_processes and findings:
        return f"{IMPOSSIBLE}: {'; '.join(findings)}. Cause: {same_processes}. To do: {to_do(quiet_load)}"
    elif same_work:
        likely = load_cause(quiet_load) if quiet_load else (
            "most likely other load on the machine slowed one run, or its launches disagreed"
        )
        return (
            f"{IMPOSSIBLE}: {'; '.join(findings)}. Cause: the work per process was the same in every run "
            f"({same_work} in each run's processes), so {likely}. To do: {to_do(quiet_load)}"
        )
    else:
        cause = (
            "likely work per process that depends on the world size (threads, batch size per process, data "
            "sharding), or other load on the machine during one run"
        )
    if not findings:
        return f"{DIFFERENT_WORK}: {cause}. To do: {WHAT_TO_DO}"
    return f"{IMPOSSIBLE}: {'; '.join(findings)}. Cause: {cause}. To do: {WHAT_TO_DO}"


def same_work(runs: dict[str, dict]) -> str:
    """'threads 1, batch size 16' when every run measured both and they agree; '' otherwise."""
    if not runs:
        return ""
    parts = []
    for key, label in (("threads", "threads"), ("batch_size", "batch size")):
        values = {run.get(key) for run in runs.values()}
        if None in values or len(values) != 1:
            return ""
        parts.append(f"{label} {values.pop()}")
    return ", ".join(parts)


def impossible_of_stored(
    warnings: list | None, stalls: list[dict] | dict | None, iteration: dict | None = None
) -> str | None:
    """For a stored run: its impossible-run warning, or one made from shares beyond 100% (a run stored
    before the check existed), beyond the noise of the stall and of the iteration time (`iteration`: a
    dict with iteration_s and iteration_ci95_s, as the profile judged it: without the iteration's interval
    a CPU stall of 141% within it was called impossible, though the profile had not). None for a possible
    breakdown."""
    for warning in warnings or []:
        if str(warning).startswith((IMPOSSIBLE, DIFFERENT_WORK)):
            return str(warning)
    entries = stalls if isinstance(stalls, dict) else {s.get("stall"): s for s in stalls or []}
    figures = {key: (iteration or {}).get(key) for key in ("iteration_s", "iteration_ci95_s")}
    findings = share_findings({"stalls": entries, **figures})
    return impossible_warning(findings, [])


def _finite(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
