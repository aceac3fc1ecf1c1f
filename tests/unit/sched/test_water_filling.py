"""The fast water-filling (fabric.max_min_rates, Links.reallocate) against a plain textbook one on random
small networks: the same rates to 1e-9, and re-timing exactly the flows whose rate moved."""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import pytest

from stash_core.sched.fabric import Fabric, links_of, max_min_rates
from stash_core.sched.links import Links


def reference(flows: dict, capacity, weight: dict | None = None) -> dict:
    """Textbook max-min fairness: raise every unfixed flow together; the link whose fair share is lowest
    fixes its unfixed flows at that share; repeat with the bandwidth left."""
    weight = weight or {flow: 1 for flow in flows}
    rates: dict = {}
    while len(rates) < len(flows):
        best = None
        for link in {link for links in flows.values() for link in links}:
            on = [f for f in flows if link in flows[f]]
            unfixed = sum(weight[f] for f in on if f not in rates)
            if unfixed:
                left = capacity(link) - sum(rates[f] * weight[f] for f in on if f in rates)
                if best is None or left / unfixed < best[0]:
                    best = (left / unfixed, link)
        share, link = best
        for flow, links in flows.items():
            if link in links and flow not in rates:
                rates[flow] = share
    return rates


def random_flows(rng: random.Random, links: list[int]) -> dict:
    return {f: rng.sample(links, rng.randint(1, min(4, len(links)))) for f in range(rng.randint(1, 12))}


@pytest.mark.parametrize("seed", range(200))
def test_max_min_rates_match_the_textbook_water_filling(seed):
    rng = random.Random(seed)
    caps = {link: rng.choice([10.0, 25.0, 40.0, 100.0, rng.uniform(1, 200)]) for link in range(-3, 6)}
    flows = random_flows(rng, list(caps))
    weight = {f: rng.randint(1, 4) for f in flows} if seed % 2 else None
    fast, slow = max_min_rates(flows, caps.__getitem__, weight), reference(flows, caps.__getitem__, weight)
    assert fast.keys() == slow.keys()
    for flow in flows:
        assert fast[flow] == pytest.approx(slow[flow], rel=1e-9)
    for link, cap in caps.items():  # feasible, and every flow is held back by a full link
        used = sum(fast[f] * (weight[f] if weight else 1) for f in flows if link in flows[f])
        assert used <= cap * (1 + 1e-9)


def _churn(rng: random.Random, links: Links, on: dict, fresh, most: int, leave: float, shape) -> set[int]:
    """One instant: 1 to `most` flows leave (each with probability `leave`) or join on `shape()`'s links, in
    `links` and in `on` (flow -> its links); the links whose users changed."""
    changed: set[int] = set()
    for _ in range(rng.randint(1, most)):
        if on and rng.random() < leave:
            flow = rng.choice(sorted(on))
            links.remove(flow, on[flow])
            changed.update(on.pop(flow))
        else:
            flow = next(fresh)
            on[flow] = shape()
            links.add(flow, on[flow])
            changed.update(on[flow])
    return changed


@pytest.mark.parametrize("seed", range(40))
def test_links_keep_every_flows_rate_and_report_the_ones_that_moved(seed):
    rng = random.Random(seed)
    fabric = Fabric(node_gbps=rng.choice([10.0, 100.0]), uplink_gbps=rng.choice([20.0, 200.0]))
    links, on, rates, fresh = Links(fabric), {}, {}, iter(range(10**6))
    for _ in range(60):
        changed = _churn(
            rng, links, on, fresh, 3, 0.4, lambda: rng.sample([0, 1, 2, 3, -1, -2], rng.randint(1, 3))
        )
        moved = set(links.reallocate(changed))
        want = reference(on, fabric.capacity) if on else {}
        for flow in on:
            assert links.rate[flow] == pytest.approx(want[flow], rel=1e-9)
        started = {f for f in on if f not in rates}
        shifted = {f for f in on if f in rates and abs(rates[f] - want[f]) > 1e-9 * want[f]}
        assert started | shifted <= moved <= set(on)
        rates = {f: links.rate[f] for f in on}


def _cluster_flows(rng: random.Random, switches: int, per: int) -> list[int]:
    """The links of a random spread job on a cluster of `switches` x `per` nodes (fabric.links_of)."""
    nodes = rng.sample(range(switches * per), rng.randint(2, min(6, switches * per)))
    return links_of({node: 1 for node in nodes}, per)


