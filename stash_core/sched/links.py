"""Who is on each link of the fabric now, and each flow's max-min fair rate (fabric.py's model), kept up to
date as jobs start and end: the classes of flows on the same links, the fills a change needs, and the flows
whose rate moved (simulator.py re-times those)."""

from __future__ import annotations

import numpy as np

from stash_core.sched.fabric import Fabric
from stash_core.sched.fill import fill


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
        self.on_link: dict[int, set[int]] = {}  # link -> classes crossing it
        self.class_of: dict[int, int] = {}  # flow -> its class
        self.rate: dict[int, float] = {}  # flow -> Gbit/s it gets now
        self.joined: set[int] = set()  # classes with a flow not rated yet
        self.load: dict[int, int] = {}  # link -> flows on it
        self.next_id = 0
        # The arrays the compiled fill reads (fill.py), kept up to date here so that a fill builds nothing:
        # a row per class (its links as link indices, -1 after the last; its flows, 0 for a free row) and,
        # per link index, the link's number and bandwidth. Rows of emptied classes are used again.
        self.row_of: dict[int, int] = {}  # class -> its row
        self.free_rows = list(range(63, -1, -1))  # taken from the end: lowest first
        self.row_links = np.full((64, 8), -1, np.int64)
        self.row_flows = np.zeros(64, np.int64)
        self.class_at = np.full(64, -1, np.int64)  # row -> its class
        self.link_index: dict[int, int] = {}  # link number -> its index in the link arrays
        self.link_number = np.zeros(0, np.int64)
        self.capacity_gbps = np.zeros(0)
        self.no_links = np.zeros(0, np.bool_)  # a fill of every class: no link marked
        # What the fills gave, per class, before the 1e-12 test (a fill of the same classes gives it again),
        # and the flows per set of links gained or lost since the last fill: when every count is back where
        # it was (a job ends and the next takes the same nodes, a preempted job's GPUs go to its preemptor),
        # the fill would repeat itself and is skipped.
        self.filled_at = np.full(64, np.nan)  # row -> what the last fill of its class gave
        self.reported_at = np.full(64, np.nan)  # row -> the rate its class's flows were given (NaN: none yet)
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
            self._new_row(cid, key)
        self.class_of[index] = cid
        net = self.net
        net[key] = net.get(key, 0) + 1
        members = self.members[cid]
        members.add(index)
        self.row_flows[self.row_of[cid]] = len(members)
        self.joined.add(cid)
        load = self.load
        for link in key:
            load[link] = load.get(link, 0) + 1

    def _new_row(self, cid: int, key: tuple[int, ...]) -> None:
        """A row of the fill's arrays for a new class (no flows yet), its links given indices."""
        index = self.link_index
        for link in key:
            if link not in index:
                index[link] = len(index)
                self.link_number = np.append(self.link_number, link)
                self.capacity_gbps = np.append(self.capacity_gbps, self.fabric.capacity(link))
                self.no_links = np.zeros(len(index), np.bool_)
        if not self.free_rows:
            rows = len(self.row_flows)
            self.free_rows = list(range(2 * rows - 1, rows - 1, -1))
            self.row_links = np.vstack([self.row_links, np.full_like(self.row_links, -1)])
            self.row_flows = np.concatenate([self.row_flows, np.zeros(rows, np.int64)])
            self.class_at = np.concatenate([self.class_at, np.full(rows, -1, np.int64)])
            self.filled_at = np.concatenate([self.filled_at, np.full(rows, np.nan)])
            self.reported_at = np.concatenate([self.reported_at, np.full(rows, np.nan)])
        if len(key) > self.row_links.shape[1]:
            wider = np.full((len(self.row_flows), len(key)), -1, np.int64)
            wider[:, : self.row_links.shape[1]] = self.row_links
            self.row_links = wider
        row = self.free_rows.pop()
        self.row_of[cid] = row
        self.class_at[row] = cid
        self.row_links[row] = -1
        self.row_links[row, : len(key)] = [index[link] for link in key]

    def remove(self, index: int, links: list[int]) -> None:
        cid = self.class_of.pop(index)
        self.rate.pop(index, None)
        members = self.members[cid]
        members.discard(index)
        self.row_flows[self.row_of[cid]] = len(members)
        key = self.class_links[cid]
        net = self.net
        net[key] = net.get(key, 0) - 1
        load = self.load
        for link in key:
            left = load[link] - 1
            if left:
                load[link] = left
            else:
                del load[link]
        if not members:
            del self.members[cid], self.class_links[cid], self.class_id[key]
            row = self.row_of.pop(cid)
            filled = self.filled_at[row]
            if filled == filled:  # not NaN: a fill rated it
                self.gone[key] = float(filled)
            self.filled_at[row] = self.reported_at[row] = np.nan
            self.free_rows.append(row)
            self.joined.discard(cid)
            for link in key:
                self.on_link[link].discard(cid)
                if not self.on_link[link]:
                    del self.on_link[link]

    def reallocate(self, changed: set[int]) -> list[int]:
        """Recompute the rates after the flows on the `changed` links changed; the flows whose rate moved."""
        on_link, joined, row_of = self.on_link, self.joined, self.row_of
        seen = {link for link in changed if link in on_link}
        if not seen:
            self._settled()
            return []  # nobody is left on them: nobody shared a link with the flows that left
        if any(self.net.values()):
            rates = self._fill(self._component(seen))
            filled = ~np.isnan(rates)
            self.filled_at[filled] = rates[filled]
            # most classes: a change did not reach them, or reached them to the same bits; the others are
            # found at array speed (a class never reported has NaN, which differs from any rate), and
            # looked at with the classes a flow joined
            rows = np.flatnonzero(filled & (rates != self.reported_at)).tolist()
            if joined:
                found = set(rows)
                rows += [row for row in map(row_of.__getitem__, joined) if filled[row] and row not in found]
        else:  # the same flows per set of links as at the last fill: it would give every class the same
            rates, gone = self.filled_at, self.gone
            rows = list(map(row_of.__getitem__, joined))
            for row in rows:
                if rates[row] != rates[row]:  # NaN: emptied and made again since: its links are the same
                    rates[row] = gone[self.class_links[int(self.class_at[row])]]
        self._settled()
        members_of = self.members
        moved: list[int] = []
        rate_of, reported_at = self.rate, self.reported_at
        reported: list[int] = []
        olds = reported_at[rows].tolist()
        for row, cid, rate, old in zip(
            rows, self.class_at[rows].tolist(), rates[rows].tolist(), olds, strict=True
        ):
            if old != old or abs(rate - old) > 1e-12 * old or cid in joined:  # NaN: never rated
                reported.append(row)
                members = members_of[cid]
                for flow in members:
                    rate_of[flow] = rate
                moved.extend(members)
        if reported:
            reported_at[reported] = rates[reported]
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

    def _fill(self, seen: set[int] | None) -> np.ndarray:
        """The max-min fair rate of every class (by row) on the links `seen` (whole components), or of every
        class (None), NaN for the rows not filled: fill.py's compiled water-filling over the arrays kept per
        class and per link."""
        if seen is None:
            marked = self.no_links
        else:
            marked = np.zeros(len(self.link_index), np.bool_)
            marked[[self.link_index[link] for link in seen]] = True
        return fill(self.row_links, self.row_flows, self.link_number, self.capacity_gbps, marked)
