"""Bandwidth and latency probes: what they measure, the lower bounds they give, and how they are shown.

A probe set is measured inside the workers of a run (see probe_worker.py) through torch.distributed
with the run's backend:

  - all-reduce of one message per size, reported as algorithm bandwidth (size / time) and bus
    bandwidth (2(n-1)/n x size / time: what each link of a ring all-reduce carries per second, so
    it can be set beside a link's rate);
  - the gradient all-reduce: the model's gradient bytes in DDP's bucket sizes (1 MiB first, then
    25 MiB), one after the other - "the measured all-reduce time of the gradients";
  - point-to-point ping-pong between rank 0 and a rank on another machine (inter_node) and one on
    the same machine (intra_node): one-way latency (8 bytes) and bandwidth (a large message).

Every figure is the slowest rank's. Rates are in Gbit/s (gigabits per second, like tc's rates and
`instances.network_gbps`). Nothing here imports torch; probe_worker.py does the measuring.
"""

from __future__ import annotations

from collections.abc import Iterable

KIB = 1024
MIB = 1024 * 1024
# `stash probe`: 4 KiB .. 256 MiB in steps of 4x.
PROBE_SIZES_BYTES = tuple(4 * KIB * 4**step for step in range(9))
# The probe every multi-worker profile runs: a few sizes, enough for latency and bandwidth.
PROFILE_PROBE_SIZES_BYTES = (4 * KIB, 64 * KIB, 1 * MIB, 4 * MIB)
P2P_LATENCY_BYTES = 8
PROFILE_P2P_BANDWIDTH_BYTES = 1 * MIB
PROBE_P2P_BANDWIDTH_BYTES = 16 * MIB
# DDP's buckets: a small first bucket so that communication starts early, then bucket_cap_mb = 25.
DDP_FIRST_BUCKET_BYTES = 1 * MIB
DDP_BUCKET_BYTES = 25 * MIB
# Time spent on one size, beyond its first (warm-up and estimate) repetition.
DEFAULT_BUDGET_S_PER_SIZE = 0.3
DEFAULT_MAX_REPETITIONS = 20


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
) -> dict:
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


# ---------------------------------------------------------------- reading a probe set


def peak_busbw_gbps(probe: dict) -> float | None:
    """The highest bus bandwidth over the all-reduce sizes (each from its mean time)."""
    rates = [row.get("busbw_gbps") for row in probe.get("allreduce") or []]
    rates = [rate for rate in rates if rate]
    return max(rates) if rates else None


def wire_busbw_gbps(probe: dict, latency_s: float | None) -> float | None:
    """The bus bandwidth of the wire alone, from the largest message: ring bytes / (its fastest time - the
    call latency). Smaller messages are left out: a shaper's burst (tc's token bucket lets tens to hundreds
    of KiB through at once) or a cache flatters them. When even the largest one is dominated by latency,
    the peak bus bandwidth."""
    world = int(probe.get("world_size") or 0)
    latency_s = latency_s or 0.0
    rows = [row for row in probe.get("allreduce") or [] if row.get("size_bytes") and row.get("time_s")]
    if not rows:
        return None
    largest = max(rows, key=lambda row: row["size_bytes"])
    fastest_s = largest.get("time_min_s") or largest["time_s"]
    if fastest_s <= 2 * latency_s:
        return peak_busbw_gbps(probe)
    return ring_factor(world) * largest["size_bytes"] * 8 / (fastest_s - latency_s) / 1e9


def allreduce_latency_s(probe: dict) -> float | None:
    """Fastest repetition of the smallest all-reduce: the least any one all-reduce call (a bucket) costs."""
    rows = [row for row in probe.get("allreduce") or [] if row.get("time_s")]
    if not rows:
        return None
    smallest = min(rows, key=lambda row: row["size_bytes"])
    return smallest.get("time_min_s") or smallest["time_s"]


