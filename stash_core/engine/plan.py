"""Plan the differential runs of a profile: which runs, with how many workers and which data."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from stash_core.analysis.stalls import applicable_chain, phases_for_stalls
from stash_core.spec import ProfileSpec

DESCRIPTIONS = {
    "R0": "1 worker, synthetic data on the device",
    "R1": "{w} workers on one machine, synthetic data on the device",
    "R1n": "{w} workers over {n} machines, synthetic data on the device",
    "R3": "{w} workers, real data cached in memory",
    "R2": "{w} workers, real data read cold from disk",
}


@dataclass(frozen=True)
class PhasePlan:
    name: str
    workers_per_node: int
    nodes: int
    data: str  # synthetic | cached | cold

    @property
    def workers(self) -> int:
        return self.workers_per_node * self.nodes

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.name].format(w=self.workers, n=self.nodes)

    def to_dict(self) -> dict:
        return {**asdict(self), "workers": self.workers, "description": self.description}


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
    return PhasePlan(name, spec.workers_per_node, spec.nodes, data)
