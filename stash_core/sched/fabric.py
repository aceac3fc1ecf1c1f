"""The network: links of stated bandwidth, shared max-min fairly by the jobs whose gradients cross them.

Links. Each node has an uplink to its switch (`node_gbps`), each switch an uplink to the core
(`uplink_gbps`, or nodes_per_switch x node_gbps / oversubscription). A job on one node crosses no link. A
job spread over nodes crosses the uplinks of its nodes, and when it spans switches also the uplinks of its
switches. A ring all-reduce over n GPUs sends 2(n-1)/n x its gradient bytes through every link of the ring,
so every link a job crosses carries its whole ring volume (fabric model, documented, not measured).

Sharing. Every job on links is one flow that wants all the bandwidth it can get; flows share links max-min
fairly (water-filling, `max_min_rates`): all flows' rates rise together, a link that fills up fixes the
rates of the flows on it at its fair share, and the others keep rising on the bandwidth left. A job alone
on a link of B Gbit/s gets B; k equal jobs get B/k; a small job beside big ones gets the same share as
they do, so its communication is at most k times longer than alone. When jobs start and end, the flows
connected to the links whose users changed are re-filled, or every flow once they reach a switch uplink;
only the flows whose rate moved are reported: those a change did not reach get their rates again to the
bit (`Links`, links.py), and a change that leaves as many flows on every set of links as before is not
re-filled at all. A fill's results do not depend on the order sets and dicts hold flows in: the flows a
bottleneck fixes are taken off each link in one subtraction.

Iteration. A job's iteration = compute + communication not overlapped with backward:

    t_iter(rate) = t_c + max(0, ring_gbit / rate - overlap_s),   ring_gbit = 2(n-1)/n x grad_bytes x 8 / 1e9

where t_c is its consolidated iteration (the trace's duration / iterations) and rate the Gbit/s it gets.
The trace's `network_slowdown` s is read at the reference bandwidth `reference_gbps` (a stated assumption
of the trace, `--reference-gbps`): spread alone on links of that speed, t_iter = s x t_c. So:
  - with an iteration count: overlap_s = max(0, ring_gbit / reference_gbps - (s - 1) x t_c) (what of the
    communication backward hides); if the bytes explain less than the slowdown, the volume is scaled up to
    match it (latency and protocol costs counted as bytes);
  - without: no overlap, and t_c = ring_gbit / reference_gbps / (s - 1), i.e. slowdown(rate) =
    1 + (s - 1) x reference_gbps / rate.
A job at its tightest placement that still crosses links (bigger than a node) already has its
communication alone on its links in its duration: it pays only the difference its share makes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from stash_core.errors import UsageError

# fp32 gradient bytes per iteration of common models: 4 x published parameter counts (the zoo's counts
# for resnet and bert_base); a trace's grad_bytes column wins; others get DEFAULT_GRAD_BYTES.
GRAD_BYTES = {
    "resnet50": 4 * 25_557_032, "resnet18": 4 * 11_689_512, "alexnet": 4 * 61_100_840,
    "shufflenet": 4 * 2_278_604, "vgg16": 4 * 138_357_544, "bert_base": 4 * 109_483_778,
    "bert_large": 4 * 335_141_888, "gpt2": 4 * 124_439_808, "inception_v3": 4 * 27_161_264,
}  # fmt: skip
DEFAULT_GRAD_BYTES = 4 * 25_557_032
REFERENCE_GBPS = 10.0  # the bandwidth a trace's network_slowdown is read at, unless --reference-gbps says


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
    reference_gbps: float = REFERENCE_GBPS

    def __post_init__(self) -> None:
        for name, value in (("node", self.node_gbps), ("uplink", self.uplink_gbps),
                            ("reference", self.reference_gbps)):  # fmt: skip
            # Bounded: at 1e-300 Gbit/s a transfer never ends and the simulation never does either.
            if not (math.isfinite(value) and MIN_GBPS <= value <= MAX_GBPS):
                raise UsageError(
                    f"{name} bandwidth must be from {MIN_GBPS:g} to {MAX_GBPS:g} Gbit/s, got {value:g}"
                )

    @classmethod
    def oversubscribed(
        cls, node_gbps: float, ratio: float, nodes_per_switch: int, reference_gbps: float = REFERENCE_GBPS
    ) -> Fabric:
        """A switch uplink of nodes_per_switch x node_gbps / ratio (ratio 1: a non-blocking fabric)."""
        if not (math.isfinite(ratio) and ratio > 0):
            raise UsageError(f"oversubscription must be a positive number, got {ratio}")
        return cls(node_gbps, nodes_per_switch * node_gbps / ratio, reference_gbps)

    def label(self) -> str:
        return (f"node uplinks {self.node_gbps:g} Gbit/s, switch uplinks {self.uplink_gbps:g} Gbit/s, "
                f"slowdowns read at {self.reference_gbps:g} Gbit/s")  # fmt: skip

    def capacity(self, link: int) -> float:
        return self.node_gbps if link >= 0 else self.uplink_gbps


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


@dataclass(frozen=True)
class Comm:
    """A job's communication per consolidated second of work: `gbit` at any rate, `overlap` hidden."""

    gbit: float  # ring Gbit sent per consolidated second (ring_gbit / t_c)
    overlap: float  # seconds of it hidden behind backward, per consolidated second (overlap_s / t_c)

    def slowdown(self, rate_gbps: float) -> float:
        """Seconds per consolidated second of work when the job's flow gets `rate_gbps`."""
        return 1.0 + max(0.0, self.gbit / rate_gbps - self.overlap)