def fit_alpha_beta(probe: dict) -> tuple[float, float] | None:
    """alpha (s per all-reduce call) and beta (s per byte through a link) from the all-reduce sizes, for
    time = alpha + 2(n-1)/n x size x beta.

    alpha is the fastest call of the smallest message; beta the least-squares slope of the mean times
    with that alpha fixed, unweighted, so that the large messages - where bytes, not latency, dominate,
    as in a gradient bucket - set it. (A relative-error fit lets small messages, which a shaper's burst
    or a cache flatters, pull beta down.) None with fewer than two sizes or a non-positive beta.
    """
    world = int(probe.get("world_size") or 0)
    factor = ring_factor(world) or 1.0
    rows = [row for row in probe.get("allreduce") or [] if row.get("time_s") and row.get("size_bytes")]
    if len({row["size_bytes"] for row in rows}) < 2:
        return None
    alpha_s = allreduce_latency_s(probe) or 0.0
    points = [(row["size_bytes"] * factor, row["time_s"] - alpha_s) for row in rows]
    beta = sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    if beta <= 0:
        return None
    return alpha_s, beta


def alpha_beta_allreduce_s(grad_bytes: int, world_size: int, alpha_s: float, beta_s_per_byte: float) -> float:
    """Predicted gradient all-reduce time: one alpha per DDP bucket plus ring factor x bytes x beta."""
    if world_size <= 1:
        return 0.0
    return (
        len(ddp_bucket_sizes(grad_bytes)) * alpha_s + ring_factor(world_size) * grad_bytes * beta_s_per_byte
    )


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
    if probe is None or not grad_bytes:
        out["note"] = "no probe for this layout" if probe is None else "gradient bytes unknown"
        return out
    world = int(probe.get("world_size") or 0)
    busbw = peak_busbw_gbps(probe)
    latency_s = allreduce_latency_s(probe)
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
    wire_gbps = wire_busbw_gbps(probe, latency_s)
    lower_s = ring_lower_bound_s(grad_bytes, world, wire_gbps, latency_s)
    fit = fit_alpha_beta(probe)
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


# ---------------------------------------------------------------- rows for the store


def probe_rows(probe: dict, instance: str | None = None, link_gbps: float | None = None) -> list[dict]:
    """One row per measured figure of a probe set, with the columns of the `probes` table."""
    common = {
        "probe_id": probe.get("probe_id"),
        "run_id": probe.get("run_id"),
        "phase": probe.get("phase"),
        "started_at": probe.get("started_at"),
        "hostname": probe.get("hostname"),
        "instance": instance if instance is not None else probe.get("instance"),
        "backend": probe.get("backend"),
        "device": probe.get("device"),
        "world_size": probe.get("world_size"),
        "nodes": probe.get("nodes"),
        "workers_per_node": probe.get("workers_per_node"),
        "link_gbps": link_gbps if link_gbps is not None else probe.get("link_gbps"),
    }
    rows = []
    for entry in probe.get("allreduce") or []:
        rows.append({**common, "kind": "allreduce", "scope": "all", **_measure(entry)})
    gradient = probe.get("gradient_allreduce")
    if gradient:
        rows.append({**common, "kind": "gradient_allreduce", "scope": "all", **_measure(gradient)})
    for entry in probe.get("p2p") or []:
        rows.append({**common, "kind": "p2p", "scope": entry.get("scope"), **_measure(entry)})
    return rows


def _measure(entry: dict) -> dict:
    return {
        "size_bytes": entry.get("size_bytes"),
        "repetitions": entry.get("repetitions"),
        "time_s": entry.get("time_s"),
        "time_min_s": entry.get("time_min_s"),
        "algbw_gbps": entry.get("algbw_gbps"),
        "busbw_gbps": entry.get("busbw_gbps"),
    }


# ---------------------------------------------------------------- text


def format_size(size_bytes: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale:
            value = size_bytes / scale
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(size_bytes)} B"


