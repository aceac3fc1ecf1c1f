"""Hand-made, realistic result documents for the store tests.

`result_doc` builds a document the way the profiler would: every phase has per-rank samples of 2 ranks (1 for
R0), the slowest rank of each iteration is kept, the phase statistics are computed from those samples and the
breakdown telescopes (compute + interconnect + cpu + disk == iteration_s, network not measured).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

# (phase, description, workers, data, base iteration seconds of one rank)
_PHASES = (
    ("R0", "1 worker, synthetic data on the device", 1, "synthetic", 0.200),
    ("R1", "2 workers, synthetic data on the device", 2, "synthetic", 0.230),
    ("R3", "2 workers, real data in the page cache", 2, "cached", 0.270),
    ("R2", "2 workers, real data evicted from the page cache", 2, "cold", 0.330),
)
_ITERATIONS_PER_EPOCH = 32


def build_result_doc(
    run_id: str = "20261122T104100Z-3f2a9c1b",
    started_at: datetime | None = None,
    status: str = "completed",
    iterations: int = 40,
    model: str = "resnet18",
    instance: str = "my-laptop",
    batch_size: int = 32,
    seed: int = 0,
) -> dict[str, Any]:
    """A schema_version 1 result document. status="failed" gives a run that died in R1 (breakdown null)."""
    rng = np.random.default_rng(seed)
    started_at = started_at or datetime(2026, 11, 22, 10, 41, tzinfo=UTC)
    phases = []
    for name, description, workers, data, base_s in _PHASES:
        if status == "failed" and name != "R0":
            phases.append(_failed_phase(name, description, workers, data))
            break
        phases.append(_phase(rng, name, description, workers, data, base_s, iterations))
    breakdown = _breakdown(phases) if status == "completed" else None
    return {
        "schema_version": 1,
        "kind": "stash-profile",
        "run_id": run_id,
        "status": status,
        "error": None if status == "completed" else "phase R1 failed: worker 1 exited with code 1",
        "started_at": started_at.isoformat(),
        "finished_at": (started_at + timedelta(seconds=70)).isoformat(),
        "stash_version": "0.1.0",
        "spec": {
            "model": model,
            "batch_size": batch_size,
            "workers_per_node": 2,
            "nodes": 1,
            "stalls": ["compute", "interconnect", "cpu", "disk"],
            "dataset": "/data/imagenet-mini",
            "dataset_images": 2000,
            "synthetic_images": 2000,
            "loader_workers": 2,
            "iterations": "auto",
            "device": "cpu",
            "backend": "gloo",
            "instance": instance,
            "threads_per_worker": 1,
            "disk_read_mbps": None,
            "input_shape": [3, 224, 224],
            "num_classes": 1000,
            "hosts": [],
        },
        "model": {
            "name": model,
            "kind": "image",
            "param_count": 11689512,
            "grad_tensor_count": 62,
            "layer_count": 41,
            "grad_bytes": 46758048,
        },
        "fingerprint": {
            "hostname": "box1",
            "instance": instance,
            "cpu_model": "Example CPU",
            "cpu_cores_logical": 2,
            "cpu_cores_physical": 1,
            "memory_bytes": 25_000_000_000,
            "gpu_count": 0,
            "gpus": [],
            "gpu_status": "no GPU: no NVIDIA driver",
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


def _phase(
    rng: np.random.Generator, name: str, description: str, workers: int, data: str, base_s: float, count: int
) -> dict[str, Any]:
    # Per rank and iteration: parts that add up to the iteration time.
    data_s = rng.normal(base_s * 0.1 if data != "synthetic" else 0.0005, 0.002, (workers, count)).clip(0.0001)
    forward_s = rng.normal(base_s * 0.3, 0.003, (workers, count))
    backward_s = rng.normal(base_s * 0.5, 0.004, (workers, count))
    optimizer_s = rng.normal(base_s * 0.05, 0.001, (workers, count))
    iteration_s = data_s + forward_s + backward_s + optimizer_s
    slowest = iteration_s.argmax(axis=0)
    columns = np.arange(count)
    kept = {
        "iteration_s": iteration_s[slowest, columns],
        "data_s": data_s[slowest, columns],
        "forward_s": forward_s[slowest, columns],
        "backward_s": backward_s[slowest, columns],
        "optimizer_s": optimizer_s[slowest, columns],
    }
    mean_s = float(kept["iteration_s"].mean())
    std_s = float(kept["iteration_s"].std(ddof=1))
    times_s = [round(0.5 * i, 3) for i in range(12)]
    cpu_pct = [float(v) for v in rng.uniform(40, 95, len(times_s))]
    return {
        "name": name,
        "description": description,
        "workers": workers,
        "nodes": 1,
        "data": data,
        "status": "completed",
        "error": None,
        "resident_fraction_start": {"synthetic": None, "cached": 1.0, "cold": 0.0}[data],
        "warmup_iterations": 5,
        "iterations": count,
        "iteration_s": {
            "mean": mean_s,
            "ci95": float(1.96 * std_s / np.sqrt(count)),
            "std": std_s,
            "median": float(np.median(kept["iteration_s"])),
            "p5": float(np.percentile(kept["iteration_s"], 5)),
            "p95": float(np.percentile(kept["iteration_s"], 95)),
            "n": count,
        },
        "parts_mean_s": {key: float(values.mean()) for key, values in kept.items() if key != "iteration_s"},
        "samples": {
            **{key: [float(v) for v in values] for key, values in kept.items()},
            "slowest_rank": [int(rank) for rank in slowest],
        },
        "rank_skew_s": float((iteration_s.max(axis=0) - iteration_s.min(axis=0)).mean()),
        "wall_s": round(count * mean_s + 3.0, 3),
        "telemetry": {
            "interval_s": 0.5,
            "gpu_status": "no GPU: no NVIDIA driver",
            "t_s": times_s,
            "metrics": {
                "cpu_util_pct": cpu_pct,
                "cpu0_util_pct": [min(100.0, v + 3) for v in cpu_pct],
                "cpu1_util_pct": [max(0.0, v - 3) for v in cpu_pct],
                "mem_used_bytes": [4.2e9 + 1e6 * i for i in range(len(times_s))],
                "disk_read_mbps": [None] + [float(v) for v in rng.uniform(0, 200, len(times_s) - 1)],
            },
        },
    }


def _failed_phase(name: str, description: str, workers: int, data: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "workers": workers,
        "nodes": 1,
        "data": data,
        "status": "failed",
        "error": "worker 1 exited with code 1",
        "resident_fraction_start": None,
        "warmup_iterations": 5,
        "iterations": 0,
        "iteration_s": None,
        "parts_mean_s": None,
        "samples": {
            key: []
            for key in ("iteration_s", "data_s", "forward_s", "backward_s", "optimizer_s", "slowest_rank")
        },
        "rank_skew_s": None,
        "wall_s": 4.2,
        "telemetry": {
            "interval_s": 0.5,
            "gpu_status": "no GPU",
            "t_s": [0.0, 0.5],
            "metrics": {"cpu_util_pct": [12.0, 15.0]},
        },
    }


def _breakdown(phases: list[dict[str, Any]]) -> dict[str, Any]:
    by_name = {phase["name"]: phase["iteration_s"] for phase in phases}
    t0, t1, t3, t2 = (by_name[name]["mean"] for name in ("R0", "R1", "R3", "R2"))
    ci = {name: stats["ci95"] for name, stats in by_name.items()}

    def stall(seconds: float, ci95_s: float) -> dict[str, Any]:
        return {
            "seconds": seconds,
            "ci95_s": ci95_s,
            "share": seconds / t2,
            "epoch_s": seconds * _ITERATIONS_PER_EPOCH,
            "status": "measured",
            "note": "",
        }

    return {
        "iteration_s": t2,
        "iteration_ci95_s": ci["R2"],
        "iterations_per_epoch": _ITERATIONS_PER_EPOCH,
        "epoch_s": t2 * _ITERATIONS_PER_EPOCH,
        "reference_phase": "R2",
        "stalls": {
            "compute": stall(t0, ci["R0"]),
            "interconnect": stall(t1 - t0, float(np.hypot(ci["R1"], ci["R0"]))),
            "network": {
                "seconds": None,
                "ci95_s": None,
                "share": None,
                "epoch_s": None,
                "status": "not_measured",
                "note": "single node",
            },
            "cpu": stall(t3 - t1, float(np.hypot(ci["R3"], ci["R1"]))),
            "disk": stall(t2 - t3, float(np.hypot(ci["R2"], ci["R3"]))),
        },
        "warnings": ["R2: page cache held 3% of the data set at phase start"],
    }


def _fresh_doc(**overrides: Any) -> dict[str, Any]:
    return copy.deepcopy(build_result_doc(**overrides))


@pytest.fixture
def result_doc() -> Callable[..., dict[str, Any]]:
    """Factory: result_doc(run_id=..., status=..., ...) -> a fresh document (see build_result_doc)."""
    return _fresh_doc


@pytest.fixture(scope="session")
def result_doc_builder() -> Callable[..., dict[str, Any]]:
    """The same factory for module- or session-scoped fixtures."""
    return _fresh_doc


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "db" / "results.duckdb"


@pytest.fixture
def row_counts() -> Callable[[Any], dict[str, int]]:
    """row_counts(db_path) -> {table: rows} for every table of the store (read-only, through the store)."""
    from stash_core.store import TABLES, query_readonly

    def count(path: Any) -> dict[str, int]:
        # One query, one connection: opening DuckDB costs a noticeable fraction of a second.
        sql = "SELECT " + ", ".join(f"(SELECT count(*) FROM {table}) AS {table}" for table in TABLES)
        row = query_readonly(path, sql).iloc[0]
        return {table: int(row[table]) for table in TABLES}

    return count
