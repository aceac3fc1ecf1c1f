"""What a probe measures: message sizes and the time budget per size, as the `probe` part of a worker job."""

from __future__ import annotations

from collections.abc import Iterable

from stash_core.measure.worker_job import ProbeSettings
from stash_core.units import KIB, MIB

FLOAT_BYTES = 4  # the probe sends float32 buffers (probe_worker.py sizes its buffers by it)

# `stash probe`: 4 KiB .. 256 MiB in steps of 4x.
PROBE_SIZES_BYTES = tuple(4 * KIB * 4**step for step in range(9))
# The probe every multi-worker profile runs: a few sizes, enough for latency and bandwidth.
PROFILE_PROBE_SIZES_BYTES = (4 * KIB, 64 * KIB, 1 * MIB, 4 * MIB)
P2P_LATENCY_BYTES = 8
PROFILE_P2P_BANDWIDTH_BYTES = 1 * MIB
PROBE_P2P_BANDWIDTH_BYTES = 16 * MIB
# Sent ahead of a larger point-to-point message when one call has a time limit, to predict its time: small
# enough to pass in seconds on the slowest link an emulated cluster takes (8 kbit/s), large enough to be
# more than its latency on a slow one.
P2P_ESTIMATE_BYTES = 4 * KIB
# Time spent on one size, beyond its first (warm-up and estimate) repetition.
DEFAULT_BUDGET_S_PER_SIZE = 0.3
DEFAULT_MAX_REPETITIONS = 20


def repetitions_for(first_s: float, budget_s: float, max_repetitions: int) -> int:
    """Timed repetitions after a first call that took first_s: as many as fit the budget, at least one
    (the first call of a size is a warm-up - buffers are allocated and touched - and is never kept),
    at most max_repetitions."""
    return max(1, min(max_repetitions, int(budget_s / max(first_s, 1e-6))))


def probe_settings(
    grad_bytes: int | None,
    sizes_bytes: Iterable[int] = PROFILE_PROBE_SIZES_BYTES,
    p2p_bandwidth_bytes: int = PROFILE_P2P_BANDWIDTH_BYTES,
    budget_s_per_size: float = DEFAULT_BUDGET_S_PER_SIZE,
    max_repetitions: int = DEFAULT_MAX_REPETITIONS,
    max_op_s: float | None = None,
    link_gbps: float | None = None,
) -> ProbeSettings:
    """The `probe` part of a worker job. max_op_s: skip all-reduce sizes and point-to-point messages whose
    one call is predicted to take longer than this (so a slow link cannot run into the process-group
    timeout). link_gbps: the slowest link's known rate (the emulated cluster's), below which no prediction
    between machines goes: a shaped link lets a small message through at line speed (its token bucket's
    burst), and a prediction from one would be many times too fast."""
    return {
        "sizes_bytes": sorted({int(size) for size in sizes_bytes}),
        "p2p_sizes_bytes": [P2P_LATENCY_BYTES, int(p2p_bandwidth_bytes)],
        "grad_bytes": int(grad_bytes) if grad_bytes else None,
        "budget_s_per_size": float(budget_s_per_size),
        "max_repetitions": int(max_repetitions),
        "max_op_s": max_op_s,
        "link_gbps": link_gbps,
    }


def wire_s(size_bytes: int, link_gbps: float | None) -> float:
    """The least time `size_bytes` takes on a link of `link_gbps` (0 where the rate is not known)."""
    return size_bytes * 8 / (link_gbps * 1e9) if link_gbps else 0.0


def predicted_one_way_s(
    size_bytes: int, estimate: tuple[int, float], latency: tuple[int, float] | None = None
) -> float:
    """The one-way time of a point-to-point message of size_bytes, from that of a smaller one (estimate: its
    bytes and seconds) and of the latency message before it: the time per byte between the two, added to the
    estimate's time. Without a latency message, all of the estimate's time counts as time per byte (which
    can only overstate the prediction)."""
    estimate_bytes, estimate_s = estimate
    latency_bytes, latency_s = latency if latency is not None else (0, 0.0)
    per_byte_s = max(estimate_s - latency_s, 0.0) / max(estimate_bytes - latency_bytes, 1)
    return estimate_s + per_byte_s * max(size_bytes - estimate_bytes, 0)


def bounded_by_allreduce_s(
    predicted_s: float, size_bytes: int, allreduce_gbps: float | None, latency_s: float = 0.0
) -> float:
    """A point-to-point prediction, at most twice the time `size_bytes` takes at the bus bandwidth the ranks'
    gloo all-reduce reached (its ring is at most as fast as its slowest link, and sends on the sockets a
    message takes), plus the latency: a few milliseconds of jitter on the 4 KiB estimate, scaled 4,096
    times, skipped a 16 MiB message that passes in 15 ms. None for the all-reduce: the prediction as it is."""
    if not allreduce_gbps or allreduce_gbps <= 0:
        return predicted_s
    return min(predicted_s, latency_s + 2 * size_bytes * 8 / (allreduce_gbps * 1e9))


def probe_sizes(min_size_bytes: int, max_size_bytes: int) -> list[int]:
    """Message sizes from min to max in steps of 4x, max included, each a whole number of float32 values (as
    the probe sends them: 3 B and 6 B are both one float, measured once, not two rows of 4 B)."""
    sizes, size = [], max(1, min_size_bytes)  # 0 B would stay 0 B when multiplied: the loop would not end
    while size < max_size_bytes:
        sizes.append(size)
        size *= 4
    return sorted({max(FLOAT_BYTES, size // FLOAT_BYTES * FLOAT_BYTES) for size in [*sizes, max_size_bytes]})
