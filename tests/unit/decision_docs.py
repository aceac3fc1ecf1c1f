"""Hand-made result documents (schema_version 1) for the fit / cost / recommend / what-if / campaign tests.

`profile_doc` builds a completed run whose phases telescope exactly: R0 = compute, R1 = + interconnect,
R1n = + network, R3 = + cpu, R2 = + disk, so every stall is known in advance. Only the stalls given are
measured; the others are "not_measured" and their phases are absent.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

_PHASE_ORDER = (
    ("R0", "compute", "synthetic"),
    ("R1", "interconnect", "synthetic"),
    ("R1n", "network", "synthetic"),
    ("R3", "cpu", "cached"),
    ("R2", "disk", "cold"),
)
_counter = [0]


def profile_doc(
    model: str = "resnet18",
    *,
    run_id: str | None = None,
    stalls: dict[str, float] | None = None,
    grad_bytes: int = 46_758_048,
    grad_tensor_count: int = 62,
    layer_count: int = 41,
    batch_size: int = 32,
    workers: int = 2,
    nodes: int = 1,
    instance: str | None = "box",
    device: str = "cpu",
    dataset_images: int | None = 2000,
    loader_workers: int = 2,
    cpu_cores: int = 4,
    status: str = "completed",
    spec_extra: dict[str, Any] | None = None,
    telemetry: dict[str, dict[str, list[float]]] | None = None,
    iterations: int = 40,
    started_at: datetime | None = None,
) -> dict[str, Any]:
    """A completed profile with exactly the given per-iteration stall seconds."""
    _counter[0] += 1
    run_id = run_id or f"20261122T{_counter[0]:06d}Z-{abs(hash((model, _counter[0]))) % 16**8:08x}"
    stalls = dict(stalls or {"compute": 0.2, "interconnect": 0.05})
    started_at = started_at or datetime(2026, 11, 22, 10, 0, tzinfo=UTC) + timedelta(minutes=_counter[0])
    phases = []
    total_s = 0.0
    for name, stall, data in _PHASE_ORDER:
        if stall not in stalls:
            continue
        total_s += stalls[stall]
        phase_nodes = nodes if name in ("R1n", "R3", "R2") else 1
        phase_workers = 1 if name == "R0" else workers
        metrics = (telemetry or {}).get(name)
        times = [0.5 * i for i in range(len(next(iter(metrics.values()))))] if metrics else []
        phases.append(
            {
                "name": name,
                "description": f"{name} of a hand-made run",
                "workers": phase_workers,
                "nodes": phase_nodes,
                "data": data,
                "status": "completed",
                "error": None,
                "resident_fraction_start": {"synthetic": None, "cached": 1.0, "cold": 0.0}[data],
                "warmup_iterations": 5,
                "iterations": iterations,
                "iteration_s": {
                    "mean": total_s,
                    "ci95": total_s * 0.01,
                    "std": total_s * 0.03,
                    "median": total_s,
                    "p5": total_s * 0.95,
                    "p95": total_s * 1.05,
                    "n": iterations,
                },
                "parts_mean_s": {
                    "data_s": 0.0,
                    "forward_s": total_s * 0.35,
                    "backward_s": total_s * 0.6,
                    "optimizer_s": total_s * 0.05,
                },
                "samples": {},
                "rank_skew_s": 0.0,
                "wall_s": total_s * (iterations + 5) + 3.0,
                "telemetry": {
                    "interval_s": 0.5,
                    "gpu_status": "no GPU",
                    "t_s": times,
                    "metrics": metrics or {},
                },
            }
        )
    per_epoch = None
    if dataset_images:
        per_epoch = math.ceil(dataset_images / (batch_size * workers * nodes))
    reference = phases[-1]["name"]

    def entry(stall: str) -> dict[str, Any]:
        if stall not in stalls:
            return {
                "seconds": None,
                "ci95_s": None,
                "share": None,
                "epoch_s": None,
                "status": "not_measured",
                "note": "not asked for",
            }
        seconds = stalls[stall]
        return {
            "seconds": seconds,
            "ci95_s": seconds * 0.02,
            "share": seconds / total_s,
            "epoch_s": None if per_epoch is None else seconds * per_epoch,
            "status": "measured" if seconds > 0 else "clamped_zero",
            "note": "",
        }

    spec = {
        "model": model,
        "batch_size": batch_size,
        "workers_per_node": workers,
        "nodes": nodes,
        "stalls": list(stalls),
        "dataset": None,
        "dataset_images": dataset_images,
        "synthetic_images": None,
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
    }
    return {
        "schema_version": 1,
        "kind": "stash-profile",
        "run_id": run_id,
        "status": status,
        "error": None if status == "completed" else "failed on purpose",
        "started_at": started_at.isoformat(),
        "finished_at": (started_at + timedelta(seconds=60)).isoformat(),
        "stash_version": "0.1.0",
        "spec": spec,
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
            "memory_bytes": 16e9,
            "gpu_count": 0,
            "gpus": [],
            "gpu_status": "no GPU",
        },
        "phases": phases,
        "breakdown": None
        if status != "completed"
        else {
            "iteration_s": total_s,
            "iteration_ci95_s": total_s * 0.01,
            "iterations_per_epoch": per_epoch,
            "epoch_s": None if per_epoch is None else total_s * per_epoch,
            "reference_phase": reference,
            "stalls": {
                stall: entry(stall) for stall in ("compute", "interconnect", "network", "cpu", "disk")
            },
            "warnings": [],
        },
    }