def format_rate(gbps: float | None) -> str:
    if gbps is None:
        return "-"
    return f"{gbps:.2f} Gbit/s" if gbps >= 1 else f"{gbps * 1000:.0f} Mbit/s"


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if abs(seconds) < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def format_probe(probe: dict) -> str:
    """The table `stash probe` prints: one line per all-reduce size, then gradients and point-to-point."""
    head = (
        f"probe over {probe.get('world_size')} worker(s) on {probe.get('nodes')} machine(s), "
        f"{probe.get('backend')} on {probe.get('device')}"
    )
    lines = [head, f"  {'all-reduce':<12}{'size':>10}{'reps':>6}{'time':>11}{'algbw':>15}{'busbw':>15}"]
    for row in probe.get("allreduce") or []:
        lines.append(
            f"  {'':<12}{format_size(row['size_bytes']):>10}{row['repetitions']:>6}"
            f"{format_time(row['time_s']):>11}{format_rate(row.get('algbw_gbps')):>15}"
            f"{format_rate(row.get('busbw_gbps')):>15}"
        )
    for skipped in probe.get("skipped_sizes_bytes") or []:
        lines.append(
            f"  {'':<12}{format_size(skipped):>10}  skipped: would exceed the time limit of one call"
        )
    gradient = probe.get("gradient_allreduce")
    if gradient:
        lines.append(
            f"  gradients {format_size(gradient['size_bytes'])} in {gradient.get('buckets')} DDP bucket(s): "
            f"{format_time(gradient['time_s'])} (busbw {format_rate(gradient.get('busbw_gbps'))})"
        )
    for row in probe.get("p2p") or []:
        if row["size_bytes"] <= P2P_LATENCY_BYTES:
            lines.append(f"  p2p {row.get('scope', ''):<11} latency  one-way {format_time(row['time_s'])}")
        else:
            lines.append(
                f"  p2p {row.get('scope', ''):<11} bandwidth {format_rate(row.get('algbw_gbps'))} "
                f"({format_size(row['size_bytes'])} one-way in {format_time(row['time_s'])})"
            )
    fit = fit_alpha_beta(probe)
    if fit:
        alpha_s, beta = fit
        lines.append(
            f"  alpha-beta fit: alpha {format_time(alpha_s)} per call, beta -> {format_rate(8 / beta / 1e9)}"
        )
    return "\n".join(lines)


def format_communication(breakdown: dict | None) -> list[str]:
    """Lines for the CLI table: which runs the network figure compares, lower bounds and overlap."""
    if not breakdown:
        return []
    lines = []
    if breakdown.get("network_reference"):
        lines.append(f"network figure compares {breakdown['network_reference']}")
    rows = [(stall, bounds) for stall, bounds in (breakdown.get("communication") or {}).items()
            if bounds and bounds.get("allreduce_s") is not None]  # fmt: skip
    if not rows:
        return lines
    first = rows[0][1]
    lines.append(
        f"gradient all-reduce of {format_size(first['grad_bytes'])} in {first['buckets']} DDP bucket(s), "
        "from the probes:"
    )
    lines.append(
        f"  {'':<14}{'workers':>8}{'measured':>11}{'lower bound':>13}{'link limit':>12}{'wire bw':>14}"
        f"{'exposed':>10}{'hidden':>8}"
    )
    for stall, bounds in rows:
        hidden = bounds.get("overlap_share")
        lines.append(
            f"  {stall:<14}{bounds['world_size']:>8}{format_time(bounds['allreduce_s']):>11}"
            f"{format_time(bounds.get('lower_bound_s')):>13}{format_time(bounds.get('link_lower_bound_s')):>12}"
            f"{format_rate(bounds.get('wire_busbw_gbps')):>14}{format_time(bounds.get('exposed_s')):>10}"
            f"{(f'{hidden:.0%}' if hidden is not None else '-'):>8}"
        )
    return lines


# ---------------------------------------------------------------- `stash probe`


def probe_sizes(min_size_bytes: int, max_size_bytes: int) -> list[int]:
    """Message sizes from min to max in steps of 4x, max included."""
    sizes, size = [], min_size_bytes
    while size < max_size_bytes:
        sizes.append(size)
        size *= 4
    return [*sizes, max_size_bytes]


