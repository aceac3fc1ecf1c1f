"""Hand-made result documents (schema_version 1) for the tests, and the database the dashboard tests share.

`result_doc` builds a run as the profiler reports one, from the per-iteration stall seconds it should show.
The phases telescope exactly: R0 = compute, R1 = + interconnect, R1n = + network, R3 = + cpu, R2 = + disk,
so every stall is known in advance. Only the stalls given are measured and have their phase; the others are
"not_measured". An epoch is analysis.epochs.iterations_per_epoch: full batches of each worker's shard.

- samples=True gives every phase per-iteration samples made as the profiler makes them: each rank's data,
  forward, backward and optimizer times add up to its iteration time, and the slowest rank of each iteration
  is kept. The phase statistics are computed from the kept samples, whose mean is still the telescoped time.
  Without samples a phase has its statistics only.
- telemetry=True gives every phase CPU, memory, disk and network series; {phase: {metric: values}} gives
  those phases the series given.
- status="failed" is a run that died in its second phase (its only one if it has one): no breakdown
  (partial_failed_doc keeps the breakdown of its first, as a profile does).

Random numbers come from `seed`, so every test sees the same data.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from stash_core import store
from stash_core.analysis.epochs import iterations_per_epoch

STALLS = ("compute", "interconnect", "network", "cpu", "disk")
DEFAULT_STALLS = {"compute": 0.2, "interconnect": 0.05, "cpu": 0.04, "disk": 0.03}
# (phase, the stall it adds to the one before, the data it reads), in the order a profile runs them.
_CHAIN = (
    ("R0", "compute", "synthetic"),
    ("R1", "interconnect", "synthetic"),
    ("R1n", "network", "synthetic"),
    ("R3", "cpu", "cached"),
    ("R2", "disk", "cold"),
)
_DATA = {
    "synthetic": "synthetic data on the device",
    "cached": "real data cached in memory",
    "cold": "real data read cold from disk",
}
_RESIDENT = {"synthetic": None, "cached": 1.0, "cold": 0.0}
_PARTS = ("data_s", "forward_s", "backward_s", "optimizer_s")
_WARMUP = 5
_INTERVAL_S = 0.5
_FIRST_START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
_serial = itertools.count(1)


def result_doc(
    model: str = "resnet18",
    *,
    run_id: str | None = None,
    started_at: datetime | None = None,
    status: str = "completed",
    stalls: dict[str, float] | None = None,
    samples: bool = False,
    telemetry: bool | dict[str, dict[str, list]] = False,
    iterations: int = 40,
    batch_size: int = 32,
    workers: int = 2,
    nodes: int = 1,
    instance: str | None = "box",
    device: str = "cpu",
    dataset_images: int | None = 2000,
    loader_workers: int = 2,
    cpu_cores: int = 4,
    grad_bytes: int = 46_758_048,
    grad_tensor_count: int = 62,
    layer_count: int = 41,
    warnings: list[str] | None = None,
    spec_extra: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """A fresh document whose breakdown holds exactly `stalls`: seconds per iteration, DEFAULT_STALLS if None.

    Without started_at, each call starts a minute after the one before (from 2026-11-22 10:01); without
    run_id, the run id is made of the start time and a serial number, so it is unique in the session.
    """
    if status not in ("completed", "failed"):
        raise ValueError(f"status must be completed or failed, not {status!r}")
    stalls = dict(DEFAULT_STALLS if stalls is None else stalls)
    if unknown := set(stalls) - set(STALLS):
        raise ValueError(f"unknown stalls {sorted(unknown)}")
    serial = next(_serial)
    started_at = started_at or _FIRST_START + timedelta(minutes=serial)
    run_id = run_id or f"{started_at:%Y%m%dT%H%M%SZ}-{serial:08x}"
    rng = np.random.default_rng(seed)

    chain, time_s = [], 0.0
    for name, stall, data in _CHAIN:
        if stall in stalls:
            time_s += stalls[stall]
            chain.append((name, data, time_s))
    if status == "failed":
        chain = chain[:2]  # the last of these is the phase that failed
    phases = []
    for index, (name, data, mean_s) in enumerate(chain):
        phase_workers, phase_nodes = (1, 1) if name == "R0" else (workers, 1 if name == "R1" else nodes)
        if status == "failed" and index == len(chain) - 1:
            phase = _failed_phase(name, data, phase_workers, phase_nodes, samples)
        else:
            phase = _phase(rng, name, data, mean_s, phase_workers, phase_nodes, iterations, samples)
        if isinstance(telemetry, dict):
            phase["telemetry"] = _telemetry_block(telemetry.get(name, {}))
        elif telemetry:
            phase["telemetry"] = _telemetry_block(_series(rng, data, phase["wall_s"]))
        phases.append(phase)

    per_epoch = iterations_per_epoch(dataset_images, batch_size, workers * nodes) if dataset_images else None
    breakdown = None
    if status == "completed":
        reference, _, iteration_s = chain[-1]
        breakdown = _breakdown(stalls, iteration_s, reference, per_epoch, warnings or [])
    wall_s = sum(phase["wall_s"] for phase in phases)
    last = phases[-1]
    return {
        "schema_version": 1,
        "kind": "stash-profile",
        "run_id": run_id,
        "status": status,
        "error": None if status == "completed" else f"phase {last['name']} failed: {last['error']}",
        "started_at": started_at.isoformat(),
        "finished_at": (started_at + timedelta(seconds=round(wall_s + 5.0))).isoformat(),
        "stash_version": "0.1.0",
        "spec": {
            "model": model,
            "batch_size": batch_size,
            "workers_per_node": workers,
            "nodes": nodes,
            "stalls": list(stalls),
            "dataset": None,
            "dataset_images": dataset_images,
            "synthetic_images": dataset_images,
            "loader_workers": loader_workers,
            "iterations": "auto",
            "device": device,
            "backend": "gloo" if device == "cpu" else "nccl",
            "instance": instance,
            "threads_per_worker": 1,
            "disk_read_mbps": None,
            "input_shape": [3, 224, 224],
            "num_classes": 1000,
            "hosts": [],
            **(spec_extra or {}),
        },
        "model": {
            "name": model,
            "kind": "image",
            "param_count": grad_bytes // 4,
            "grad_tensor_count": grad_tensor_count,
            "layer_count": layer_count,
            "grad_bytes": grad_bytes,
        },
        "fingerprint": {
            "hostname": "box1",
            "instance": instance,
            "cpu_model": "Example CPU",
            "cpu_cores_logical": cpu_cores,
            "cpu_cores_physical": cpu_cores,
            "memory_bytes": 16_000_000_000,
            "gpu_count": 0,
            "gpus": [],
            "gpu_status": "no GPU",
            "gpu_topology": None,
            "torch_version": "2.13.0+cpu",
            "cuda_version": None,
            "nccl_version": None,
            "python_version": "3.11.7",
            "os": "Linux 6.1",
        },
        "phases": phases,
        "breakdown": breakdown,
    }


def partial_failed_doc(**kwargs: Any) -> dict[str, Any]:
    """result_doc(status="failed", ...) with the breakdown of the phase that completed kept, as a profile
    keeps the breakdown of its completed phases (engine/profiler.breakdown_of_completed): its iteration time
    is that of R0, one worker, though the run had more."""
    doc = result_doc(status="failed", **kwargs)
    first = doc["phases"][0]
    time_s = first["iteration_s"]["mean"]
    stall = {name: stall for name, stall, _ in _CHAIN}[first["name"]]
    spec = doc["spec"]
    images = spec["dataset_images"]
    workers = spec["workers_per_node"] * spec["nodes"]
    per_epoch = iterations_per_epoch(images, spec["batch_size"], workers) if images else None
    doc["breakdown"] = _breakdown({stall: time_s}, time_s, first["name"], per_epoch, [])
    return doc


def without_iteration_time(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with a breakdown of no iteration time, as a file gives it for a run that timed nothing: no
    reference run, interval, stall figure or share (a NaN beside a timed reference run is refused)."""
    breakdown = doc["breakdown"]
    breakdown.update(iteration_s=float("nan"), iteration_ci95_s=None, reference_phase=None)
    for stall in breakdown["stalls"].values():
        stall.update(seconds=None, ci95_s=None, raw_s=None, share=None, epoch_s=None, epoch_ci95_s=None,
                     status="not_measured")  # fmt: skip
    return doc


