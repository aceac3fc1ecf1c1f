"""What a reader must know of a profile's pooled runs, said as warnings: a stall short of its target with what
would narrow it, other load on the machine, a script that ended its loop, runs that read different batches of
an epoch (from the runs' records as launches.LaunchedRuns.pool_into leaves them)."""

from __future__ import annotations

from stash_core.analysis.advice import SCRIPT_ENDED_WORDS
from stash_core.engine.launches import ROUNDS_BY_COUNT, ROUNDS_BY_TIME
from stash_core.engine.spread_cause import OTHER_LOAD_MEAN_CORES, SCRIPT_ENDED, spread_cause


def pooled_warnings(
    records: list[dict],
    target_relative_ci: float,
    fixed: bool,
    max_phase_s: float,
    launches: int,
    stopped_by: str | None = None,
    shortfalls: list | None = None,
    threads_per_worker: int | None = None,
) -> list[str]:
    """What a reader must know of the pooled runs: a stall (or the iteration time) short of its target, with
    the rounds it would still need, what the measurements say of why and what to do (engine/rounds.py
    Shortfall); and a profile that ended before all its planned rounds."""
    warnings: list[str] = []
    completed = [r for r in records if r.get("status") == "completed" and r.get("launches")]
    by_name = {record["name"]: record for record in completed}
    more_time = f"more time (--max-phase-seconds, now {max_phase_s:g} s per run)"
    why = {
        ROUNDS_BY_TIME: f"the rounds stopped at the time budget: {more_time} allows more rounds of launches",
        ROUNDS_BY_COUNT: "the rounds stopped at their cap",
    }.get(stopped_by or "", "more launches (--launches) would narrow it")
    for shortfall in [] if fixed else shortfalls or []:
        cause = spread_cause([by_name[run] for run in shortfall.runs if run in by_name], threads_per_worker)
        text = shortfall.text(target_relative_ci)
        capped = [run for run in shortfall.runs if run in by_name and any(
            launch.get("stop_reason") == "max_iterations"
            for launch in by_name[run]["launches"])]  # fmt: skip
        said = "iteration cap" in cause  # spread_cause names it already: only what to raise
        stopped = "" if said else f"{' and '.join(capped)} stopped at --max-iterations with time left: "
        cap = f"; {stopped}a larger --max-iterations would narrow it" if capped else ""
        ended = cause.startswith("the script ended by itself")  # more time or rounds would not have helped
        more = "" if ended else f"; {why}"
        warnings.append(f"{text}: {cause}{cap}{more}; or accept a wider --target-ci")
    warnings.extend(filter(None, (script_end_warning(record) for record in completed)))
    rounds = {launch["round"] for record in completed for launch in record["launches"] if launch["pooled"]}
    if completed and len(rounds) < launches:
        warnings.append(
            f"intervals from {len(rounds)} of {launches} rounds of launches: the profile ended before the "
            "others"
        )
    if completed and launches == 1:
        warnings.append(ONE_LAUNCH)
    warnings.extend(filter(None, (overrun_warning(record, max_phase_s) for record in completed)))
    said = any("other load on the machine" in warning for warning in warnings)
    load = None if said else load_warning([launch for record in completed for launch in record["launches"]])
    return warnings + ([load] if load else [])


# A launch's iterations share where its processes landed and the machine's state then: launches of one run
# differ by more than its interval within one launch says (docs/profiling.md, the README's example measured).
ONE_LAUNCH = (
    "intervals from one launch of each run: they hold the spread of its iterations, not what separate "
    "launches differ by; --launches 3 measures that too"
)
OVERRUN_FACTOR = 2.0  # a run past twice its time, and by more than OVERRUN_S, is said
OVERRUN_S = 10.0


def overrun_warning(record: dict, max_phase_s: float) -> str | None:
    """A run that took far longer than --max-phase-seconds, said with why: each launch starts up first and
    looks at its clock only after its first 10 iterations, which slow ones make long (a run of 43 s
    under a cap of 10 s was said as "now 10 s per run" alone)."""
    wall_s = record.get("wall_s") or 0.0
    if wall_s <= OVERRUN_FACTOR * max_phase_s or wall_s - max_phase_s <= OVERRUN_S:
        return None
    mean_s = (record.get("iteration_s") or {}).get("mean")
    each = f" ({mean_s:.2g} s each here)" if isinstance(mean_s, int | float) else ""
    launches = len(record.get("launches") or []) or 1
    return (
        f"{record['name']} ran {wall_s:.0f} s in {launches} launch(es), over --max-phase-seconds "
        f"{max_phase_s:g}: each launch starts up first (its processes, imports and the job's own setup) "
        f"and looks at its clock only after its first 10 iterations{each}; a larger --max-phase-seconds "
        "(or fewer --launches) is a cap it can keep"
    )


