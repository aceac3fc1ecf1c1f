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
bit (`Links`), and a change that leaves as many flows on every set of links as before is not re-filled
at all. A fill's results do not depend on the order sets and dicts hold flows in: the flows a
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
from collections import _count_elements as count_elements  # Counter.update(iterable), in C
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from operator import ne, truediv

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


class Links:
    """Who is on each link now, and each flow's max-min fair rate. Flows on the same links get the same rate,
    so rates are computed per set of links (a class, numbered: a number hashes in no time, a tuple of links
    hashes link by link at every look-up).

    A change re-fills the classes connected to the links that changed, or every class once the search for
    them reaches a switch uplink (`_component`): the water-filling of a connected component does the same
    arithmetic, in the same order, whether other components are filled beside it or not (a link's share only
    moves with the classes on it), so the classes a change did not reach get their rates again to the bit
    and are not reported as moved. At scale the switch uplinks join nearly every class into one component,
    and finding it cost as much as filling it; flows inside switches (jobs at their tightest placement
    across nodes) form small components, where the search is what saves the fill.

    A fill is a function of the flows per set of links only, so when those are back where the last fill
    left them (a job ends and the next takes its nodes; a preemptor starts on its victim's GPUs: some 78%
    of the instants that change the links of 100,000 las jobs) it is skipped: every class keeps what that
    fill gave, and the classes a flow joined report it, as a fill would."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.class_id: dict[tuple[int, ...], int] = {}  # set of links -> its class
        self.class_links: dict[int, tuple[int, ...]] = {}  # class -> its links
        self.members: dict[int, set[int]] = {}  # class -> flows on exactly its links
        self.crowded: dict[int, int] = {}  # class -> its flows, for the classes of more than one flow
        self.on_link: dict[int, set[int]] = {}  # link -> classes crossing it
        self.class_of: dict[int, int] = {}  # flow -> its class
        self.class_rate: dict[int, float] = {}
        self.rate: dict[int, float] = {}  # flow -> Gbit/s it gets now
        self.joined: set[int] = set()  # classes with a flow not rated yet
        self.load: dict[int, int] = {}  # link -> flows on it
        self.capacity: dict[int, float] = {}  # link -> its Gbit/s, for the links in `load`
        self.next_id = 0
        # What the fills gave, per class, before the 1e-12 test (a fill of the same classes gives it again),
        # and the flows per set of links gained or lost since the last fill: when every count is back where
        # it was (a job ends and the next takes the same nodes, a preempted job's GPUs go to its preemptor),
        # the fill would repeat itself and is skipped.
        self.filled: dict[int, float] = {}
        self.gone: dict[tuple[int, ...], float] = {}  # classes emptied since the last fill -> what it gave
        self.net: dict[tuple[int, ...], int] = {}

    def alone_rate(self, links: list[int]) -> float:
        return min(self.fabric.capacity(link) for link in links)

    def add(self, index: int, links: list[int]) -> None:
        key = tuple(sorted(links))
        cid = self.class_id.get(key)
        if cid is None:
            cid = self.class_id[key] = self.next_id
            self.next_id += 1
            self.class_links[cid] = key
            self.members[cid] = set()
            for link in key:
                self.on_link.setdefault(link, set()).add(cid)
        self.class_of[index] = cid
        self.net[key] = self.net.get(key, 0) + 1
        members = self.members[cid]
        members.add(index)
        if len(members) > 1:
            self.crowded[cid] = len(members)
        self.joined.add(cid)
        load = self.load
        for link in key:
            if link in load:
                load[link] += 1
            else:
                load[link] = 1
                self.capacity[link] = self.fabric.capacity(link)

    def remove(self, index: int, links: list[int]) -> None:
        cid = self.class_of.pop(index)
        self.rate.pop(index, None)
        members = self.members[cid]
        members.discard(index)
        if len(members) > 1:
            self.crowded[cid] = len(members)
        else:
            self.crowded.pop(cid, None)
        key = self.class_links[cid]
        self.net[key] = self.net.get(key, 0) - 1
        load = self.load
        for link in key:
            load[link] -= 1
            if not load[link]:
                del load[link], self.capacity[link]
        if not members:
            del self.members[cid], self.class_links[cid], self.class_id[key]
            self.class_rate.pop(cid, None)
            filled = self.filled.pop(cid, None)
            if filled is not None:
                self.gone[key] = filled
            self.joined.discard(cid)
            for link in key:
                self.on_link[link].discard(cid)
                if not self.on_link[link]:
                    del self.on_link[link]

    def reallocate(self, changed: set[int]) -> list[int]:
        """Recompute the rates after the flows on the `changed` links changed; the flows whose rate moved."""
        on_link, joined = self.on_link, self.joined
        seen = {link for link in changed if link in on_link}
        if not seen:
            self._settled()
            return []  # nobody is left on them: nobody shared a link with the flows that left
        if any(self.net.values()):
            rates = self._fill(self._component(seen))
            self.filled.update(rates)
        else:  # the same flows per set of links as at the last fill: it would give every class the same
            filled, gone, class_links = self.filled, self.gone, self.class_links
            rates = {}
            for cid in joined:
                rate = filled.get(cid)
                if rate is None:  # emptied and made again since: its set of links is the same
                    rate = filled[cid] = gone[class_links[cid]]
                rates[cid] = rate
        self._settled()
        members_of = self.members
        moved: list[int] = []
        class_rate, rate_of = self.class_rate, self.rate
        get = class_rate.get
        # most classes: a change did not reach them, or reached them to the same bits; the others are found
        # at C speed, and looked at with the classes a flow joined
        todo = set(compress(rates, map(ne, rates.values(), map(get, rates))))
        if joined:
            todo.update(joined.intersection(rates))
        for cid in todo:
            rate, old = rates[cid], get(cid)
            if old is None or abs(rate - old) > 1e-12 * old or cid in joined:
                class_rate[cid] = rate
                members = members_of[cid]
                for flow in members:
                    rate_of[flow] = rate
                moved.extend(members)
        joined.clear()  # every class with a new flow is on a changed link, so in the fill
        moved.sort()  # re-timed in this order: event order numbers must not follow set order
        return moved

    def _settled(self) -> None:
        """The flows per set of links now are those of the last fill (or of no fill needed)."""
        self.net.clear()
        self.gone.clear()

    def _component(self, seen: set[int]) -> set[int] | None:
        """The links connected to `seen` through the classes on them, or None (every link) once a switch
        uplink is among them or they are over a quarter of the links: a switch uplink joins nearly every
        class at scale, a search that far costs about what the fill does, and a fill of every class gives
        the classes of the component the same rates to the bit (class docstring)."""
        if min(seen) < 0:
            return None
        on_link, class_links, most = self.on_link, self.class_links, len(self.load) // 4
        done: set[int] = set()  # classes whose links are in `seen` already
        todo = set(seen)
        while todo:
            reached: set[int] = set()
            for link in todo:
                for cid in on_link[link]:
                    if cid not in done:
                        done.add(cid)
                        reached.update(class_links[cid])
            todo = reached - seen
            if todo and (min(todo) < 0 or len(seen) + len(todo) > most):
                return None
            seen |= todo
        return seen

    def _fill(self, seen: set[int] | None) -> dict[int, float]:
        """max_min_rates over the classes on the links `seen` (whole components), or over every class
        (None), from the flow counts kept per link and per class: nothing to build but the heap. A share
        only grows as flows are fixed, so an entry is put back at its link's share now only when it comes out
        stale (not once per flow fixed): the link of the lowest share now still comes out first. The
        classes a link fixes are taken off each of their links in one subtraction (flows x share), so no
        rate depends on the order a set holds the classes in; a link whose flows are all fixed keeps no
        bandwidth count (it is never read again)."""
        on_link, class_links, crowded = self.on_link, self.class_links, self.crowded
        if seen is None:  # copied at C speed
            count, left = self.load.copy(), self.capacity.copy()
        else:
            load, capacity = self.load, self.capacity
            count = {link: load[link] for link in seen}
            left = {link: capacity[link] for link in seen}
        shares = map(truediv, map(left.__getitem__, count), count.values())
        heap = list(zip(shares, count, strict=True))  # (share, link), built at C speed
        heapq.heapify(heap)
        heappop, heappush = heapq.heappop, heapq.heappush
        rates: dict[int, float] = {}
        while heap:
            share, link = heappop(heap)
            many_left = count[link]
            if many_left == 0:
                continue  # its flows were all fixed elsewhere
            now = left[link] / many_left
            if share != now:  # its share grew since: back in the heap at its share now
                heappush(heap, (now, link))
                continue
            taken: dict[int, int] = {}  # link -> flows fixed now that cross it
            for cid in on_link[link]:
                if cid in rates:
                    continue
                rates[cid] = share
                if cid in crowded:
                    many = crowded[cid]
                    for other in class_links[cid]:
                        taken[other] = taken.get(other, 0) + many
                else:  # most classes: one flow; counted in C
                    count_elements(taken, class_links[cid])
            for other, many in taken.items():
                rest = count[other] - many
                count[other] = rest
                if rest:
                    left[other] -= share * many
        return rates