def _header(name: str, data: str, workers: int, nodes: int) -> dict[str, Any]:
    where = "1 worker" if name == "R0" else f"{workers} workers on one machine"
    if nodes > 1:
        where = f"{workers} workers on each of {nodes} machines"
    description = f"{where}, {_DATA[data]}"
    return {"name": name, "description": description, "workers": workers, "nodes": nodes, "data": data}


def _phase(
    rng: np.random.Generator,
    name: str,
    data: str,
    mean_s: float,
    workers: int,
    nodes: int,
    iterations: int,
    samples: bool,
) -> dict[str, Any]:
    if samples:
        kept, rank_skew_s = _slowest_rank_samples(rng, mean_s, workers * nodes, iterations, data)
        times = np.asarray(kept["iteration_s"])
        std_s = float(times.std(ddof=1))
        stats = {
            "mean": float(times.mean()),
            "ci95": 1.96 * std_s / float(np.sqrt(iterations)),
            "std": std_s,
            "median": float(np.median(times)),
            "p5": float(np.percentile(times, 5)),
            "p95": float(np.percentile(times, 95)),
        }
        parts_mean_s = {key: float(np.mean(kept[key])) for key in _PARTS}
    else:
        kept, rank_skew_s = {}, 0.0
        stats = {
            "mean": mean_s,
            "ci95": mean_s * 0.01,
            "std": mean_s * 0.03,
            "median": mean_s,
            "p5": mean_s * 0.95,
            "p95": mean_s * 1.05,
        }
        parts_mean_s = _part_means(mean_s, data)
    return {
        **_header(name, data, workers, nodes),
        "status": "completed",
        "error": None,
        "resident_fraction_start": _RESIDENT[data],
        "warmup_iterations": _WARMUP,
        "iterations": iterations,
        "iteration_s": {**stats, "n": iterations},
        "parts_mean_s": parts_mean_s,
        "samples": kept,
        "rank_skew_s": rank_skew_s,
        "wall_s": round(mean_s * (_WARMUP + iterations) + 3.0, 3),
        "telemetry": _telemetry_block({}),
    }


