"""Communication physics of a ring all-reduce: bandwidths, DDP's buckets, the alpha-beta model, lower bounds.

Pure functions over probe sets (see measure/probe_worker.py, which measures them inside the workers):

  - all-reduce of one message per size, reported as algorithm bandwidth (size / time) and bus
    bandwidth (2(n-1)/n x size / time: what each link of a ring all-reduce carries per second, so
    it can be set beside a link's rate);
  - the gradient all-reduce: the model's gradient bytes in DDP's bucket sizes (1 MiB first, then
    25 MiB), one after the other - "the measured all-reduce time of the gradients";
  - point-to-point ping-pong between rank 0 and a rank on another machine (inter_node) and one on
    the same machine (intra_node): one-way latency (8 bytes) and bandwidth (a large message).

Every probe figure is the slowest rank's. Rates are in Gbit/s (gigabits per second, like tc's rates and
`instances.network_gbps`). This is the one home of the ring factor, DDP's bucket sizes and the alpha-beta
estimator; the fits and predictions in decide/ use them from here.
"""

from __future__ import annotations

import math

from stash_core.units import MIB

# DDP's buckets: a small first bucket so that communication starts early, then bucket_cap_mb = 25.
DDP_FIRST_BUCKET_BYTES = 1 * MIB
DDP_BUCKET_BYTES = 25 * MIB


def ring_factor(world_size: int) -> float:
    """2(n-1)/n: bytes through each link of a ring all-reduce per byte reduced (0 for one worker)."""
    return 0.0 if world_size <= 1 else 2.0 * (world_size - 1) / world_size


def algbw_gbps(size_bytes: float, time_s: float) -> float | None:
    """Algorithm bandwidth: message bits per second of the operation, in Gbit/s."""
    if not time_s or time_s <= 0:
        return None
    return size_bytes * 8 / time_s / 1e9


def busbw_gbps(size_bytes: float, time_s: float, world_size: int) -> float | None:
    """Bus bandwidth of an all-reduce: 2(n-1)/n x size / time, in Gbit/s (comparable with a link rate)."""
    algbw = algbw_gbps(size_bytes, time_s)
    return None if algbw is None else algbw * ring_factor(world_size)


def ddp_bucket_sizes(grad_bytes: int) -> list[int]:
    """The message sizes DDP all-reduces per iteration for `grad_bytes` of gradients."""
    if grad_bytes <= 0:
        return []
    sizes = [min(grad_bytes, DDP_FIRST_BUCKET_BYTES)]
    left = grad_bytes - sizes[0]
    while left > 0:
        sizes.append(min(left, DDP_BUCKET_BYTES))
        left -= sizes[-1]
    return sizes


def peak_busbw_gbps(probe: dict) -> float | None:
    """The highest bus bandwidth over the all-reduce sizes (each from its mean time)."""
    rates = [row.get("busbw_gbps") for row in probe.get("allreduce") or []]
    rates = [rate for rate in rates if rate]
    return max(rates) if rates else None


def wire_busbw_gbps(probe: dict, latency_s: float | None) -> float | None:
    """The bus bandwidth of the wire alone, from the largest messages (the largest and those of at least a
    quarter of it): ring bytes / (the fastest time - the call latency), the best of them, since one
    repetition of the largest can be slowed by other load. Smaller messages are left out: a shaper's burst
    (tc's token bucket lets tens to hundreds of KiB through at once) or a cache flatters them. When even the
    largest one is dominated by latency, the peak bus bandwidth."""
    world = int(probe.get("world_size") or 0)
    latency_s = latency_s or 0.0
    rows = [row for row in probe.get("allreduce") or [] if row.get("size_bytes") and row.get("time_s")]
    if not rows:
        return None
    largest = max(row["size_bytes"] for row in rows)
    rates = []
    for row in (row for row in rows if row["size_bytes"] * 4 >= largest):
        fastest_s = row.get("time_min_s") or row["time_s"]
        if fastest_s > 2 * latency_s:
            rates.append(ring_factor(world) * row["size_bytes"] * 8 / (fastest_s - latency_s) / 1e9)
    return max(rates) if rates else peak_busbw_gbps(probe)


def allreduce_latency_s(probe: dict) -> float | None:
    """Fastest repetition of the smallest all-reduce: the least any one all-reduce call (a bucket) costs."""
    rows = [row for row in probe.get("allreduce") or [] if row.get("time_s")]
    if not rows:
        return None
    smallest = min(rows, key=lambda row: row["size_bytes"])
    return smallest.get("time_min_s") or smallest["time_s"]


