"""One pass of the policies that place in order (consolidate, delay, network-*) over every waiting job
(simulator.py): the same starts, timers and failures, in the same order, as walking the whole queue, but
only the jobs that can do something are looked at.

Walking the whole queue at every finish was quadratic once the queue backed up (40,000 jobs at 168% load:
21 s): most jobs in it ask more GPUs than are free, or are skipped already (their timer runs) and ask a GPU
count whose tightest placement failed in this pass. Such a job does nothing, and free GPUs only shrink during
a pass, so it would do nothing later in the pass either. The pass merges, in the queue's order, one stream
of keys per GPU count (waiting.py's lists): every job of the count until its tightest placement ("node")
fails, then only those not skipped yet (their timer starts) and those whose timer ran out (they start
anywhere); a count asking more than the free GPUs is dropped.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Any


def place_waiting(engine: Any, now: float) -> None:
    """Start, in the queue's order, every waiting job the policy lets start where the GPUs are free."""
    waiting, free, skipped = engine.waiting, engine.free, engine.skipped_since
    waiting.relax_until(now)
    failed: set[tuple[int, str]] = set()  # (GPUs, level) that found no placement in this pass
    streams: list[tuple[tuple, int, str]] = []  # (next key, GPUs, kind) of each stream
    for need in waiting.demand:
        if need <= free.total_free:
            _push(streams, waiting.of_need(need, "all"), None, need, "all")
    while streams and free.total_free:
        key, need, kind = heapq.heappop(streams)
        if need > free.total_free:  # nor will it fit later in the pass: the count is dropped
            continue
        index = key[-1]
        level = engine.allowed_level(index, now)
        placement = None if (need, level) in failed else free.place(need, level)
        if placement is None:
            failed.add((need, level))
            if index not in skipped:  # it could run now, spread: its timer starts
                engine.start_timer(index, now)
        else:
            engine.start(index, placement, now)
        if kind == "all" and (need, "node") in failed:  # the rest of the count's skipped jobs do nothing
            for other in ("fresh", "relaxed"):
                _push(streams, waiting.of_need(need, other), key, need, other)
        else:
            _push(streams, waiting.of_need(need, kind), key, need, kind)


def _push(streams: list, keys: list[tuple], after: tuple | None, need: int, kind: str) -> None:
    """The stream's first key after `after` (None: its first), if any: the lists hold live jobs only, and
    the job just looked at may have left them."""
    at = 0 if after is None else bisect.bisect_right(keys, after)
    if at < len(keys):
        heapq.heappush(streams, (keys[at], need, kind))
