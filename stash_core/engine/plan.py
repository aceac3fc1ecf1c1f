"""Plan the differential runs of a profile: which runs, with how many workers and which data."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from stash_core.analysis.stalls import PHASE_OF_STALL, applicable_chain, phases_for_stalls
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec
from stash_core.units import STALLS

# Launches per run with --iterations auto when --launches is not given: the first rounds, which always run.
# Three rounds in the order forward, reverse, forward: linear drift of the machine cancels over the first two
# rounds and what the third leaves in a stall (a third of one round's drift) is well inside the spread that
# drift puts between the paired rounds. One launch per run with a fixed --iterations N, as before.
DEFAULT_LAUNCHES = 3
# With --iterations auto, rounds go on past the first --launches ones while a run's pooled interval is short
# of --target-ci, up to this many times --launches (and within the time budget, engine/launches.py).
MAX_ROUNDS_FACTOR = 4

DESCRIPTIONS = {
    "R0": "1 worker, synthetic data on the device",
    "R1": "{w} on one machine, synthetic data on the device",
    "R1n": "{w} over {n} machines, synthetic data on the device",
    "R3": "{w}, real data cached in memory",
    "R2": "{w}, real data read cold from disk",
}
# A script's real-data runs without --data-dir: its own data, in whatever page-cache state it is
OWN_DATA = {"R3": "{w}, the script's own data (first of the two)", "R2": "{w}, the script's own data"}


@dataclass(frozen=True)
class PhasePlan:
    name: str
    workers_per_node: int
    nodes: int
    data: str  # synthetic | cached | cold
    cache_set: bool = True  # the page-cache state of the data is set (not for a script without --data-dir)

    @property
    def workers(self) -> int:
        return self.workers_per_node * self.nodes

    @property
    def description(self) -> str:
        workers = f"{self.workers} worker{'s' if self.workers != 1 else ''}"  # R2 and R3 of a 1-worker job
        said = DESCRIPTIONS if self.cache_set or self.name not in OWN_DATA else OWN_DATA
        return said[self.name].format(w=workers, n=self.nodes)

    def to_dict(self) -> dict:
        fields = {key: value for key, value in asdict(self).items() if key != "cache_set"}  # said, not kept
        return {**fields, "workers": self.workers, "description": self.description}


def plan_phases(spec: ProfileSpec, reference_workers: int | None = None) -> tuple[list[str], list[PhasePlan]]:
    """The applicable chain of runs and the runs needed for the requested stalls, in order.

    reference_workers: how many workers the single-machine reference R1 gets when the profile spans
    several machines (all of them when the first machine can hold them, else one machine's worth).
    With one, R1 would repeat R0, so it is left out and R0 is the network figure's reference.
    """
    chain = applicable_chain(spec.workers_total, spec.nodes, spec.real_data)
    if spec.nodes > 1 and reference_workers == 1:
        chain = [name for name in chain if name != "R1"]
    names = phases_for_stalls(spec.stalls, chain)
    return chain, [phase_plan(name, spec, reference_workers) for name in names]


def phase_plan(name: str, spec: ProfileSpec, reference_workers: int | None = None) -> PhasePlan:
    if name == "R0":
        return PhasePlan(name, 1, 1, "synthetic")
    if name == "R1":
        # The single-machine reference: all workers on one machine (or as many as it holds).
        return PhasePlan(name, reference_workers or spec.workers_total, 1, "synthetic")
    if name == "R1n":
        return PhasePlan(name, spec.workers_per_node, spec.nodes, "synthetic")
    data = "cached" if name == "R3" else "cold"
    cache_set = not (spec.script and not spec.data_dir)  # no files to make resident or evict
    return PhasePlan(name, spec.workers_per_node, spec.nodes, data, cache_set)


def launches_of(spec: ProfileSpec) -> int:
    """How many launches each run gets: --launches, else DEFAULT_LAUNCHES with --iterations auto and 1 with
    a fixed --iterations N."""
    if spec.launches is not None:
        return spec.launches
    return DEFAULT_LAUNCHES if spec.fixed_iterations is None else 1


def max_rounds_of(spec: ProfileSpec, launches: int) -> int:
    """The most rounds a profile may run: with --iterations auto and several launches, rounds continue past
    the first `launches` while a run is short of its target (a sequential rule); else exactly `launches`."""
    if spec.fixed_iterations is not None or launches == 1:
        return launches
    return min(MAX_ROUNDS_FACTOR * launches, 100)


def round_runs(plans: list[PhasePlan], round_index: int) -> list[PhasePlan]:
    """The runs of one round in launch order: the even rounds in chain order, the odd ones reversed."""
    return list(plans) if round_index % 2 == 0 else list(reversed(plans))


def round_order(plans: list[PhasePlan], launches: int) -> list[tuple[int, PhasePlan]]:
    """(round, run) in launch order: every run once per round, the even rounds in chain order and the odd
    ones reversed (R0 R1 R3 R2, R2 R3 R1 R0, R0 R1 R3 R2, ...). A run's slots then add up to the same total
    over any two consecutive rounds, so a drift linear in time hits every run alike and leaves the paired
    per-round differences of the stalls unbiased over each pair of rounds."""
    return [(round_index, plan) for round_index in range(launches) for plan in round_runs(plans, round_index)]


def launch_spec(spec: ProfileSpec, launches: int) -> ProfileSpec:
    """The spec of one launch of K: the run's iteration budget and time cap split over its first K launches.

    The target stays --target-ci: each launch runs until its own interval reaches it, and the rounds then
    show whether the launches agree (the interval over K rounds uses Student's t with K - 1 degrees of
    freedom, so launches that each stop at target / sqrt(K) would leave the pooled interval short of it
    even on a quiet machine; rounds, not longer launches, narrow the launch-to-launch part)."""
    if launches == 1:
        return spec
    fixed = spec.fixed_iterations
    return replace(
        spec,
        iterations="auto" if fixed is None else str(max(2, math.ceil(fixed / launches))),
        max_iterations=max(2, math.ceil(spec.max_iterations / launches)),
        max_phase_s=spec.max_phase_s / launches,
    )


# What a stall's run needs of the setup, said when a --stalls list asks for one the setup cannot measure.
STALL_NEEDS = {
    "interconnect": "--workers 2 or more",
    "network": "--nodes 2 or more",
    "cpu": "real data (--dataset DIR or --synthetic-images N)",
    "disk": "real data (--dataset DIR or --synthetic-images N)",
}


def check_disk_cap(spec: ProfileSpec) -> None:
    """--disk-read-mbps caps what the cold run reads from disk: refused where the profile has no cold run
    (no real data, or --stalls without disk), where it would be stored and never applied."""
    if spec.disk_read_mbps is None:
        return
    if not any(plan.data == "cold" for plan in plan_phases(spec)[1]):
        raise UsageError(
            "--disk-read-mbps caps the disk reads of the cold run, and this profile has none: it needs real "
            "data (--dataset DIR or --synthetic-images N) and the disk stall"
        )


def check_measurable(spec: ProfileSpec) -> None:
    """A --stalls list that names a stall this setup has no run for: one line, before anything is launched
    or kept (the default, every stall, measures what the setup can)."""
    if set(spec.stalls) >= set(STALLS):
        return
    chain = plan_phases(spec)[0]
    missing = [stall for stall in dict.fromkeys(spec.stalls) if PHASE_OF_STALL[stall] not in chain]
    if missing:
        needs = "; ".join(f"{stall} needs {STALL_NEEDS[stall]}" for stall in missing)
        raise UsageError(f"--stalls {','.join(missing)}: not measurable in this setup: {needs}")
    if spec.script and not spec.data_dir and "disk" in spec.stalls and "cpu" not in spec.stalls:
        # known before any run, as the above: with cpu, the two are measured as one input-pipeline stall
        raise UsageError(
            "--stalls disk: not separable for a script without --data-dir: Stash cannot set the page-cache "
            "state of the files it reads, so CPU and disk are one input-pipeline stall (ask for cpu too, or "
            "give --data-dir DIR, the folder the script reads)"
        )


def refuse_nothing_to_run(spec: ProfileSpec, plans: list[PhasePlan]) -> None:
    """UsageError where the hosts took away the only run the --stalls asked for (a first machine of one
    worker has no R1): a run of nothing is no profile, and was stored as completed."""
    if not plans:
        raise UsageError(
            f"--stalls {','.join(spec.stalls)}: nothing to measure on these hosts: the first machine holds "
            "one worker, so the interconnect has no run of its own (give it more cores or GPUs, or ask for "
            "the network stall too)"
        )