def _components(on: dict) -> list[set[int]]:
    """The flows in each connected component of the links they share."""
    groups: list[tuple[set[int], set[int]]] = []  # (links, flows)
    for flow, links in on.items():
        mine = ({*links}, {flow})
        for group in [g for g in groups if g[0] & mine[0]]:
            groups.remove(group)
            mine[0].update(group[0])
            mine[1].update(group[1])
        groups.append(mine)
    return [flows for _, flows in groups]


@pytest.mark.parametrize("seed", range(30))
def test_re_filling_the_changed_component_gives_a_full_re_fills_rates(seed):
    # Many flows on a cluster's links (several flows per set of links, so classes of different sizes), added
    # and removed a few at a time: after each change the rates kept by Links equal a fill of every flow
    # from scratch, and the flows of components the change did not reach keep their rates to the bit.
    rng = random.Random(seed)
    switches, per = rng.choice([(2, 2), (3, 4), (4, 8)])
    fabric = Fabric.oversubscribed(rng.choice([10.0, 100.0]), rng.choice([1.0, 4.0]), per)
    links, on, fresh = Links(fabric), {}, iter(range(10**6))
    shapes = [_cluster_flows(rng, switches, per) for _ in range(12)]
    for _ in range(80):
        before = dict(links.rate)
        changed = _churn(rng, links, on, fresh, 4, 0.45, lambda: list(rng.choice(shapes)))
        links.reallocate(changed)
        full = max_min_rates(on, fabric.capacity)
        for flow in on:
            assert abs(links.rate[flow] - full[flow]) <= 1e-9 * full[flow]
        for group in _components(on):
            if not any(set(on[flow]) & changed for flow in group):
                assert all(links.rate[flow] == before[flow] for flow in group)


@pytest.mark.parametrize("seed", range(20))
def test_rates_do_not_depend_on_the_order_flows_are_held_in(seed):
    # The same flows, added in another order (so sets and dicts hold them in another order), get the same
    # rates to the bit; and so does max_min_rates given them in another order.
    rng = random.Random(seed)
    fabric = Fabric.oversubscribed(100.0, 4.0, 4)
    shapes = [_cluster_flows(rng, 4, 4) for _ in range(10)]
    on = {flow: list(rng.choice(shapes)) for flow in range(60)}
    rates = []
    for order in (sorted(on), rng.sample(sorted(on), len(on)), sorted(on, reverse=True)):
        links = Links(fabric)
        for flow in order:
            links.add(flow, on[flow])
        links.reallocate({link for flow in on for link in on[flow]})
        rates.append([links.rate[flow] for flow in sorted(on)])
        full = max_min_rates({flow: on[flow] for flow in order}, fabric.capacity)
        rates.append([full[flow] for flow in sorted(on)])
    assert all(r == rates[0] for r in rates)


def _switch_flows(rng: random.Random, switches: int, per: int) -> list[int]:
    """The links of a random job spread over nodes of one switch: node uplinks only."""
    switch = rng.randrange(switches)
    return links_of({node: 1 for node in rng.sample(range(switch * per, (switch + 1) * per), 2)}, per)


@pytest.mark.parametrize("seed", range(30))
def test_a_fill_of_every_class_gives_each_component_its_own_fills_rates_to_the_bit(seed):
    # Links re-fills every class once a change reaches a switch uplink, else the changed component only:
    # the two must agree to the bit, or which one ran would show in the schedule.
    rng = random.Random(seed)
    switches, per = rng.choice([(2, 2), (3, 4), (4, 8)])
    fabric = Fabric.oversubscribed(rng.choice([10.0, 100.0]), rng.choice([1.0, 4.0]), per)
    shapes = [_cluster_flows(rng, switches, per)] + [_switch_flows(rng, switches, per) for _ in range(12)]
    links, on = Links(fabric), {}
    for flow in range(rng.randint(5, 60)):
        on[flow] = list(rng.choice(shapes))
        links.add(flow, on[flow])
    every = _rates_by_class(links, None)
    groups = _components(on)
    assert len(every) == len(links.members)
    for group in groups:
        component = {link for flow in group for link in on[flow]}
        alone = _rates_by_class(links, component)
        assert alone == {links.class_of[flow]: every[links.class_of[flow]] for flow in group}