def probe_alpha_beta(probe: dict) -> tuple[float, float] | None:
    """alpha and beta from a probe set's all-reduce sizes (see fit_alpha_beta_rows)."""
    return fit_alpha_beta_rows(probe.get("allreduce") or [], int(probe.get("world_size") or 0))


def fit_alpha_beta_rows(rows: list[dict], world_size: int) -> tuple[float, float] | None:
    """alpha (s per all-reduce call) and beta (s per byte through a link) for
    time = alpha + 2(n-1)/n x size x beta, from rows with size_bytes, time_s and optionally time_min_s.

    This is the one estimator of Stash (probes, fits and predictions all use it), chosen because the two
    parameters are best seen in different messages:
      - alpha is the latency of a call, seen in the smallest message: its fastest repetition, less the
        small wire time that message still needs (so alpha is not overstated by size x beta);
      - beta is the least-squares slope of the mean times with alpha fixed, unweighted, so that the large
        messages - where bytes, not latency, dominate, as in a gradient bucket - set it. A fit weighted
        by 1/time (relative errors) lets the small messages, which a shaper's burst or a cache flatters,
        pull beta down, and an ordinary two-parameter fit lets the large messages' absolute noise swing
        the intercept, even below zero.
    alpha and beta are solved alternately; three rounds converge, since the smallest message's wire time
    is a tiny part of the largest's. None with fewer than two sizes or a non-positive beta.
    """
    factor = ring_factor(world_size) or 1.0
    usable = [row for row in rows if row.get("time_s") and row.get("size_bytes")]
    if len({row["size_bytes"] for row in usable}) < 2:
        return None
    small_size = min(row["size_bytes"] for row in usable)
    # Rows of several probes: the fastest call of the smallest size in any of them, not the first listed.
    fastest_small_s = min(
        row.get("time_min_s") or row["time_s"] for row in usable if row["size_bytes"] == small_size
    )
    small_bytes = small_size * factor
    link_bytes = [row["size_bytes"] * factor for row in usable]
    alpha_s = fastest_small_s
    beta = 0.0
    for _ in range(3):
        slope_num = sum(x * (row["time_s"] - alpha_s) for x, row in zip(link_bytes, usable, strict=True))
        beta = slope_num / sum(x * x for x in link_bytes)
        if beta <= 0:
            return None
        alpha_s = max(0.0, fastest_small_s - small_bytes * beta)
    return alpha_s, beta


def beta_from_gbps(gbps: float) -> float:
    """Seconds per byte of a link of `gbps` gigabits per second."""
    return 8.0 / (gbps * 1e9)


def bucket_count(
    grad_bytes: float,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    first_bucket_bytes: int | None = DDP_FIRST_BUCKET_BYTES,
) -> int:
    """All-reduce calls DDP makes per iteration: ceil over the bucket size, after a small first bucket."""
    if grad_bytes <= 0:
        return 0
    if first_bucket_bytes is None or first_bucket_bytes <= 0:
        return math.ceil(grad_bytes / bucket_bytes)
    return 1 + math.ceil(max(0.0, grad_bytes - first_bucket_bytes) / bucket_bytes)


def alpha_beta_allreduce_s(grad_bytes: int, world_size: int, alpha_s: float, beta_s_per_byte: float) -> float:
    """Predicted gradient all-reduce time: one alpha per DDP bucket plus ring factor x bytes x beta."""
    if world_size <= 1:
        return 0.0
    return bucket_count(grad_bytes) * alpha_s + ring_factor(world_size) * grad_bytes * beta_s_per_byte


def ring_lower_bound_s(
    grad_bytes: int, world_size: int, wire_gbps: float | None, latency_s: float | None = None
) -> float | None:
    """Ring all-reduce lower bound of the gradient bytes in DDP's buckets: every bucket pays the call
    latency plus 2(n-1)/n x its bytes at the wire's bus bandwidth (see wire_busbw_gbps, which takes
    the latency off so that it is not counted twice)."""
    if world_size <= 1:
        return 0.0
    if not wire_gbps or wire_gbps <= 0:
        return None
    buckets = ddp_bucket_sizes(grad_bytes)
    return len(buckets) * (latency_s or 0.0) + ring_factor(world_size) * grad_bytes * 8 / (wire_gbps * 1e9)


