"""Measuring probes inside a running process group, and the entry point of a `stash probe` worker.

    python -m torch.distributed.run ... -m stash_core.measure.probe_worker --job-json '{"probe": {...}, ...}'

run_probe_suite() is also called by stash_core.measure.worker after a training run's timed loop, so a
profile's probe uses the very process group (backend, devices, links) the run measured. Every rank
calls the same collectives in the same order; the decisions (how many repetitions, which sizes to
skip) are taken from all-reduced (MAX) timings so that all ranks agree. Rank 0 returns the result.
"""

from __future__ import annotations

import datetime
import os
import socket
import time

import torch
import torch.distributed as dist

from stash_core.analysis.comm import algbw_gbps, busbw_gbps, ddp_bucket_sizes
from stash_core.measure import protocol
from stash_core.measure.probe_plan import (
    FLOAT_BYTES,
    P2P_ESTIMATE_BYTES,
    bounded_by_allreduce_s,
    predicted_one_way_s,
    repetitions_for,
    wire_s,
)
from stash_core.measure.worker_job import read_worker_job


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _slowest(value: float, device: torch.device) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def _timed(operation, device: torch.device) -> float:
    start = time.perf_counter()
    operation()
    _sync(device)
    return time.perf_counter() - start


def _repeat(
    operation, device: torch.device, budget_s: float, max_repetitions: int
) -> tuple[list[float], float]:
    """Run once (warm-up and estimate), agree on the repetitions, run them; (times, first_s)."""
    first_s = _slowest(_timed(operation, device), device)
    extra = repetitions_for(first_s, budget_s, max_repetitions)
    times = [_timed(operation, device) for _ in range(extra)]
    return times, first_s


def _summary(times: list[float], size_bytes: int, world_size: int, device: torch.device) -> dict:
    mean_s = _slowest(sum(times) / len(times), device)
    min_s = _slowest(min(times), device)
    return {
        "size_bytes": size_bytes,
        "repetitions": len(times),
        "time_s": mean_s,
        "time_min_s": min_s,
        "algbw_gbps": algbw_gbps(size_bytes, mean_s),
        "busbw_gbps": busbw_gbps(size_bytes, mean_s, world_size),
    }


