"""One pass of the policies that place a job wherever enough GPUs are free (fifo, sjf, las, spread) over
the waiting jobs (simulator.py): start the first waiting job in order that fits, again and again; fifo stops
at the first that does not (head of line); las first tries preempting lower-queue jobs (las.py).

The first waiting job of each GPU count is found once per pass (waiting.py); only the count whose job
started needs its next one, as nothing else joins or leaves the queue during a pass. A count whose first job
can neither fit nor preempt is not looked at again in the pass (las: when no count could even with every
preemptable job, there is no pass). A pass that started nothing changed nothing: until the queue, the free
GPUs or the preemptable jobs change, another would do the same, and is skipped.
"""

from __future__ import annotations

import bisect
from typing import Any

from stash_core.sched.las import preempt_for


def place_anywhere(engine: Any, now: float) -> None:
    free, waiting, name = engine.free, engine.waiting, engine.policy.name
    state = (waiting.version, free.total_free, engine.las_queues.version)
    if state == engine.idle_state:
        return
    engine.idle_state = None
    fifo, las = name == "fifo", name == "las"
    ready_gpus, queue_of = engine.las_queues.ready_gpus, engine.las
    demand = waiting.demand
    if las and (not demand or free.total_free + sum(ready_gpus[1:]) < min(demand)):
        # no waiting job fits in the free GPUs and all it could preempt: the pass would start nothing
        engine.idle_state = state
        return
    # (first job's key, GPUs) of the GPU counts still looked at in this pass, in the queue's order
    heads = waiting.heads_in_order()
    started = False
    while heads:
        if not (las or fifo):  # only the counts that fit: free GPUs only shrink during the pass
            heads = [head for head in heads if head[1] <= free.total_free]
            if not heads:
                break
        key, need = heads[0]
        index = key[-1]
        if need > free.total_free:
            if fifo:
                break
            # it can neither fit nor preempt (preempt_for's first test, without the call: most heads
            # fail it), or preempting failed: nor can its count
            if free.total_free + sum(ready_gpus[queue_of[index] + 1 :]) < need or not preempt_for(
                engine, index, now
            ):
                del heads[0]
                continue
        engine.start(index, free.place(need, "any"), now)
        started = True
        del heads[0]
        head = waiting.head(need)
        if head is not None:
            bisect.insort(heads, (head, need))
    if not started:
        engine.idle_state = state
