"""The result document's shape as types: the keys a result file holds at its top, in each phase and in its
breakdown (docs/schema.md, "Result file", says what each means; results/doc.py renders that section).

results/file.py writes and reads documents of this shape; a test holds these keys and the documented ones
the same, and a real profile's file to them. check_ranges holds its figures to what a run can have.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

from stash_core.analysis.stalls import CHAIN, PHASE_OF_STALL, STALL_OF_PHASE, WITH_FIGURE
from stash_core.errors import UsageError
from stash_core.results.values import check_not_a_path
from stash_core.units import STALLS


class IterationStats(TypedDict):
    """Statistics of a run's iteration times, seconds."""

    mean: float
    ci95: float
    std: float
    median: float
    p5: float
    p95: float
    n: int


class Phase(TypedDict, total=False):
    """One run of the profile (R0, R1, R1n, R3, R2)."""

    name: str
    description: str
    workers: int
    workers_per_node: int
    nodes: int
    data: str  # synthetic, cached or cold
    status: str  # completed, failed, skipped or interrupted
    error: str | None
    resident_fraction_start: float | None
    warmup_iterations: int
    iterations: int
    iteration_s: IterationStats
    parts_mean_s: dict[str, float | None]  # data_s, forward_s, backward_s, optimizer_s
    samples: dict[str, list[float]]  # one value per kept iteration: the mean over the ranks
    rank_skew_s: float | None
    stop_reason: str
    wall_s: float
    started_s: float  # when its (first) launch started, seconds on the profile's clock
    machine_load: dict[str, Any] | None  # its (first) launch's load: wall_s, other_cpu_s, steal_s, cores
    telemetry: dict[str, Any]  # interval_s, gpu_status, t_s, metrics
    ranks: list[dict[str, Any]]  # several machines: each rank's own means
    launches_planned: int
    launches: list[dict[str, Any]]  # one per launch, in rounds
    paired_blocks: dict[str, Any]  # R0 and R1 timed in one launch: block_steps, groups, warmup_groups
    pooled: dict[str, Any]
    epoch_boundary_crossed: bool
    script: dict[str, Any]  # a script's run: what it found (batch size, threads, loader)
    stderr_tail: list[str]  # a failed script's last stderr lines, or a hung launch's ranks' stacks
    stdout_tail: list[str]  # a failed script's last stdout lines


class Stall(TypedDict, total=False):
    """One stall of the breakdown, seconds per iteration."""

    seconds: float | None
    ci95_s: float | None
    share: float | None
    epoch_s: float | None
    epoch_ci95_s: float | None  # ci95_s x iterations per epoch: the interval of epoch_s
    status: str  # measured, clamped_zero, negative, not_measured or not_separable
    note: str | None
    raw_s: float  # clamped_zero: the signed difference reported as 0


class Breakdown(TypedDict, total=False):
    """The stall breakdown: five stalls and the remainder, which add up to iteration_s."""

    iteration_s: float
    iteration_ci95_s: float
    iterations_per_epoch: int | None
    epoch_s: float | None
    epoch_ci95_s: float | None  # iteration_ci95_s x iterations_per_epoch: the interval of epoch_s
    reference_phase: str
    stalls: dict[str, Stall]  # compute, interconnect, network, cpu, disk
    unattributed: dict[str, Any]
    unattributed_s: float
    unattributed_ci95_s: float
    warnings: list[str]
    impossible: bool  # present with a warning on a breakdown: whether a stall came out physically impossible
    network_reference: str
    communication: dict[str, dict[str, Any]]  # per stall: the probe's figures against the stall


class ResultDocument(TypedDict, total=False):
    """A result file (or, with kind "stash-probe", a probe file: its probe set's keys at the top)."""

    schema_version: int
    kind: str
    run_id: str
    status: str  # completed, failed or interrupted
    error: str | None
    started_at: str
    finished_at: str | None
    stash_version: str
    spec: dict[str, Any]  # the run's configuration (ProfileSpec's fields, and a remote run's hosts)
    model: dict[str, Any] | None
    fingerprint: dict[str, Any]
    phases: list[Phase]
    breakdown: Breakdown | None
    probes: list[dict[str, Any]]
    hosts: list[dict[str, Any]]


TOP_KEYS = tuple(ResultDocument.__annotations__)


