"""A GPU cluster's shape and free GPUs, and the placements a job can get on it.

Nodes hold `gpus_per_node` GPUs; consecutive groups of `nodes_per_switch` nodes share a switch. A placement
is a map node -> GPUs. Its locality level says what its gradients cross beyond the job's tightest
placement (its fewest nodes, min_nodes, on its fewest switches, min_switches):
  "node"   - min_nodes nodes on min_switches switches (one node and one switch when it fits): no added
             stall beyond what the job has at its smallest footprint
  "switch" - more nodes than that, still on min_switches switches: the job's network stall
  "any"    - more switches than min_switches: the network stall made worse by the shared uplinks
A job bigger than one switch is thus charged only for the switches it crosses beyond those it must.

The free GPUs are indexed per node, per switch and in all, so that the question "can a job of g GPUs be
placed at this level" costs a few list operations, not a walk over every node.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

LEVELS = ("node", "switch", "any")
MAX_SWITCH_SETS = 2000  # sets of switches a job bigger than a switch is tried on, per placement


@dataclass
class Cluster:
    switches: int
    nodes_per_switch: int
    gpus_per_node: int
    free: list[int] = field(default_factory=list)  # free GPUs per node
    switch_free: list[int] = field(init=False, default_factory=list)  # free GPUs per switch
    total_free: int = field(init=False, default=0)
    # free count -> the nodes with exactly that many GPUs free: the best fit and the emptiest nodes are
    # found without scanning every node (kept by take and give_back)
    nodes_with: list[set[int]] = field(init=False, default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if min(self.switches, self.nodes_per_switch, self.gpus_per_node) < 1:
            raise ValueError("a cluster needs at least one switch, node and GPU")
        if not self.free:
            self.free = [self.gpus_per_node] * (self.switches * self.nodes_per_switch)
        if len(self.free) != self.switches * self.nodes_per_switch:
            raise ValueError("give one free count per node")
        per = self.nodes_per_switch
        self.switch_free = [sum(self.free[s * per : (s + 1) * per]) for s in range(self.switches)]
        self.total_free = sum(self.free)
        if max(self.free) > self.gpus_per_node or min(self.free) < 0:
            raise ValueError("a node's free GPUs must be from 0 to gpus_per_node")
        self.nodes_with = [set() for _ in range(self.gpus_per_node + 1)]
        for node, have in enumerate(self.free):
            self.nodes_with[have].add(node)

    def empty_copy(self) -> Cluster:
        return Cluster(self.switches, self.nodes_per_switch, self.gpus_per_node)

    @property
    def total_gpus(self) -> int:
        return self.switches * self.nodes_per_switch * self.gpus_per_node

    @property
    def switch_gpus(self) -> int:
        return self.nodes_per_switch * self.gpus_per_node

    def switch_of(self, node: int) -> int:
        return node // self.nodes_per_switch

    def min_nodes(self, gpus: int) -> int:
        return math.ceil(gpus / self.gpus_per_node)

    def min_switches(self, gpus: int) -> int:
        return math.ceil(gpus / self.switch_gpus)

    def take(self, placement: dict[int, int]) -> None:
        free, nodes_with, per = self.free, self.nodes_with, self.nodes_per_switch
        for node, count in placement.items():
            have = free[node]
            assert have >= count, "placement over a node's free GPUs"
            free[node] = have - count
            nodes_with[have].discard(node)
            nodes_with[have - count].add(node)
            self.switch_free[node // per] -= count
            self.total_free -= count

    def give_back(self, placement: dict[int, int]) -> None:
        free, nodes_with, per = self.free, self.nodes_with, self.nodes_per_switch
        for node, count in placement.items():
            have = free[node]
            free[node] = have + count
            nodes_with[have].discard(node)
            nodes_with[have + count].add(node)
            self.switch_free[node // per] += count
            self.total_free += count

    def switches_of(self, placement: dict[int, int]) -> set[int]:
        return {node // self.nodes_per_switch for node in placement}

    def level_of(self, placement: dict[int, int], gpus: int) -> str:
        if len(placement) == 1:  # one node: its tightest placement, whatever the job's size
            return "node"
        if len(self.switches_of(placement)) > self.min_switches(gpus):
            return "any"
        return "node" if len(placement) <= self.min_nodes(gpus) else "switch"

    def place(self, gpus: int, level: str) -> dict[int, int] | None:
        """The tightest placement at `level` or better, or None when the free GPUs do not allow one."""
        if gpus > self.total_free:
            return None
        for allowed in LEVELS[: LEVELS.index(level) + 1]:
            placement = self._place_at(gpus, allowed)
            if placement is not None:
                return placement
        return None

    def _place_at(self, gpus: int, level: str) -> dict[int, int] | None:
        if level == "any":
            return self._emptiest_first(gpus)
        if gpus > self.switch_gpus:
            return self._place_big(gpus, level)
        if level == "node" and gpus <= self.gpus_per_node:
            # best fit over the whole cluster: the node with the fewest free GPUs that still holds the job
            # (the first such node), keeping the emptier nodes for bigger jobs
            nodes_with = self.nodes_with
            for have in range(gpus, self.gpus_per_node + 1):
                if nodes_with[have]:
                    return {min(nodes_with[have]): gpus}
            return None
        best = None
        per = self.nodes_per_switch
        for switch, switch_free in enumerate(self.switch_free):
            if switch_free < gpus:
                continue
            nodes = range(switch * per, (switch + 1) * per)
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

    def _emptiest_first(self, gpus: int) -> dict[int, int] | None:
        """_fill over every node, emptiest first (ties by node number), without sorting every node: the
        nodes of each free count, most first, from `nodes_with`."""
        if gpus > self.total_free:
            return None
        placement, needed = {}, gpus
        for have in range(self.gpus_per_node, 0, -1):
            nodes = self.nodes_with[have]
            if not nodes:
                continue
            if have >= needed:  # the first of them completes the job
                placement[min(nodes)] = needed
                return placement
            for node in sorted(nodes):
                taken = have if have < needed else needed
                placement[node] = taken
                needed -= taken
                if not needed:
                    return placement
        return None  # pragma: no cover - total_free said there were enough

    def _place_big(self, gpus: int, level: str) -> dict[int, int] | None:
        """A job bigger than a switch on its fewest switches, or None: the tightest placement over every set
        of that many switches (emptiest first, at most MAX_SWITCH_SETS sets: exact on clusters whose sets
        number fewer, e.g. 3 of 16 switches, 560 sets)."""
        wanted = self.min_switches(gpus)
        order = sorted(
            (s for s in range(self.switches) if self.switch_free[s]), key=lambda s: (-self.switch_free[s], s)
        )
        per = self.nodes_per_switch
        best = None
        for switches in itertools.islice(itertools.combinations(order, wanted), MAX_SWITCH_SETS):
            if sum(self.switch_free[s] for s in switches) < gpus:
                continue
            nodes = [n for s in switches for n in range(s * per, (s + 1) * per)]
            placement = _fill(sorted(nodes, key=lambda n: (-self.free[n], n)), self.free, gpus)
            if placement is not None and (best is None or _tighter(placement, best, self.free)):
                best = placement
                if len(best) == self.min_nodes(gpus):
                    break  # the fewest nodes there can be; emptiest switches first keep big holes least
        if best is None or (level == "node" and len(best) > self.min_nodes(gpus)):
            return None
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