def link_lower_bound_s(grad_bytes: int, world_size: int, link_bps: float | None) -> float | None:
    """The physical limit of a link of link_bps bits per second: 2(n-1)/n x bytes / rate, no latency."""
    if world_size <= 1:
        return 0.0
    if not link_bps or link_bps <= 0:
        return None
    return ring_factor(world_size) * grad_bytes * 8 / link_bps


# The note of a stall whose gradients' size is not known (a script's model): its probes' rates alone are said.
GRADIENT_BYTES_UNKNOWN = "gradient bytes unknown"


def communication_bounds(
    stall: str,
    stall_entry: dict,
    probe: dict | None,
    reference_probe: dict | None,
    grad_bytes: int | None,
    backward_s: dict[str, float],
    reference_phase: str,
    phase: str,
    link_bps: float | None = None,
) -> dict:
    """The lower bound and overlap of one communication stall, for the breakdown.

    allreduce_s is the probe's measured gradient all-reduce on the stall's layout; added_allreduce_s
    subtracts the reference run's (what spreading the workers added). exposed_s is how much longer
    backward (which holds DDP's all-reduce) took than in the reference run; overlap_share is the part
    of the added all-reduce time that backward computation hid: 1 - exposed / added, clamped to 0..1.
    """
    out: dict = {"stall": stall, "phase": phase, "reference_phase": reference_phase, "grad_bytes": grad_bytes}
    if probe is None:
        out["note"] = "no probe for this layout"
        return out
    world = int(probe.get("world_size") or 0)
    busbw = peak_busbw_gbps(probe)
    latency_s = allreduce_latency_s(probe)
    wire_gbps = wire_busbw_gbps(probe, latency_s)
    if wire_gbps is not None and link_bps:  # a shaper's burst lets a repetition beat the link, not for long
        wire_gbps = min(wire_gbps, link_bps / 1e9)
    if not grad_bytes:  # a script's model is its own: what its links reached is still measured
        out.update({"note": GRADIENT_BYTES_UNKNOWN, "world_size": world, "nodes": probe.get("nodes"),
                    "busbw_gbps": busbw, "wire_busbw_gbps": wire_gbps, "latency_s": latency_s})  # fmt: skip
        return out
    gradient = probe.get("gradient_allreduce") or {}
    allreduce_s = gradient.get("time_s")
    reference_s = (
        (reference_probe or {}).get("gradient_allreduce", {}).get("time_s") if reference_probe else None
    )
    added_s = allreduce_s - (reference_s or 0.0) if allreduce_s is not None else None
    exposed_s = None
    if phase in backward_s and reference_phase in backward_s:
        exposed_s = backward_s[phase] - backward_s[reference_phase]
    overlap_share = None
    if added_s and added_s > 0 and exposed_s is not None:
        overlap_share = min(1.0, max(0.0, 1.0 - exposed_s / added_s))
    lower_s = ring_lower_bound_s(grad_bytes, world, wire_gbps, latency_s)
    if lower_s is not None and allreduce_s is not None:
        lower_s = min(lower_s, allreduce_s)  # a bound from the probe's rates is never above what it measured
    fit = probe_alpha_beta(probe)
    predicted_s = alpha_beta_allreduce_s(grad_bytes, world, *fit) if fit else None
    seconds = stall_entry.get("seconds") if stall_entry else None
    out.update(
        {
            "world_size": world,
            "nodes": probe.get("nodes"),
            "buckets": len(ddp_bucket_sizes(grad_bytes)),
            "ring_factor": ring_factor(world),
            "busbw_gbps": busbw,
            "wire_busbw_gbps": wire_gbps,
            "latency_s": latency_s,
            "lower_bound_s": lower_s,
            "alpha_s": fit[0] if fit else None,
            "beta_s_per_byte": fit[1] if fit else None,
            "alpha_beta_s": predicted_s,
            "link_gbps": link_bps / 1e9 if link_bps else None,
            "link_lower_bound_s": link_lower_bound_s(grad_bytes, world, link_bps) if link_bps else None,
            "allreduce_s": allreduce_s,
            "reference_allreduce_s": reference_s,
            "added_allreduce_s": added_s,
            "exposed_s": exposed_s,
            "overlap_share": overlap_share,
            "stall_over_lower_bound": seconds / lower_s if seconds is not None and lower_s else None,
        }
    )
    return out