def _failed_phase(name: str, data: str, workers: int, nodes: int, samples: bool) -> dict[str, Any]:
    return {
        **_header(name, data, workers, nodes),
        "status": "failed",
        "error": "worker 1 exited with code 1",
        "resident_fraction_start": None,
        "warmup_iterations": _WARMUP,
        "iterations": 0,
        "iteration_s": None,
        "parts_mean_s": None,
        "samples": {key: [] for key in ("iteration_s", *_PARTS, "slowest_rank")} if samples else {},
        "rank_skew_s": None,
        "wall_s": 4.2,
        "telemetry": _telemetry_block({}),
    }


def _part_means(mean_s: float, data: str) -> dict[str, float]:
    """Mean data, forward, backward and optimizer seconds that add up to an iteration of mean_s."""
    data_s = mean_s * (0.002 if data == "synthetic" else 0.1)
    rest_s = mean_s - data_s
    return {
        "data_s": data_s,
        "forward_s": rest_s * 0.35,
        "backward_s": rest_s * 0.55,
        "optimizer_s": rest_s * 0.1,
    }


def _slowest_rank_samples(
    rng: np.random.Generator, mean_s: float, ranks: int, iterations: int, data: str
) -> tuple[dict[str, list], float]:
    """(samples of the slowest rank of each iteration, mean spread between ranks), scaled to mean mean_s."""
    parts = {
        key: rng.normal(part_s, part_s * 0.03, (ranks, iterations)).clip(min=1e-5)
        for key, part_s in _part_means(mean_s, data).items()
    }
    per_rank = sum(parts.values())
    slowest = per_rank.argmax(axis=0)
    columns = np.arange(iterations)
    scale = mean_s / per_rank[slowest, columns].mean()
    kept = {key: values[slowest, columns] * scale for key, values in parts.items()}
    samples = {"iteration_s": sum(kept.values()), **kept}
    lists = {key: [float(v) for v in values] for key, values in samples.items()}
    rank_skew_s = float((per_rank.max(axis=0) - per_rank.min(axis=0)).mean() * scale)
    return {**lists, "slowest_rank": [int(rank) for rank in slowest]}, rank_skew_s


