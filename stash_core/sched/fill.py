"""The max-min fair fill of links.py's classes, compiled (numba): the water-filling of fabric.py's model over
arrays kept up to date as flows come and go, so that a fill builds nothing in Python.

Inputs, per class slot: `row_links` (the slot's links as indices into the link arrays, -1 after the last),
`row_flows` (its flows; 0: the slot is free); per link index: `link_number` (the link's number in fabric.py,
which breaks ties between equal shares, as in a heap of (share, link) tuples) and `capacity_gbps`. With a
`seen` mask (a connected component's links) only the classes on those links are filled.

The arithmetic is links.py's lazy heap step for step, so the rates are the same to the bit whichever way a
fill runs: the link of the lowest share (bandwidth left / unfixed flows) comes out of a heap of (share,
link); an entry whose share moved since it went in goes back at its share now; otherwise the link's unfixed
classes are fixed at its share and taken off each of their links in one subtraction (flows x share).
Every heap key is unique (one entry per link at a time), so the pop order is that of Python's heapq."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _before(share_a: float, link_a: int, share_b: float, link_b: int) -> bool:
    """(share_a, link_a) < (share_b, link_b), as Python compares tuples."""
    return share_a < share_b or (share_a == share_b and link_a < link_b)


@njit(cache=True)
def _push(heap_share, heap_link, size, share, index, link_number) -> int:
    position = size
    while position > 0:
        parent = (position - 1) >> 1
        if not _before(share, link_number[index], heap_share[parent], link_number[heap_link[parent]]):
            break
        heap_share[position], heap_link[position] = heap_share[parent], heap_link[parent]
        position = parent
    heap_share[position], heap_link[position] = share, index
    return size + 1


@njit(cache=True)
def _pop(heap_share, heap_link, size, link_number) -> int:
    """Remove the heap's first entry (read it before); the heap's size after."""
    size -= 1
    share, index = heap_share[size], heap_link[size]
    position = 0
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _before(
            heap_share[right], link_number[heap_link[right]], heap_share[child], link_number[heap_link[child]]
        ):
            child = right
        if not _before(heap_share[child], link_number[heap_link[child]], share, link_number[index]):
            break
        heap_share[position], heap_link[position] = heap_share[child], heap_link[child]
        position = child
    if size > 0:
        heap_share[position], heap_link[position] = share, index
    return size


@njit(cache=True)
def fill(row_links, row_flows, link_number, capacity_gbps, seen):
    """Each class slot's max-min fair rate in Gbit/s (NaN for the slots not filled: free, or off `seen`
    when `seen` has any link marked)."""
    slots, width = row_links.shape
    links = capacity_gbps.shape[0]
    only_seen = seen.any()
    count = np.zeros(links, np.int64)  # unfixed flows per link
    users = np.zeros(links + 1, np.int64)  # classes per link, then their start in `on_link`
    rates = np.full(slots, np.nan)
    for slot in range(slots):
        flows = row_flows[slot]
        if flows == 0 or (only_seen and not seen[row_links[slot, 0]]):
            continue
        for k in range(width):
            link = row_links[slot, k]
            if link < 0:
                break
            count[link] += flows
            users[link + 1] += 1
    for link in range(links):
        users[link + 1] += users[link]
    on_link = np.empty(users[links], np.int64)  # the classes on each link, link after link
    placed = users[:links].copy()
    for slot in range(slots):
        if row_flows[slot] == 0 or (only_seen and not seen[row_links[slot, 0]]):
            continue
        for k in range(width):
            link = row_links[slot, k]
            if link < 0:
                break
            on_link[placed[link]] = slot
            placed[link] += 1
    left = capacity_gbps.copy()
    heap_share, heap_link = np.empty(links), np.empty(links, np.int64)
    size = 0
    for link in range(links):
        if count[link] > 0:
            size = _push(heap_share, heap_link, size, left[link] / count[link], link, link_number)
    taken = np.zeros(links, np.int64)  # flows fixed at this step that cross each link
    touched = np.empty(links, np.int64)
    while size > 0:
        share, link = heap_share[0], heap_link[0]
        size = _pop(heap_share, heap_link, size, link_number)
        many_left = count[link]
        if many_left == 0:
            continue  # its flows were all fixed elsewhere
        now = left[link] / many_left
        if share != now:  # its share grew since: back in the heap at its share now
            size = _push(heap_share, heap_link, size, now, link, link_number)
            continue
        n_touched = 0
        for position in range(users[link], users[link + 1]):
            slot = on_link[position]
            if not np.isnan(rates[slot]):
                continue
            rates[slot] = share
            flows = row_flows[slot]
            for k in range(width):
                other = row_links[slot, k]
                if other < 0:
                    break
                if taken[other] == 0:
                    touched[n_touched] = other
                    n_touched += 1
                taken[other] += flows
        for t in range(n_touched):
            other = touched[t]
            many = taken[other]
            taken[other] = 0
            rest = count[other] - many
            count[other] = rest
            if rest:
                left[other] -= share * many
    return rates