def run_probe_command(
    workers_per_node: int,
    nodes: int,
    device: str,
    min_size_bytes: int,
    max_size_bytes: int,
    p2p_size_bytes: int,
    gradient_bytes: int | None,
    budget_s: float,
    threads_per_worker: int,
    instance: str | None,
    machine_args,
) -> dict:
    """Launch a probe (here, or on --hosts / --cluster machines) and return it as a "stash-probe" document."""
    import datetime
    import secrets
    import time
    from pathlib import Path

    from stash_core import __version__
    from stash_core.cli.profile import cuda_device_count, parse_hosts
    from stash_core.errors import MeasurementError, UsageError
    from stash_core.launch.hosts import check_hosts, hosts_from_cluster, hosts_from_names
    from stash_core.launch.runner import run_workers, worker_env
    from stash_core.measure import protocol
    from stash_core.measure.fingerprint import machine_fingerprint

    if workers_per_node * nodes < 2:
        raise UsageError("a probe needs at least two workers (--workers 2, or --nodes 2)")
    if budget_s <= 0 or threads_per_worker < 1:
        raise UsageError("--budget must be positive and --threads-per-worker at least 1")
    hosts = parse_hosts(machine_args.hosts)
    remote = None
    if machine_args.cluster == "emulated":
        state = Path(machine_args.cluster_state) if machine_args.cluster_state else None
        remote = hosts_from_cluster(nodes, state, machine_args.python, machine_args.workdir,
                                    machine_args.master_port, machine_args.comm_timeout)  # fmt: skip
    elif hosts:
        if len(hosts) != nodes:
            raise UsageError(f"--hosts names {len(hosts)} host(s) for --nodes {nodes}; give one per node")
        remote = hosts_from_names(
            hosts, machine_args.ssh_user, machine_args.ssh_key, machine_args.python, machine_args.workdir,
            machine_args.master_addr, machine_args.master_port, machine_args.comm_timeout,
        )  # fmt: skip
    elif nodes > 1:
        raise UsageError(f"--nodes {nodes}: say which machines with --hosts or --cluster emulated")
    if remote is not None:
        first = check_hosts(remote)[0]
        gpus = int(first.get("gpu_count") or 0) if first.get("cuda_available") else 0
        cores = len(remote.cpu_sets[0]) if remote.cpu_sets else int(first.get("cpu_count") or 1)
    else:
        import os

        gpus, cores = cuda_device_count(), len(os.sched_getaffinity(0))
    if device == "auto":
        device = "cuda" if gpus else "cpu"
    capacity = gpus if device == "cuda" else cores
    if workers_per_node > capacity:
        unit = "GPU(s)" if device == "cuda" else "CPU core(s)"
        raise UsageError(f"--workers {workers_per_node}: a machine here has {capacity} {unit}")
    max_op_s = remote.comm_timeout_s / 3 if remote is not None else None
    job = {
        "device": device,
        "backend": "nccl" if device == "cuda" else "gloo",
        "threads_per_worker": threads_per_worker,
        "probe": probe_settings(
            gradient_bytes,
            probe_sizes(min_size_bytes, max_size_bytes),
            p2p_size_bytes,
            budget_s,
            max_op_s=max_op_s,
        ),  # fmt: skip
    }
    results: dict = {}
    errors: list[str] = []

    def on_line(line: str) -> None:
        message = protocol.parse(line)
        if message and message[0] == "RESULT":
            results["probe"] = message[1]
        elif message and message[0] == "ERROR":
            errors.append(str(message[1]))

    started = datetime.datetime.now(datetime.UTC)
    wall_start = time.monotonic()
    failure = run_workers(
        "stash_core.measure.probe_worker", job, workers_per_node, nodes, remote, on_line, 900.0,
        worker_env(threads_per_worker),
    )  # fmt: skip
    if failure or errors or "probe" not in results:
        reason = failure or (errors[0] if errors else "the probe exited without a result")
        if failure and errors:
            reason = f"{failure}; first worker error: {errors[0]}"
        raise MeasurementError(f"probe failed: {reason}")
    link = (remote.link or {}) if remote is not None else {}
    return {
        "schema_version": 1,
        "kind": "stash-probe",
        "probe_id": f"probe-{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(4)}",
        "run_id": None,
        "phase": None,
        "stash_version": __version__,
        "instance": instance,
        "machines": remote.label if remote is not None else "this machine",
        "hosts": remote.host_names if remote is not None else [],
        "link_gbps": link["rate_bps"] / 1e9 if nodes > 1 and link.get("rate_bps") else None,
        "fingerprint": machine_fingerprint(instance),
        "wall_s": time.monotonic() - wall_start,
        **results["probe"],
        "started_at": started.isoformat(),
    }
