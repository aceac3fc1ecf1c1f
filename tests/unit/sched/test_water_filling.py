"""The fast water-filling (fabric.max_min_rates, Links.reallocate) against a plain textbook one on random
small networks: the same rates to 1e-9, and re-timing exactly the flows whose rate moved."""

from __future__ import annotations

import random

import pytest

from stash_core.sched.fabric import Fabric, Links, max_min_rates


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


@pytest.mark.parametrize("seed", range(40))
def test_links_keep_every_flows_rate_and_report_the_ones_that_moved(seed):
    rng = random.Random(seed)
    fabric = Fabric(node_gbps=rng.choice([10.0, 100.0]), uplink_gbps=rng.choice([20.0, 200.0]))
    links, on, rates, fresh = Links(fabric), {}, {}, iter(range(10**6))
    for _ in range(60):
        changed: set[int] = set()
        for _ in range(rng.randint(1, 3)):
            if on and rng.random() < 0.4:
                flow = rng.choice(sorted(on))
                links.remove(flow, on[flow])
                changed.update(on.pop(flow))
            else:
                flow = next(fresh)
                on[flow] = rng.sample([0, 1, 2, 3, -1, -2], rng.randint(1, 3))
                links.add(flow, on[flow])
                changed.update(on[flow])
        moved = set(links.reallocate(changed))
        want = reference(on, fabric.capacity) if on else {}
        for flow in on:
            assert links.rate[flow] == pytest.approx(want[flow], rel=1e-9)
        started = {f for f in on if f not in rates}
        shifted = {f for f in on if f in rates and abs(rates[f] - want[f]) > 1e-9 * want[f]}
        assert started | shifted <= moved <= set(on)
        rates = {f: links.rate[f] for f in on}