def ring_gbit(gpus: int, grad_bytes: float) -> float:
    return 2.0 * (gpus - 1) / gpus * grad_bytes * 8 / 1e9


def comm_of(
    gpus: int, grad_bytes: float, slowdown: float, reference_gbps: float, iteration_s: float | None = None
) -> Comm:
    """A job's communication terms from its trace slowdown at the reference bandwidth (module docstring)."""
    if slowdown <= 1.0:
        return Comm(0.0, 0.0)  # insensitive: whatever it sends is hidden
    volume = ring_gbit(gpus, grad_bytes)
    if iteration_s is None or volume <= 0:
        return Comm((slowdown - 1.0) * reference_gbps, 0.0)
    exposed_ref = (slowdown - 1.0) * iteration_s
    comm_ref_s = max(volume / reference_gbps, exposed_ref)  # scaled up if the bytes explain too little
    return Comm(comm_ref_s * reference_gbps / iteration_s, (comm_ref_s - exposed_ref) / iteration_s)


def max_min_rates(flows: dict, capacity: Callable[[int], float], weight: dict | None = None) -> dict:
    """Max-min fair rates (water-filling) of `flows` (flow -> the links it crosses) on links of `capacity`;
    with `weight` (flow -> count), a flow stands for that many flows on the same links (same rate).

    The link with the lowest fair share (bandwidth left / unfixed flows on it) fixes its flows at that share;
    shares only grow as flows are fixed, so a heap with stale entries skipped finds the next one. Each link
    a bottleneck touched gets one new heap entry, after all its flows are fixed (not one per flow): the
    entries in between would be stale, so the order, and every rate, is the same. The flows a bottleneck
    fixes are taken off each link in one subtraction (their count times the share), so the rates do not
    depend on the order `flows` lists them in."""
    left: dict[int, float] = {}
    users: dict[int, list] = {}
    count: dict[int, int] = {}
    for flow, links in flows.items():
        many = weight[flow] if weight is not None else 1
        for link in links:
            on = users.get(link)
            if on is None:
                users[link], left[link], count[link] = [flow], capacity(link), many
            else:
                on.append(flow)
                count[link] += many
    heap = [(left[link] / count[link], link) for link in users]
    heapq.heapify(heap)
    heappop, heappush = heapq.heappop, heapq.heappush
    rates: dict = {}
    while heap:
        share, link = heappop(heap)
        if count[link] == 0 or share != left[link] / count[link]:
            continue  # stale: its flows were fixed elsewhere, or its share grew
        taken: dict[int, int] = {}  # link -> flows fixed now that cross it
        for flow in users[link]:
            if flow in rates:
                continue
            rates[flow] = share
            many = weight[flow] if weight is not None else 1
            for other in flows[flow]:
                taken[other] = taken.get(other, 0) + many
        for other, many in taken.items():  # one subtraction per link: the same whatever the flows' order
            count[other] -= many
            left[other] -= share * many
            if other != link and count[other] > 0:
                heappush(heap, (left[other] / count[other], other))
    return rates