def load_warning(launches: list[dict]) -> str | None:
    """Other load measured during the launches, said even where every target was met: the figures then hold
    its competition for the cores (the multi-worker runs' most), not the job alone."""
    loads = [launch["other_cores"] for launch in launches if launch.get("other_cores") is not None]
    if not loads or sum(loads) / len(loads) < OTHER_LOAD_MEAN_CORES:
        return None
    mean_cores = sum(loads) / len(loads)
    return (
        f"other load on the machine: other processes kept {mean_cores:.2f} cores busy on average during the "
        f"launches (up to {max(loads):.2f}); the figures hold their competition for the cores (the runs with "
        "more workers the most), so a quieter machine would measure the job alone"
    )


def script_end_warning(record: dict) -> str | None:
    """A run of a user's script whose launches ended because the script did: it is said, with what to do."""
    launches = record.get("launches") or []
    ended = [launch for launch in launches if launch.get("stop_reason") == SCRIPT_ENDED]
    if not ended:
        return None
    # Optimizer steps, as phases[].script.optimizer_steps counts them: the first step starts the clock.
    steps = max(launch["iterations"] + launch["warmup_iterations"] for launch in ended) + 1
    script = record.get("script") or {}
    after = script.get("other_steps_after") or 0
    alone = ""
    processes = (record.get("workers") or 1) * (record.get("nodes") or 1)
    if script.get("ranks_gathered") is False and processes > 1:
        alone = (
            "; Stash could not gather the other ranks at its end (it ended its process group, or left "
            "through os._exit, or stepped again after the last check of the ranks): the steps after that "
            "check, and the split of every step, are rank 0's own times, not the slowest rank's, and the "
            "rank skew is not measured"
        )
    if after > 1:  # the script trained on with another optimizer while keeping the timed one
        return (
            f"{record['name']}: the optimizer timed stopped stepping after {steps} steps, but the script "
            f"went on stepping another one ({after} steps after it, to its end): it makes a new optimizer "
            "and keeps the old one, so its launches timed only the first one's steps; let the old optimizer "
            "go (no list or other reference holding it) and Stash times its successor"
        )
    return (
        f"{record['name']}: {SCRIPT_ENDED_WORDS} in {len(ended)} of its {len(launches)} launches "
        f"(after {steps} steps at most), so those launches timed only the steps it had; to let each run go "
        f"on to its target or --max-phase-seconds, give the script more to do (more epochs or steps after --)"
        f"{alone}"
    )


def epoch_boundary_warning(records: list[dict], iterations_per_epoch: int | None) -> str | None:
    """Mark each real-data run with whether one of its launches ran past an epoch's end (the loader's restart
    and reshuffle are then in its figures); a warning when a real-data run never did."""
    missed, script_ended = [], True
    for record in records:
        if record.get("data") == "synthetic" or not record.get("launches") or not iterations_per_epoch:
            continue
        longest = max(launch["iterations"] + launch["warmup_iterations"] for launch in record["launches"])
        record["epoch_boundary_crossed"] = longest > iterations_per_epoch
        if not record["epoch_boundary_crossed"]:
            missed.append((record["name"], longest))
            script_ended &= any(launch.get("stop_reason") == SCRIPT_ENDED for launch in record["launches"])
    if not missed:
        return None
    runs = ", ".join(f"{name} (longest launch {longest} iterations)" for name, longest in missed)
    # a script that ended by itself before an epoch's end: more iterations per launch are not Stash's to give
    remedy = (
        "the script ended before it (see its warning): more for it to do (more epochs or steps after --)"
        if script_ended else "a smaller data set or more iterations per launch"
    )  # fmt: skip
    return (
        f"no launch of {runs} ran past an epoch's end ({iterations_per_epoch} iterations per epoch): the "
        f"cost at the start of each epoch (loader restart, reshuffle) is not in these figures; {remedy} "
        "would include it"
    )