def _series(rng: np.random.Generator, data: str, wall_s: float) -> dict[str, list]:
    """Telemetry of one phase, one reading per interval of its wall time."""
    count = int(wall_s / _INTERVAL_S)
    cpu = rng.uniform(40, 95, count).round(1)
    disk = rng.uniform(0, 200, count - 1).round(2) if data == "cold" else np.zeros(count - 1)
    return {
        "cpu_util_pct": [float(v) for v in cpu],
        "cpu0_util_pct": [float(min(100.0, v + 3)) for v in cpu],
        "cpu1_util_pct": [float(max(0.0, v - 3)) for v in cpu],
        "mem_used_bytes": [2.5e9 + 1e6 * i for i in range(count)],
        "disk_read_mbps": [None] + [float(v) for v in disk],  # a rate needs a reading before it
        "net_rx_mbps": [0.0] * count,
    }


def _telemetry_block(metrics: dict[str, list]) -> dict[str, Any]:
    count = len(next(iter(metrics.values()))) if metrics else 0
    t_s = [round(_INTERVAL_S * i, 3) for i in range(count)]
    return {"interval_s": _INTERVAL_S, "gpu_status": "no GPU", "t_s": t_s, "metrics": metrics}


def _breakdown(
    stalls: dict[str, float], iteration_s: float, reference: str, per_epoch: int | None, warnings: list[str]
) -> dict[str, Any]:
    def entry(stall: str) -> dict[str, Any]:
        seconds = stalls.get(stall)
        if seconds is None:
            return {
                "seconds": None,
                "ci95_s": None,
                "share": None,
                "epoch_s": None,
                "status": "not_measured",
                "note": "",
            }
        return {
            "seconds": seconds,
            "ci95_s": abs(seconds) * 0.02,  # a half-width: a negative stall's too
            "share": seconds / iteration_s,
            "epoch_s": None if per_epoch is None else seconds * per_epoch,
            "status": "measured" if seconds > 0 else "clamped_zero" if seconds == 0 else "negative",
            "note": "",
        }

    return {
        "iteration_s": iteration_s,
        "iteration_ci95_s": iteration_s * 0.01,
        "iterations_per_epoch": per_epoch,
        "epoch_s": None if per_epoch is None else iteration_s * per_epoch,
        "reference_phase": reference,
        "stalls": {stall: entry(stall) for stall in STALLS},
        "warnings": list(warnings),
    }


def populate_dashboard_db(db: Path) -> list[dict[str, Any]]:
    """Five runs of 30 iterations with samples and telemetry: resnet18 b32 on two instances (two runs on
    small-vm), vgg11 b16, a failed run; and the prices of both instances. Returns the documents."""
    first = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    # run id, hours after the first, model, batch size, instance, compute and interconnect seconds, status
    runs = [
        ("20261120T090000Z-aaaa0001", 0, "resnet18", 32, "small-vm", 0.30, 0.08, "completed"),
        ("20261120T100000Z-aaaa0002", 1, "resnet18", 32, "small-vm", 0.31, 0.07, "completed"),
        ("20261120T110000Z-bbbb0003", 2, "resnet18", 32, "big-vm", 0.12, 0.03, "completed"),
        ("20261121T090000Z-cccc0004", 24, "vgg11", 16, "big-vm", 0.20, 0.05, "completed"),
        ("20261121T100000Z-dddd0005", 25, "resnet18", 32, "small-vm", 0.20, 0.05, "failed"),
    ]
    docs = []
    for seed, row in enumerate(runs, start=1):
        run_id, hours, model, batch_size, instance, compute_s, interconnect_s, status = row
        doc = result_doc(
            model,
            run_id=run_id,
            started_at=first + timedelta(hours=hours),
            status=status,
            stalls={"compute": compute_s, "interconnect": interconnect_s, "cpu": 0.04, "disk": 0.03},
            batch_size=batch_size,
            instance=instance,
            iterations=30,
            samples=True,
            telemetry=True,
            seed=seed,
            cpu_cores={"small-vm": 2, "big-vm": 8}[instance],  # the catalog's vCPUs below: the labels fit
        )
        assert store.ingest_result(db, doc)
        docs.append(doc)
    with store.connect(db) as con:
        con.execute(
            "INSERT INTO instances (name, provider, accelerator, accelerator_count, vcpus, memory_gib, "
            "on_demand_usd_per_h, spot_usd_per_h) VALUES "
            "('small-vm', 'test', NULL, 0, 2, 8, 0.10, 0.03), ('big-vm', 'test', NULL, 0, 8, 32, 0.40, 0.12)"
        )
    return docs


def run_count(db: Path) -> int:
    """Runs in the database, read with DuckDB itself (not through the store)."""
    with duckdb.connect(str(db), read_only=True) as con:
        return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
