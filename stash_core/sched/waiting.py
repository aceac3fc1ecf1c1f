"""The waiting jobs, in the policy's order, kept two ways so that a pass never costs the whole queue.

- `in_order()`: every waiting job's key in order (a sorted list; started jobs leave stale entries that are
  skipped and swept out once they are half of the list). Walked by the policies whose placement depends
  on where the free GPUs are (consolidate, delay, network-*).
- `heads()`, `head(need)`: the first waiting job in order of each GPU count: one heap per GPU count, so a
  pass of the policies that place anywhere (fifo, sjf, las, spread, anywhere.py) costs the distinct GPU
  counts plus the jobs it starts.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Iterator


class Waiting:
    def __init__(self, jobs: int, ordered: bool = True) -> None:
        self.ordered = ordered  # keep `in_order()`'s list (not needed by the policies that place anywhere)
        self.key: list[tuple | None] = [None] * jobs  # the live key of each waiting job, else None
        self.order: list[tuple] = []
        self.by_need: dict[int, list[tuple]] = {}
        self.demand: Counter[int] = Counter()  # GPUs asked -> waiting jobs asking it
        self.stale = 0
        self.version = 0  # one more at every job added or removed

    def __len__(self) -> int:
        return sum(self.demand.values())

    def __contains__(self, index: int) -> bool:
        return self.key[index] is not None

    def add(self, index: int, key: tuple, need: int) -> None:
        self.key[index] = key
        self.version += 1
        if self.ordered:
            bisect.insort(self.order, key)
        heapq.heappush(self.by_need.setdefault(need, []), key)
        self.demand[need] += 1

    def remove(self, index: int, need: int) -> None:
        self.key[index] = None
        self.version += 1
        self.stale += 1
        self.demand[need] -= 1
        if not self.demand[need]:
            del self.demand[need], self.by_need[need]

    def in_order(self) -> Iterator[tuple]:
        assert self.ordered, "the waiting jobs were not kept in order"
        if self.stale > len(self.order) // 2:
            self.order = [key for key in self.order if self.key[key[-1]] is key]
            self.stale = 0
        for key in self.order:
            if self.key[key[-1]] is key:
                yield key

    def head(self, need: int) -> tuple | None:
        """The key of the first waiting job in order asking `need` GPUs, or None."""
        heap = self.by_need.get(need)
        if heap is None:
            return None
        key = self.key
        while key[heap[0][-1]] is not heap[0]:
            heapq.heappop(heap)
        return heap[0]

    def first(self) -> tuple | None:
        """The key of the first waiting job in order, or None: heads_in_order()'s first, without the sort."""
        key, heappop, first = self.key, heapq.heappop, None
        for heap in self.by_need.values():
            head = heap[0]
            while key[head[-1]] is not head:
                heappop(heap)
                head = heap[0]
            if first is None or head < first:
                first = head
        return first

    def heads(self) -> dict[int, tuple]:
        """GPUs asked -> the key of the first waiting job in order asking them."""
        return {need: key for key, need in self.heads_in_order()}

    def heads_in_order(self) -> list[tuple[tuple, int]]:
        """(key, GPUs asked) of the first waiting job asking each GPU count, in the queue's order: head()
        for every count, inlined (a placement pass starts with it)."""
        key, heappop, heads = self.key, heapq.heappop, []
        for need, heap in self.by_need.items():
            first = heap[0]
            while key[first[-1]] is not first:
                heappop(heap)
                first = heap[0]
            heads.append((first, need))
        heads.sort()
        return heads


def allowed_level(timer_s: float, since_s: float, now_s: float) -> str:
    """Delay scheduling's relaxation at the break-even point: the tightest placement until the timer runs
    out, then the tightest free one (place() tries node, then switch, then any).

    Compared as instants (the very sum the timer event fires at), so rounding cannot keep a job a step
    behind at its own timer event."""
    return "any" if now_s >= since_s + timer_s else "node"


def timer_deadlines(timer_s: float, since_s: float) -> list[float]:
    if not math.isfinite(timer_s) or timer_s <= 0:
        return []
    return [since_s + timer_s]