def measure_allreduce(
    sizes_bytes: list[int], device: torch.device, settings: dict
) -> tuple[list[dict], list[int]]:
    """All-reduce time per message size; sizes predicted to exceed max_op_s are skipped (and returned)."""
    world = dist.get_world_size()
    rows, skipped = [], []
    max_op_s = settings.get("max_op_s")
    previous: tuple[int, float] | None = None
    ring_share = 2 * (world - 1) / world  # of the bytes, on the slowest link (bus bandwidth)
    for size in sorted(sizes_bytes):
        floor_s = wire_s(int(ring_share * size), settings.get("link_gbps"))
        if max_op_s and (floor_s > max_op_s or previous and previous[1] * size / previous[0] > max_op_s):
            skipped.append(size)
            continue
        numel = max(1, size // FLOAT_BYTES)
        buffer = torch.zeros(numel, dtype=torch.float32, device=device)
        times, _ = _repeat(lambda b=buffer: dist.all_reduce(b), device, settings["budget_s_per_size"],
                           settings["max_repetitions"])  # fmt: skip
        row = _summary(times, numel * FLOAT_BYTES, world, device)
        rows.append(row)
        previous = (row["size_bytes"], row["time_s"])
        del buffer
    return rows, skipped


def measure_gradient_allreduce(grad_bytes: int, device: torch.device, settings: dict) -> dict:
    """The gradient bytes all-reduced in DDP's bucket sizes, one bucket after the other."""
    sizes = ddp_bucket_sizes(grad_bytes)
    buckets = [torch.zeros(max(1, size // FLOAT_BYTES), dtype=torch.float32, device=device) for size in sizes]

    def all_buckets() -> None:
        for bucket in buckets:
            dist.all_reduce(bucket)

    times, _ = _repeat(all_buckets, device, settings["budget_s_per_size"] * 2, settings["max_repetitions"])
    row = _summary(times, grad_bytes, dist.get_world_size(), device)
    row["buckets"] = len(sizes)
    return row


def _peers(device: torch.device) -> dict[str, int]:
    """Rank 0's partners: a rank on another machine (inter_node) and one on its own (intra_node)."""
    node = int(os.environ.get("GROUP_RANK", "0"))
    mine = torch.tensor([node], dtype=torch.int64, device=device)
    nodes = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(nodes, mine)
    node_of = [int(tensor.item()) for tensor in nodes]
    peers = {}
    for rank in range(1, len(node_of)):
        scope = "intra_node" if node_of[rank] == node_of[0] else "inter_node"
        peers.setdefault(scope, rank)
    return peers


def measure_p2p(
    peer: int, sizes_bytes: list[int], device: torch.device, settings: dict, link_gbps: float | None = None,
    allreduce_gbps: float | None = None,
) -> tuple[list[dict], list[int]]:
    """Ping-pong between rank 0 and peer; one-way time = round trip / 2. Other ranks just wait. With a time
    limit per call (max_op_s), a message larger than P2P_ESTIMATE_BYTES is skipped (and returned) when its
    time, predicted from a ping-pong of that size (bounded by the all-reduce's bus bandwidth, where
    measured), would pass the limit."""
    rank = dist.get_rank()
    max_op_s = settings.get("max_op_s")
    rows, skipped = [], []
    for size in sizes_bytes:
        numel = max(1, size // FLOAT_BYTES) if size >= FLOAT_BYTES else 1
        if max_op_s and size > P2P_ESTIMATE_BYTES and rank in (0, peer):
            # both ends know (same settings) that this message is announced, and whether it is sent
            last = rows[-1] if rows else None
            go = _p2p_fits(peer, numel * FLOAT_BYTES, last, max_op_s, device, link_gbps, allreduce_gbps)
            if not go:
                skipped.append(numel * FLOAT_BYTES)
        else:
            go = True
        if go and rank in (0, peer):
            row = _ping_pong(peer, numel, device, settings)
            if row is not None:
                rows.append(row)
        dist.barrier()
    return rows, skipped


def _p2p_fits(
    peer: int, size_bytes: int, latency: dict | None, max_op_s: float, device: torch.device,
    link_gbps: float | None = None, allreduce_gbps: float | None = None,
) -> bool:
    """Whether a message of size_bytes between rank 0 and peer is predicted to pass within max_op_s one way:
    rank 0 times two ping-pongs of P2P_ESTIMATE_BYTES and tells peer what it decided."""
    estimate = torch.zeros(P2P_ESTIMATE_BYTES // FLOAT_BYTES, dtype=torch.float32, device=device)
    decision = torch.zeros(1, dtype=torch.int64, device=device)
    if dist.get_rank() == 0:

        def ping() -> None:
            dist.send(estimate, peer)
            dist.recv(estimate, peer)

        estimate_s = min(_timed(ping, device) for _ in range(2)) / 2
        smaller = latency is not None and latency["size_bytes"] < P2P_ESTIMATE_BYTES
        known = (latency["size_bytes"], latency["time_min_s"]) if smaller else None
        predicted_s = predicted_one_way_s(size_bytes, (P2P_ESTIMATE_BYTES, estimate_s), known)
        latency_s = known[1] if known else 0.0
        predicted_s = bounded_by_allreduce_s(predicted_s, size_bytes, allreduce_gbps, latency_s)
        predicted_s = max(predicted_s, wire_s(size_bytes, link_gbps))  # never faster than the link
        decision[0] = 1 if predicted_s <= max_op_s else 0
        dist.send(decision, peer)
    else:
        for _ in range(2):
            dist.recv(estimate, 0)
            dist.send(estimate, 0)
        dist.recv(decision, 0)
    return bool(decision.item())


def _ping_pong(peer: int, numel: int, device: torch.device, settings: dict) -> dict | None:
    """One message size between rank 0 and peer: a warm-up round trip, then as many as fit the budget. Rank 0
    returns the row, peer None."""
    buffer = torch.zeros(numel, dtype=torch.float32, device=device)
    count = torch.zeros(1, dtype=torch.int64, device=device)
    if dist.get_rank() != 0:

        def pong(message: torch.Tensor = buffer) -> None:
            dist.recv(message, 0)
            dist.send(message, 0)

        pong()
        dist.recv(count, 0)
        for _ in range(int(count.item())):
            pong()
        return None

    def ping(message: torch.Tensor = buffer) -> None:
        dist.send(message, peer)
        dist.recv(message, peer)

    first_s = _timed(ping, device)
    count[0] = repetitions_for(first_s, settings["budget_s_per_size"], settings["max_repetitions"])
    dist.send(count, peer)
    times = [_timed(ping, device) for _ in range(int(count.item()))]
    one_way_s = sum(times) / len(times) / 2
    return {
        "size_bytes": numel * FLOAT_BYTES,
        "repetitions": len(times),
        "time_s": one_way_s,
        "time_min_s": min(times) / 2,
        "algbw_gbps": algbw_gbps(numel * FLOAT_BYTES, one_way_s),
        "busbw_gbps": algbw_gbps(numel * FLOAT_BYTES, one_way_s),
        "peer_rank": peer,
    }


def run_probe_suite(settings: dict, device: torch.device) -> dict:
    """All probes of `settings` (see probes.probe_settings) on the current process group."""
    started_at = datetime.datetime.now(datetime.UTC).isoformat()
    world = dist.get_world_size()
    allreduce, skipped = measure_allreduce(settings["sizes_bytes"], device, settings)
    gradient = None
    if settings.get("grad_bytes"):
        gradient = measure_gradient_allreduce(int(settings["grad_bytes"]), device, settings)
    p2p, skipped_p2p = [], []
    # gloo's ring sends on the very sockets a point-to-point message takes: its bus bandwidth bounds one
    # (NCCL's all-reduce may spread over several NICs where one send takes one: there it bounds nothing)
    rates = [row["busbw_gbps"] for row in allreduce if row.get("busbw_gbps")]
    reached = max(rates, default=None) if device.type == "cpu" else None
    for scope, peer in sorted(_peers(device).items()):
        link = settings.get("link_gbps") if scope == "inter_node" else None  # shaped: between machines
        rows, too_slow = measure_p2p(peer, settings["p2p_sizes_bytes"], device, settings, link, reached)
        p2p += [{**row, "scope": scope} for row in rows]
        skipped_p2p += [{"scope": scope, "size_bytes": size} for size in too_slow]
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    return {
        "started_at": started_at,
        "hostname": socket.gethostname(),
        "backend": dist.get_backend(),
        "device": device.type,
        "world_size": world,
        "nodes": max(1, world // max(per_node, 1)),
        "workers_per_node": per_node,
        "allreduce": allreduce,
        "skipped_sizes_bytes": skipped,
        "gradient_allreduce": gradient,
        "p2p": p2p,
        "skipped_p2p": skipped_p2p,
    }


def main(argv: list[str] | None = None) -> int:
    """A `stash probe` worker: join the process group, run the probe suite, rank 0 prints the result."""

    job = read_worker_job(argv)
    rank = int(os.environ.get("RANK", "0"))
    try:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device(f"cuda:{local_rank}" if job["device"] == "cuda" else "cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        torch.set_num_threads(int(job.get("threads_per_worker") or 1))
        timeout_s = int(os.environ.get("STASH_RDZV_TIMEOUT_S") or job.get("pg_timeout_s") or 120)
        dist.init_process_group(backend=job["backend"], timeout=datetime.timedelta(seconds=timeout_s))
        if dist.get_world_size() < 2:
            raise ValueError("a probe needs at least two workers")
        result = run_probe_suite(job["probe"], device)
    except Exception as error:  # noqa: BLE001 - reported as one line to the launcher
        protocol.emit("ERROR", f"rank {rank}: {type(error).__name__}: {error}".splitlines()[0])
        return 1
    if rank == 0:
        protocol.emit("RESULT", result)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    protocol.start_worker(protocol.PROBE_NAME)
    protocol.end_reported(main())