def _rates_by_class(links: Links, seen: set[int] | None) -> dict[int, float]:
    """A fill's rates (by row, NaN where not filled) by class."""
    rates = links._fill(seen)
    return {cid: float(rates[row]) for cid, row in links.row_of.items() if not math.isnan(rates[row])}


@pytest.mark.parametrize("seed", range(30))
def test_a_change_that_gives_back_the_same_sets_of_links_skips_the_fill_and_changes_nothing_else(seed):
    # A job ends and the next takes the same nodes, or a set of links empties and fills again within an
    # instant: the fill is skipped, and every rate and the flows reported as moved are, to the bit, those
    # of the same Links made to fill; and within 1e-9 of a fresh fill of the same flows.
    rng = random.Random(seed)
    switches, per = rng.choice([(2, 2), (3, 4), (4, 8)])
    fabric = Fabric.oversubscribed(rng.choice([10.0, 100.0]), rng.choice([1.0, 4.0]), per)
    shapes = [_cluster_flows(rng, switches, per) for _ in range(8)] + [_switch_flows(rng, switches, per)]
    links, on, fresh = Links(fabric), {}, iter(range(10**6))
    for _ in range(40):
        _churn(rng, links, on, fresh, 4, 0.4, lambda: list(rng.choice(shapes)))
        links.reallocate({link for flows in on.values() for link in flows})
    skipped = 0
    for _ in range(40):
        changed: set[int] = set()
        for flow in rng.sample(sorted(on), min(len(on), rng.randint(1, 3))):  # each replaced on its links
            shape = on.pop(flow)
            links.remove(flow, shape)
            new = next(fresh)
            on[new] = shape
            links.add(new, shape)
            changed.update(shape)
        filling = copy.deepcopy(links)
        filling.net[(0,)] = 1  # as if the flows had changed: it fills
        skipped += not any(links.net.values())
        assert links.reallocate(changed) == filling.reallocate(changed)
        assert links.rate == filling.rate
        assert np.array_equal(links.reported_at, filling.reported_at, equal_nan=True)
        full = max_min_rates(on, fabric.capacity)
        assert all(links.rate[flow] == pytest.approx(full[flow], rel=1e-9) for flow in on)
        if rng.random() < 0.3:  # and now and then a real change, filled
            _churn(rng, links, on, fresh, 2, 0.5, lambda: list(rng.choice(shapes)))
            links.reallocate({link for flows in on.values() for link in flows})
    assert skipped >= 20


@pytest.mark.parametrize("seed", range(10))
def test_the_arrays_a_fill_reads_hold_every_class_and_link(seed):
    # The compiled fill reads a row per class (its links by index, its flows) and each link's number and
    # bandwidth, kept up to date as flows come and go (rows of emptied classes used again, the arrays
    # lengthened as classes and links appear): after any joins and leaves they say what the dicts say.
    rng = random.Random(seed)
    fabric = Fabric(node_gbps=100.0, uplink_gbps=200.0)
    links, on, fresh = Links(fabric), {}, iter(range(10**6))
    for _ in range(80):
        wide = rng.random() < 0.5  # up to 12 nodes: rows wider than the arrays' first width
        nodes = rng.sample(range(40), rng.choice([2, 3, 12])) if wide else rng.sample(range(4), 3)
        _churn(rng, links, on, fresh, 3, 0.5, lambda nodes=nodes: links_of(dict.fromkeys(nodes, 1), 4))
        number = links.link_number.tolist()
        assert [number[links.link_index[link]] for link in links.link_index] == list(links.link_index)
        assert all(links.capacity_gbps[i] == fabric.capacity(link) for link, i in links.link_index.items())
        flows_on = dict.fromkeys(range(len(number)), 0)
        for row, flows in enumerate(links.row_flows.tolist()):
            row_links = [number[i] for i in links.row_links[row].tolist() if i >= 0]
            cid = int(links.class_at[row])
            if flows:
                assert links.row_of[cid] == row and tuple(row_links) == links.class_links[cid]
                assert flows == len(links.members[cid])
            for link in row_links:
                flows_on[links.link_index[link]] += flows
        assert sorted(links.free_rows + list(links.row_of.values())) == list(range(len(links.row_flows)))
        assert {number[i]: n for i, n in flows_on.items() if n} == links.load
