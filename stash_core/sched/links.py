"""Who is on each link of the fabric now, and each flow's max-min fair rate (fabric.py's model), kept up to
date as jobs start and end: the classes of flows on the same links, the fills a change needs, and the flows
whose rate moved (simulator.py re-times those)."""

from __future__ import annotations

import heapq
from collections import _count_elements as count_elements  # Counter.update(iterable), in C
from itertools import compress
from operator import ne, truediv

from stash_core.sched.fabric import Fabric


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
        # the same, in lists a link number indexes (a switch uplink's negative number from the end): the
        # fill reads and writes them hundreds of times, and a list is indexed faster than a dict is looked up
        self.load_at: list[int] = []
        self.capacity_at: list[float] = []
        self.node_links = 0  # links 0 .. node_links - 1 first in those lists, then the switch uplinks
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
        net = self.net
        net[key] = net.get(key, 0) + 1
        members = self.members[cid]
        members.add(index)
        if len(members) > 1:
            self.crowded[cid] = len(members)
        self.joined.add(cid)
        load, load_at = self.load, self.load_at
        for link in key:
            if link in load:
                load[link] += 1
            else:
                if not self.node_links - len(load_at) <= link < self.node_links:
                    self._cover(link)  # before it counts in `load`: the lists are made from it
                    load_at = self.load_at
                load[link] = 1
                self.capacity[link] = self.fabric.capacity(link)
            load_at[link] += 1

    def _cover(self, link: int) -> None:
        """Lengthen the lists indexed by link number so that they hold `link`."""
        node_links = max(self.node_links, link + 1)
        switch_links = max(len(self.load_at) - self.node_links, -link)
        nodes, switches = range(node_links), range(-switch_links, 0)
        self.load_at = [self.load.get(link, 0) for link in (*nodes, *switches)]
        self.capacity_at = [self.fabric.capacity(link) for link in (*nodes, *switches)]
        self.node_links = node_links

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
        net = self.net
        net[key] = net.get(key, 0) - 1
        load, load_at = self.load, self.load_at
        for link in key:
            left = load[link] - 1
            load_at[link] -= 1
            if left:
                load[link] = left
            else:
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
        # flows and bandwidth left per link, indexed by link number (copied at C speed); a component's fill
        # touches only its own links
        count, left = self.load_at.copy(), self.capacity_at.copy()
        load, capacity = self.load, self.capacity
        if seen is None:
            shares = map(truediv, map(capacity.__getitem__, load), load.values())
            heap = list(zip(shares, load, strict=True))  # (share, link), built at C speed
        else:
            heap = [(capacity[link] / load[link], link) for link in seen]
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