# Figures no run can have, refused when a result file is read (results/file.validate_result): a negative
# time in the breakdown or a phase, a phase of no workers, a fraction beyond 0..1, a sample shape or image
# size below one, and a run id that is a path rather than a name. NaN and null stay "unknown" and pass.
def check_ranges(doc: dict[str, Any]) -> None:
    """UsageError (one line, "result file: ...") for the first figure out of its range."""
    run_id = doc["run_id"]
    check_not_a_path("run_id", run_id)
    if run_id != run_id.strip():  # " r1" would be a second run that prints as "r1"
        raise UsageError(f"result file: run_id {run_id[:80]!r} starts or ends with a space")
    breakdown = doc.get("breakdown") or {}
    for key in ("iteration_s", "iteration_ci95_s", "epoch_s", "epoch_ci95_s"):
        _at_least(f"breakdown.{key}", breakdown.get(key), 0)
    iteration_s = breakdown.get("iteration_s")
    if doc.get("status") == "completed" and _number(iteration_s) and iteration_s == 0:
        # a completed run took time: a zero would be averaged into the run's instance as the fastest
        raise UsageError("result file: breakdown.iteration_s is 0 in a completed run; expected its time")
    _at_least("breakdown.unattributed_ci95_s", breakdown.get("unattributed_ci95_s"), 0)
    _at_least("breakdown.iterations_per_epoch", breakdown.get("iterations_per_epoch"), 1)  # at least 1 made
    warnings = breakdown.get("warnings")
    if isinstance(warnings, list) and not all(isinstance(warning, str) for warning in warnings):
        raise UsageError("result file: breakdown.warnings must be a list of text")
    for stall, entry in (breakdown.get("stalls") or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        for key in ("ci95_s", "epoch_ci95_s"):  # a half-width: never below zero
            _at_least(f"stall {stall} {key}", entry.get(key), 0)
        seconds = entry.get("seconds")
        if entry.get("status") in ("not_measured", "not_separable"):  # no figure: one would be stored as its
            for key in ("seconds", "share", "epoch_s", "ci95_s"):  # time, yet shown as not measured
                if _known(entry.get(key)):
                    raise UsageError(f"result file: stall {stall} is {entry['status']}, but its {key} is "
                                     f"{entry[key]!r}; a stall without a figure has none")  # fmt: skip
        if entry.get("status") == "measured" and _number(seconds) and seconds < 0:
            raise UsageError(
                f"result file: stall {stall} is measured at {seconds!r} s; a negative difference has status "
                "'negative'"
            )
    spec = doc["spec"]
    _check_number_fields(doc)
    stalls = spec.get("stalls")
    for stall in stalls if isinstance(stalls, list) else ():
        if stall not in STALLS:  # the runs a profile makes follow from these names
            raise UsageError(
                f"result file: spec.stalls holds {stall!r:.40}; expected some of {', '.join(STALLS)}"
            )
    for key in ("batch_size", "threads_per_worker", "image_px"):
        _at_least(f"spec.{key}", spec.get(key), 1)
    limit = spec.get("max_phase_s")
    if _number(limit) and limit <= 0:
        raise UsageError(f"result file: spec.max_phase_s is {limit!r}; expected a positive number of seconds")
    shape = spec.get("input_shape")
    for value in shape if isinstance(shape, list) else ():
        _at_least("spec.input_shape", value, 1)
    for phase in doc["phases"]:
        name = phase["name"]
        _at_least(f"phase {name} wall_s", phase.get("wall_s"), 0)
        for key in ("workers", "workers_per_node", "nodes"):
            _at_least(f"phase {name} {key}", phase.get(key), 1)
        if _known(_phase_mean(phase)):  # a mean time is of one iteration at least
            _at_least(f"phase {name} iterations", phase.get("iterations"), 1)
        for key, value in (phase.get("iteration_s") or {}).items():
            if key != "n":
                _at_least(f"phase {name} iteration_s.{key}", value, 0)
        _check_samples(name, phase)
        for key, value in (phase.get("parts_mean_s") or {}).items():
            _at_least(f"phase {name} parts_mean_s.{key}", value, 0)
        fraction = phase.get("resident_fraction_start")
        if _number(fraction) and not 0 <= fraction <= 1:
            raise UsageError(
                f"result file: phase {name} resident_fraction_start is {fraction!r}; expected 0 to 1"
            )
    _check_consistent(doc, breakdown)  # after the ranges: a negative time is said as such


# A run's figures the store keeps inside its spec and machine (the columns' own are checked as they are
# stored: store/ingest_values.py), read as numbers (what-if divides the memory): a number or null (NaN:
# unknown, as in the columns), never text, a list or an infinity; none below zero but the seed.
_NUMBER_FIELDS = {
    "spec": ("image_px", "threads_per_worker", "synthetic_images", "max_iterations", "max_phase_s",
             "target_relative_ci", "num_classes", "launches", "comm_timeout_s", "script_start_timeout_s",
             "disk_read_mbps", "seed"),
    "fingerprint": ("memory_bytes", "cpu_cores_logical", "cpu_cores_physical", "gpu_count"),
}  # fmt: skip


def _check_number_fields(doc: dict[str, Any]) -> None:
    for section, keys in _NUMBER_FIELDS.items():
        values = doc.get(section) if isinstance(doc.get(section), dict) else {}
        for key in keys:
            value = values.get(key)
            if value is None or (_number(value) and math.isnan(value)):
                continue
            if not _number(value) or math.isinf(value):
                raise UsageError(f"result file: {section}.{key} must be a number, got {value!r:.40}")
            if value < 0 and key != "seed":
                raise UsageError(f"result file: {section}.{key} is {value!r}; expected at least 0")


def _check_samples(name: str, phase: dict[str, Any]) -> None:
    """A phase's iteration count is its samples' (the engine summarises the samples it keeps), and its median
    one within them: a file whose figures say otherwise would store samples no figure of it was made of."""
    samples = (phase.get("samples") or {}).get("iteration_s")
    if not isinstance(samples, list) or not samples:
        return
    stats = phase.get("iteration_s") or {}
    for what, count in (("iterations", phase.get("iterations")), ("iteration_s.n", stats.get("n"))):
        if _number(count) and count != len(samples):
            raise UsageError(f"result file: phase {name} {what} is {count!r}, but it has {len(samples)} "
                             "iteration samples")  # fmt: skip
    median = stats.get("median")
    known = [value for value in samples if _known(value)]
    low, high = (min(known) * (1 - _ROUNDING), max(known) * (1 + _ROUNDING)) if known else (None, None)
    if _known(median) and known and not low <= median <= high:
        raise UsageError(f"result file: phase {name} iteration_s.median is {median!r} s, outside its "
                         f"samples' {min(known)!r} to {max(known)!r} s")  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at_least(what: str, value: Any, least: float) -> None:
    if _number(value) and value < least:  # NaN compares false: unknown, not refused
        raise UsageError(f"result file: {what} is {value!r}; expected at least {least:g}")


# How far a breakdown's figures may be from the ones they are made of: float rounding, not a measurement.
_ROUNDING = 1e-6


def _check_consistent(doc: dict[str, Any], breakdown: dict[str, Any]) -> None:
    """The iteration time is the reference phase's mean and the epoch that many iterations
    (analysis/stalls.breakdown makes them so); a file that says otherwise would be stored and shown with
    figures no run measured."""
    phases = {phase["name"]: phase for phase in doc["phases"]}
    _check_stalls_of_phases(phases, breakdown.get("stalls") or {})  # with or without an iteration time
    iteration_s = breakdown.get("iteration_s")
    reference = breakdown.get("reference_phase")
    known = isinstance(reference, str) and reference in phases
    mean = _phase_mean(phases[reference]) if known else None
    if not _known(iteration_s):  # unknown: stored as such, with no epoch or shares, where nothing was timed
        _check_unknown_iteration(iteration_s, breakdown, reference if _known(mean) else None, mean)
        return
    if not _known(mean):
        raise UsageError(
            f"result file: breakdown.reference_phase is {str(reference)[:40]!r}, not a timed run of this "
            f"run's phases ({', '.join(phases) or 'none'}); the iteration time is that run's mean"
        )
    if not _close(iteration_s, mean):
        raise UsageError(
            f"result file: breakdown.iteration_s is {iteration_s!r}, but its reference phase {reference} "
            f"has a mean of {mean!r} s"
        )
    per_epoch = breakdown.get("iterations_per_epoch")
    _check_epoch("breakdown.epoch_s", breakdown.get("epoch_s"), iteration_s, per_epoch)
    ci95_s = breakdown.get("iteration_ci95_s")
    if _known(ci95_s):
        _check_epoch("breakdown.epoch_ci95_s", breakdown.get("epoch_ci95_s"), ci95_s, per_epoch)
    for name, entry in (breakdown.get("stalls") or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        for key, per_iteration, said in (
            ("epoch_s", "seconds", "seconds are"),
            ("epoch_ci95_s", "ci95_s", "ci95_s is"),
        ):
            what, seconds, epoch_s = f"stall {name}'s {key}", entry.get(per_iteration), entry.get(key)
            if _known(seconds):
                _check_epoch(what, epoch_s, seconds, per_epoch)
            elif _known(epoch_s):
                raise UsageError(f"result file: {what} is {epoch_s!r}, but its {said} {seconds!r}")


def _check_unknown_iteration(
    iteration_s: Any, breakdown: dict[str, Any], reference: str | None, mean: Any
) -> None:
    """A breakdown without an iteration time is one of a run that timed nothing: a file that gives a timed
    reference phase, an interval or a stall's figure beside it would be shown as a breakdown of no
    iteration."""
    beside = None
    if reference is not None:
        beside = f"its reference phase {reference} has a mean of {mean!r} s"
    elif _known(breakdown.get("iteration_ci95_s")):
        beside = f"its iteration_ci95_s is {breakdown['iteration_ci95_s']!r} s"
    else:
        stalls = breakdown.get("stalls") if isinstance(breakdown.get("stalls"), dict) else {}
        timed = [name for name, entry in stalls.items()
                 if isinstance(entry, dict) and _known(entry.get("seconds"))]  # fmt: skip
        if timed:
            beside = f"stall {timed[0]} has {stalls[timed[0]]['seconds']!r} s"
    if beside:
        raise UsageError(f"result file: breakdown.iteration_s is {iteration_s!r:.40}, but {beside}")


def _check_stalls_of_phases(phases: dict[str, dict], stalls: dict[str, Any]) -> None:
    """A measured stall is its runs' difference (the compute stall R0's mean), each run the one before it in
    the chain that was timed (analysis/stalls.breakdown), and so is the raw difference of one within the
    noise (clamped_zero, reported as 0) or below zero; a file that says otherwise is refused."""
    means = {name: _phase_mean(phase) for name, phase in phases.items()}
    # the run's own chain: the runs it holds, timed or not (one that failed or was cut short is a gap)
    chain = [name for name in CHAIN if name in phases]
    timed = [name for name in chain if _known(means.get(name))]
    for stall, entry in stalls.items():  # a figure needs its run: a one-machine run has no network stall
        status = entry.get("status") if isinstance(entry, dict) else None
        run = PHASE_OF_STALL.get(stall)
        if status in WITH_FIGURE and run not in timed:
            why = (f"its run {run} has no mean time (iteration_s.mean {means[run]!r})" if run in phases
                   else f"its run {run} is not a timed phase of this run")  # fmt: skip
            raise UsageError(f"result file: stall {stall} is {status}, but {why}")
    for index, name in enumerate(timed):
        entry = stalls.get(STALL_OF_PHASE[name])
        entry = entry if isinstance(entry, dict) else {}
        status = entry.get("status")
        if status == "clamped_zero" and _known(entry.get("seconds")) and entry["seconds"] != 0:
            raise UsageError(
                f"result file: stall {STALL_OF_PHASE[name]} is within the noise (clamped_zero), reported as "
                f"0, but its seconds are {entry['seconds']!r}"
            )
        if status not in WITH_FIGURE:
            continue
        keys = ("seconds", "raw_s") if status == "measured" else ("raw_s",)  # else seconds are 0 or raw
        figures = [(key, entry[key]) for key in keys if _known(entry.get(key))]
        if index == 0:
            if name != "R0":
                continue  # no compute run: the first timed run's time is in the remainder
            expected, made_of = means[name], f"phase R0's mean, {means[name]!r} s"
        else:
            before = timed[index - 1]
            if chain.index(name) - chain.index(before) > 1:
                continue  # a gap in the chain: no stall is measured across it
            expected = means[name] - means[before]
            made_of = f"phase {name}'s mean minus {before}'s, {expected!r} s"
        if status == "measured" and not _known(entry.get("seconds")):
            # stored as no value beside runs that have one, and left out of every fit without a word
            raise UsageError(
                f"result file: stall {STALL_OF_PHASE[name]} is measured but its seconds are "
                f"{entry.get('seconds')!r}; it is {made_of}"
            )
        for key, seconds in figures:
            # rounding relative to the runs' times: a difference near zero is as exact as the times it is of
            if abs(seconds - expected) > _ROUNDING * max(abs(seconds), means[name], 1e-9):
                said = "is measured at" if key == "seconds" else "has a raw difference of"
                raise UsageError(
                    f"result file: stall {STALL_OF_PHASE[name]} {said} {seconds!r} s, but it is {made_of}"
                )


def _phase_mean(phase: Any) -> Any:
    times = phase.get("iteration_s") if isinstance(phase, dict) else None
    return times.get("mean") if isinstance(times, dict) else None


def _check_epoch(what: str, epoch_s: Any, seconds: float, per_epoch: Any) -> None:
    """An epoch is its iterations times one iteration's seconds; without the iterations there is none."""
    if not _known(epoch_s):
        return
    if not _known(per_epoch):
        raise UsageError(
            f"result file: {what} is {epoch_s!r}, but breakdown.iterations_per_epoch is "
            f"{per_epoch!r}; an epoch time needs the iterations of an epoch"
        )
    if not _close(epoch_s, seconds * per_epoch):
        raise UsageError(
            f"result file: {what} is {epoch_s!r}, but {per_epoch!r} iterations of "
            f"{seconds!r} s take {seconds * per_epoch!r} s"
        )


def _known(value: Any) -> bool:
    return _number(value) and value == value  # NaN: unknown


def _close(value: float, expected: float) -> bool:
    return abs(value - expected) <= _ROUNDING * max(abs(value), abs(expected), 1e-9)
