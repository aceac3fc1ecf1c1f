"""The waiting jobs, in the policy's order, kept two ways so that a pass never costs the whole queue.

- `in_order()`: every waiting job's key in order (a sorted list; started jobs leave stale entries that are
  skipped and swept out once they are half of the list). Walked by the policies whose placement depends
  on where the free GPUs are (consolidate, delay, network-*).
- `heads()`, `head(need)`: the first waiting job in order of each GPU count: one heap per GPU count, so a
  pass of the policies that place anywhere (fifo, sjf, las, spread, anywhere.py) costs the distinct GPU
  counts plus the jobs it starts.
- `of_need(need, kind)`: the keys of one GPU count in order, all of them ("all"), those not skipped yet
  ("fresh": no timer) or those whose timer ran out ("relaxed", see `relax_until`): an in-order pass
  (inorder.py) merges them and looks only at the jobs that can start or start their timer.
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
        self.need = [0] * jobs
        self.relax_at: list[float | None] = [None] * jobs  # a skipped waiting job's relax instant, else None
        self.lists: dict[tuple[int, str], list[tuple]] = {}  # (GPUs, kind) -> live keys in order
        self.relaxing: list[tuple[float, int]] = []  # heap of (relax instant, job) of skipped jobs

    def __len__(self) -> int:
        return sum(self.demand.values())

    def __contains__(self, index: int) -> bool:
        return self.key[index] is not None

    def add(self, index: int, key: tuple, need: int) -> None:
        self.key[index] = key
        self.version += 1
        self.need[index] = need
        if self.ordered:  # a job joins unskipped: a start or a preemption cleared its timer
            bisect.insort(self.order, key)
            bisect.insort(self.lists.setdefault((need, "all"), []), key)
            bisect.insort(self.lists.setdefault((need, "fresh"), []), key)
        heapq.heappush(self.by_need.setdefault(need, []), key)
        self.demand[need] += 1

    def remove(self, index: int, need: int) -> None:
        key, self.key[index] = self.key[index], None
        self.version += 1
        self.stale += 1
        if self.ordered:
            _drop(self.lists[need, "all"], key)
            _drop(self.lists.get((need, "fresh" if self.relax_at[index] is None else "relaxed"), []), key)
        self.relax_at[index] = None
        self.demand[need] -= 1
        if not self.demand[need]:
            del self.demand[need], self.by_need[need]

    def skip(self, index: int, relax_s: float) -> None:  # the job is waiting and was not skipped yet
        """A waiting job was skipped: its timer runs; from `relax_s` (since + timer) it may start spread."""
        self.relax_at[index] = relax_s
        if self.ordered:
            _drop(self.lists[self.need[index], "fresh"], self.key[index])
            if relax_s <= math.inf:  # never relaxes: infinite, or NaN (now >= NaN is False)
                heapq.heappush(self.relaxing, (relax_s, index))

    def relax_until(self, now: float) -> None:
        """File the skipped jobs whose timer ran out by `now` under "relaxed" (allowed_level's test)."""
        relaxing, relax_at, key, lists = self.relaxing, self.relax_at, self.key, self.lists
        while relaxing and relaxing[0][0] <= now:
            relax_s, index = heapq.heappop(relaxing)
            if relax_at[index] == relax_s and key[index] is not None:
                relaxed = lists.setdefault((self.need[index], "relaxed"), [])
                at = bisect.bisect_left(relaxed, key[index])
                if at == len(relaxed) or relaxed[at] is not key[index]:  # not filed already
                    relaxed.insert(at, key[index])

    def of_need(self, need: int, kind: str) -> list[tuple]:
        return self.lists.get((need, kind), [])

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


def _drop(keys: list[tuple], key: tuple | None) -> None:
    """Take `key` out of a sorted list of keys, where it is there."""
    at = bisect.bisect_left(keys, key)
    if at < len(keys) and keys[at] is key:
        del keys[at]


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
