"""How much of DDP's gradient all-reduce backward hides, as DDP runs it.

DDP fills its buckets in reverse layer order (1 MiB first, then 25 MiB) and all-reduces a bucket as soon as
backward has produced its last gradient; NCCL runs one collective after another on its stream. Backward
produces gradients at an even rate here (a parameter's share of the gradient bytes is its share of backward
time: the step model counts operators, not their order). So bucket i is ready at backward_s x (bytes of
buckets 0..i) / all bytes, starts when it is ready and the previous one has finished, and the time after
backward ends is exposed; the last bucket is never hidden.

While NCCL's kernels run beside backward they take SMs and memory bandwidth from it: backward is slowed by
`contention` x the overlapped collective time. Every step also ends at the slowest rank: with step times that
vary by a fraction `jitter` (their coefficient of variation), the slowest of k ranks is later than a mean one
by about jitter x step x sqrt(2 ln k) (the expected maximum of k normal draws). Both factors are fitted on
published multi-GPU training figures, leaving one source out (comm_validation.py), and printed with each
prediction. DDP also copies every gradient into its bucket and back (four passes over the gradient bytes at
the GPU's memory bandwidth), on the compute stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stash_core.analysis.comm import ddp_bucket_sizes


@dataclass(frozen=True)
class CommParams:
    """contention: the fraction of an overlapped collective's time that backward loses to it; jitter: the
    step time's coefficient of variation between ranks. The prior is the pure schedule (both 0)."""

    contention: float = 0.0
    jitter: float = 0.0


def straggler_factor(ranks: int) -> float:
    """sqrt(2 ln k): how many standard deviations the slowest of k ranks lags the mean, roughly."""
    return math.sqrt(2.0 * math.log(ranks)) if ranks > 1 else 0.0


@dataclass(frozen=True)
class Overlap:
    allreduce_s: float  # all buckets one after another, if nothing were hidden
    exposed_s: float  # after backward's end
    overlapped_s: float  # collective time that ran beside backward
    slowdown_s: float  # backward's loss to the collectives beside it
    copies_s: float  # DDP's bucket copies
    straggler_s: float = 0.0  # the wait for the slowest rank

    @property
    def added_s(self) -> float:
        """Seconds a step gains over the one-GPU step from communication."""
        return self.exposed_s + self.slowdown_s + self.copies_s + self.straggler_s


def ddp_overlap(
    grad_bytes: float,
    step_s: float,
    backward_s: float,
    allreduce_s,  # (message bytes) -> seconds
    ranks: int,
    params: CommParams,
    memory_gbs: float,
) -> Overlap:
    """The Overlap of one step of `step_s` (one GPU's) whose backward takes `backward_s`, over `ranks`
    ranks, its buckets timed by `allreduce_s`."""
    sizes = ddp_bucket_sizes(int(grad_bytes))
    if not sizes or ranks <= 1:
        return Overlap(0.0, 0.0, 0.0, 0.0, 0.0)
    done_bytes, end_s, total_s, overlapped_s = 0.0, 0.0, 0.0, 0.0
    for size in sizes:
        done_bytes += size
        ready_s = backward_s * done_bytes / grad_bytes
        took_s = allreduce_s(size)
        start_s = max(ready_s, end_s)
        end_s = start_s + took_s
        total_s += took_s
        overlapped_s += max(0.0, min(end_s, backward_s) - start_s)
    exposed_s = max(0.0, end_s - backward_s)
    copies_s = 4.0 * grad_bytes / (memory_gbs * 1e9) if memory_gbs else 0.0
    straggler_s = params.jitter * step_s * straggler_factor(ranks)
    return Overlap(total_s, exposed_s, overlapped_s, params.contention * overlapped_s, copies_s, straggler_s)
