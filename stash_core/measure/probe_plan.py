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
) -> ProbeSettings:
    """The `probe` part of a worker job. max_op_s: skip sizes whose first all-reduce is predicted to take
    longer than this (so a slow link cannot run into the process-group timeout)."""
    return {
        "sizes_bytes": sorted({int(size) for size in sizes_bytes}),
        "p2p_sizes_bytes": [P2P_LATENCY_BYTES, int(p2p_bandwidth_bytes)],
        "grad_bytes": int(grad_bytes) if grad_bytes else None,
        "budget_s_per_size": float(budget_s_per_size),
        "max_repetitions": int(max_repetitions),
        "max_op_s": max_op_s,
    }


def probe_sizes(min_size_bytes: int, max_size_bytes: int) -> list[int]:
    """Message sizes from min to max in steps of 4x, max included, each a whole number of float32 values (as
    the probe sends them: 3 B and 6 B are both one float, measured once, not two rows of 4 B)."""
    sizes, size = [], max(1, min_size_bytes)  # 0 B would stay 0 B when multiplied: the loop would not end
    while size < max_size_bytes:
        sizes.append(size)
        size *= 4
    return sorted({max(FLOAT_BYTES, size // FLOAT_BYTES * FLOAT_BYTES) for size in [*sizes, max_size_bytes]})
