"""A GPU cluster's shape and free GPUs, and the placements a job can get on it.

Nodes hold `gpus_per_node` GPUs; consecutive groups of `nodes_per_switch` nodes share a switch. A placement
is a map node -> GPUs. Its locality level says what its gradients cross:
  "node"   - the fewest nodes the job can use (one node when it fits), under one switch: no added stall
             beyond what the job has at its smallest footprint
  "switch" - more nodes than that, all under one switch: the job's network stall
  "any"    - nodes under several switches: the network stall made worse by the shared uplinks
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

LEVELS = ("node", "switch", "any")


@dataclass
class Cluster:
    switches: int
    nodes_per_switch: int
    gpus_per_node: int
    free: list[int] = field(default_factory=list)  # free GPUs per node

    def __post_init__(self) -> None:
        if min(self.switches, self.nodes_per_switch, self.gpus_per_node) < 1:
            raise ValueError("a cluster needs at least one switch, node and GPU")
        if not self.free:
            self.free = [self.gpus_per_node] * (self.switches * self.nodes_per_switch)

    @property
    def total_gpus(self) -> int:
        return self.switches * self.nodes_per_switch * self.gpus_per_node

    def switch_of(self, node: int) -> int:
        return node // self.nodes_per_switch

    def min_nodes(self, gpus: int) -> int:
        return math.ceil(gpus / self.gpus_per_node)

    def take(self, placement: dict[int, int]) -> None:
        for node, count in placement.items():
            assert self.free[node] >= count, "placement over a node's free GPUs"
            self.free[node] -= count

    def give_back(self, placement: dict[int, int]) -> None:
        for node, count in placement.items():
            self.free[node] += count

    def level_of(self, placement: dict[int, int], gpus: int) -> str:
        if len({self.switch_of(node) for node in placement}) > 1:
            return "any"
        return "node" if len(placement) <= self.min_nodes(gpus) else "switch"

    def place(self, gpus: int, level: str) -> dict[int, int] | None:
        """The tightest placement at `level` or better, or None when the free GPUs do not allow one."""
        if gpus > sum(self.free):
            return None
        for allowed in LEVELS[: LEVELS.index(level) + 1]:
            placement = self._place_at(gpus, allowed)
            if placement is not None:
                return placement
        return None

    def _place_at(self, gpus: int, level: str) -> dict[int, int] | None:
        if level == "any":
            return _fill(sorted(range(len(self.free)), key=lambda n: -self.free[n]), self.free, gpus)
        best = None
        for switch in range(self.switches):
            nodes = range(switch * self.nodes_per_switch, (switch + 1) * self.nodes_per_switch)
            fits = [n for n in nodes if self.free[n] >= gpus]
            if fits:  # best fit: the node with the fewest free GPUs that still holds the job
                candidate = {min(fits, key=lambda n: (self.free[n], n)): gpus}
            else:
                candidate = _fill(sorted(nodes, key=lambda n: -self.free[n]), self.free, gpus)
            if candidate is None:
                continue
            if level == "node" and len(candidate) > self.min_nodes(gpus):
                continue
            if best is None or _tighter(candidate, best, self.free):
                best = candidate
        return best


def _fill(order: list[int], free: list[int], gpus: int) -> dict[int, int] | None:
    """Take GPUs from nodes in `order` (emptiest first) until the job has them all."""
    placement, needed = {}, gpus
    for node in order:
        if needed == 0:
            break
        if free[node] > 0:
            taken = min(free[node], needed)
            placement[node] = taken
            needed -= taken
    return placement if needed == 0 else None


def _tighter(a: dict[int, int], b: dict[int, int], free: list[int]) -> bool:
    """Fewer nodes first, then less free space on the nodes used (keeps big holes for big jobs)."""
    return (len(a), sum(free[n] for n in a)) < (len(b), sum(free[n] for n in b))
