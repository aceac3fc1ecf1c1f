"""The compiled fill (sched/fill.py) against the same lazy-heap water-filling written in plain Python: the
same rates to the bit on random classes of flows (ties between equal shares, rounding that lowers a share,
switch uplinks' negative numbers), over every class and over a component's links only."""

from __future__ import annotations

import heapq
import math
import random

import numpy as np
import pytest

from stash_core.sched.fabric import max_min_rates
from stash_core.sched.fill import fill


def lazy_heap_fill(classes: dict, capacity: dict, seen: set | None = None) -> dict:
    """Classes (id -> (links, flows)) on links of `capacity`: heapq of (share, link); an entry whose share
    moved since it went in goes back at its share now; a bottleneck fixes its unfixed classes, taken off
    each of their links in one subtraction (flows x share)."""
    count = dict.fromkeys(capacity, 0)
    on_link: dict = {}
    for cid, (links, flows) in classes.items():
        if seen is None or links[0] in seen:
            for link in links:
                count[link] += flows
                on_link.setdefault(link, []).append(cid)
    left = dict(capacity)
    heap = [(left[link] / count[link], link) for link in on_link]
    heapq.heapify(heap)
    rates: dict = {}
    while heap:
        share, link = heapq.heappop(heap)
        if count[link] == 0:
            continue
        now = left[link] / count[link]
        if share != now:
            heapq.heappush(heap, (now, link))
            continue
        taken: dict = {}
        for cid in on_link[link]:
            if cid in rates:
                continue
            rates[cid] = share
            links, flows = classes[cid]
            for other in links:
                taken[other] = taken.get(other, 0) + flows
        for other, many in taken.items():
            count[other] -= many
            if count[other]:
                left[other] -= share * many
    return rates


def compiled(classes: dict, capacity: dict, seen: set | None = None, rows: int = 0) -> dict:
    """fill() on arrays made from `classes` (free rows with no flows between them), by class id."""
    numbers = sorted(capacity, key=lambda link: (link < 0, abs(link)))  # any order of indices will do
    index = {link: i for i, link in enumerate(numbers)}
    width = max(len(links) for links, _ in classes.values())
    row_links = np.full((len(classes) + rows, width), -1, np.int64)
    row_flows = np.zeros(len(classes) + rows, np.int64)
    row_of = {}
    for row, (cid, (links, flows)) in zip(range(0, 2 * len(classes), 2), classes.items(), strict=False):
        row %= len(row_flows)
        while row in row_of.values():
            row = (row + 1) % len(row_flows)
        row_of[cid] = row
        row_links[row, : len(links)] = [index[link] for link in links]
        row_flows[row] = flows
    marked = np.zeros(len(numbers), np.bool_)
    for link in seen or ():
        marked[index[link]] = True
    bandwidths = np.array([capacity[number] for number in numbers])
    rates = fill(row_links, row_flows, np.array(numbers, np.int64), bandwidths, marked)
    return {cid: float(rates[row]) for cid, row in row_of.items() if not math.isnan(rates[row])}


def random_state(rng: random.Random) -> tuple[dict, dict]:
    links = list(range(rng.randint(1, 12))) + [-1 - s for s in range(rng.randint(0, 4))]
    bandwidths = [10.0, 25.0, 100.0, 200.0, 1 / 3, rng.uniform(1, 300)]
    capacity = {link: rng.choice(bandwidths) for link in links}
    classes = {}
    for cid in range(rng.randint(1, 40)):
        key = tuple(sorted(rng.sample(links, rng.randint(1, min(6, len(links))))))
        if key not in {k for k, _ in classes.values()}:
            classes[cid * 3 + 1] = (key, rng.choice([1, 1, 1, 2, 3, 7]))
    return classes, capacity


@pytest.mark.parametrize("seed", range(300))
def test_the_compiled_fill_gives_the_python_fills_rates_to_the_bit(seed):
    rng = random.Random(seed)
    classes, capacity = random_state(rng)
    expected = lazy_heap_fill(classes, capacity)
    assert compiled(classes, capacity, rows=rng.randint(0, 5)) == expected
    # and it is max-min fair: the plain water-filling of fabric.py, flow by flow, to 1e-9
    flows = {cid: list(links) for cid, (links, _) in classes.items()}
    weight = {cid: flows_ for cid, (_, flows_) in classes.items()}
    fair = max_min_rates(flows, capacity.__getitem__, weight)
    assert all(expected[cid] == pytest.approx(fair[cid], rel=1e-9) for cid in classes)


def _component_of(classes: dict, start: int) -> set:
    """The links connected to `start` through the classes on them."""
    seen, grew = {start}, True
    while grew:
        grew = False
        for links, _ in classes.values():
            if seen.intersection(links) and not seen.issuperset(links):
                seen.update(links)
                grew = True
    return seen


@pytest.mark.parametrize("seed", range(100))
def test_a_components_compiled_fill_rates_only_its_classes_as_the_python_fill_does(seed):
    rng = random.Random(1000 + seed)
    classes, capacity = random_state(rng)
    some_links = sorted({link for links, _ in classes.values() for link in links})
    seen = _component_of(classes, rng.choice(some_links))
    expected = lazy_heap_fill(classes, capacity, seen)
    assert set(expected) == {cid for cid, (links, _) in classes.items() if links[0] in seen}
    assert compiled(classes, capacity, seen) == expected
