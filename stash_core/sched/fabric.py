"""Congestion: the links a spread job's gradients cross, shared with whoever else crosses them now.

Each node has an uplink to its switch (`node_gbps`), each switch an uplink to the core (`uplink_gbps`, or
nodes_per_switch x node_gbps / oversubscription). A job on one node crosses no link. A job spread over
nodes crosses the uplinks of its nodes, and when it spans switches also the uplinks of its switches.

Model (documented, not measured): in every iteration each job on a link sends its gradient bytes; the
link carries all of them back to back, so a job's communication on link l takes
(sum of the gradient bytes of the jobs on l) / bandwidth(l). Its measured network stall (slowdown - 1)
is the one it has alone on its node uplinks, bytes / node_gbps, so on the slowest of its links

    stretch = max over its links of node_gbps x (bytes on the link) / (bandwidth of the link x its bytes)
    slowdown = 1 + (slowdown alone - 1) x stretch

for a placement looser than the job's tightest one. The tightest placement of a job bigger than a node
(whose run time already holds its own communication) pays only the stretch beyond what it has alone:
1 + (slowdown alone - 1) x (stretch - stretch alone). Slowdowns change whenever a job starts or ends on a
shared link; the simulator then re-times the jobs on those links.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stash_core.errors import UsageError

# fp32 gradient bytes per iteration of common models: 4 x published parameter counts (the zoo's counts
# for resnet and bert_base); a trace's grad_bytes column wins; others get DEFAULT_GRAD_BYTES.
GRAD_BYTES = {
    "resnet50": 4 * 25_557_032, "resnet18": 4 * 11_689_512, "alexnet": 4 * 61_100_840,
    "shufflenet": 4 * 2_278_604, "vgg16": 4 * 138_357_544, "bert_base": 4 * 109_483_778,
}  # fmt: skip
DEFAULT_GRAD_BYTES = 4 * 25_557_032


def grad_bytes_of(model: str | None) -> float:
    if model:
        for key, value in GRAD_BYTES.items():
            if model.lower().startswith(key):
                return float(value)
    return float(DEFAULT_GRAD_BYTES)


MIN_GBPS, MAX_GBPS = 0.001, 1e6  # 1 Mbit/s to a million Gbit/s


@dataclass(frozen=True)
class Fabric:
    node_gbps: float
    uplink_gbps: float

    def __post_init__(self) -> None:
        for name, value in (("node", self.node_gbps), ("uplink", self.uplink_gbps)):
            # Bounded: at 1e-300 Gbit/s a transfer never ends and the simulation never does either.
            if not (math.isfinite(value) and MIN_GBPS <= value <= MAX_GBPS):
                raise UsageError(
                    f"{name} bandwidth must be from {MIN_GBPS:g} to {MAX_GBPS:g} Gbit/s, got {value:g}"
                )

    @classmethod
    def oversubscribed(cls, node_gbps: float, ratio: float, nodes_per_switch: int) -> Fabric:
        """A switch uplink of nodes_per_switch x node_gbps / ratio (ratio 1: a non-blocking fabric)."""
        if not (math.isfinite(ratio) and ratio > 0):
            raise UsageError(f"oversubscription must be a positive number, got {ratio}")
        return cls(node_gbps, nodes_per_switch * node_gbps / ratio)

    def label(self) -> str:
        return f"node uplinks {self.node_gbps:g} Gbit/s, switch uplinks {self.uplink_gbps:g} Gbit/s"


def links_of(placement: dict[int, int], nodes_per_switch: int) -> list[int]:
    """The links a placement's gradients cross: node uplinks when spread, switch uplinks across switches.
    A link is a number: node n's uplink is n, switch s's uplink is -1 - s."""
    if len(placement) < 2:
        return []
    links = list(placement)
    switches = {node // nodes_per_switch for node in placement}
    if len(switches) > 1:
        links += [-1 - switch for switch in sorted(switches)]
    return links


class Links:
    """Who is on each link now, and the stretch of a job's communication on its slowest one.

    Each link keeps its load over its bandwidth, so a job's stretch costs one max over its own links."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.load: dict[int, float] = {}  # link -> gradient bytes of the jobs on it
        self.ratio: dict[int, float] = {}  # link -> load / bandwidth
        self.users: dict[int, set[int]] = {}

    def bandwidth(self, link: int) -> float:
        return self.fabric.node_gbps if link >= 0 else self.fabric.uplink_gbps

    def add(self, index: int, links: list[int], grad_bytes: float) -> None:
        for link in links:
            load = self.load[link] = self.load.get(link, 0.0) + grad_bytes
            self.ratio[link] = load / self.bandwidth(link)
            self.users.setdefault(link, set()).add(index)

    def remove(self, index: int, links: list[int], grad_bytes: float) -> None:
        for link in links:
            load = self.load[link] = self.load[link] - grad_bytes
            self.ratio[link] = load / self.bandwidth(link)
            self.users[link].discard(index)
            if not self.users[link]:
                del self.users[link], self.load[link], self.ratio[link]

    def neighbours(self, links: list[int]) -> set[int]:
        return set().union(*(self.users.get(link, ()) for link in links)) if links else set()

    def stretch(self, links: list[int], grad_bytes: float, alone: bool = False) -> float:
        if not links:
            return 0.0
        if alone:
            return self.fabric.node_gbps / min(self.bandwidth(link) for link in links)
        ratio = self.ratio
        return self.fabric.node_gbps * max([ratio[link] for link in links]) / grad_bytes
