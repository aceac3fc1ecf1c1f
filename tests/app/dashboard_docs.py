"""Result documents and databases for the dashboard tests (app and e2e).

`make_result_doc` builds a schema_version 1 document shaped like the profiler's: phases R0, R1, R3, R2 with
per-iteration samples and telemetry, and a breakdown that telescopes (stalls add up to the iteration time).
Numbers are made from a seeded generator, so every test sees the same data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from stash_core import store

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "app.py")
PAGES = {
    "Overview": "pages/overview.py",
    "Run": "pages/run.py",
    "Stall breakdown": "pages/breakdown.py",
    "Compare instances": "pages/compare.py",
    "Upload": "pages/upload.py",
    "SQL": "pages/sql.py",
}
STALL_ORDER = ("compute", "interconnect", "network", "cpu", "disk")
_PHASES = (
    ("R0", "1 worker, synthetic data on the device", 1, "synthetic"),
    ("R1", "2 workers on one machine, synthetic data on the device", 2, "synthetic"),
    ("R3", "2 workers, real data cached in memory", 2, "cached"),
    ("R2", "2 workers, real data read cold from disk", 2, "cold"),
)


def make_result_doc(
    run_id: str,
    model: str = "resnet18",
    batch_size: int = 32,
    instance: str | None = "laptop",
    workers: int = 2,
    compute_s: float = 0.20,
    interconnect_s: float = 0.05,
    cpu_s: float = 0.04,
    disk_s: float = 0.03,
    started_at: datetime | None = None,
    status: str = "completed",
    iterations: int = 30,
    seed: int = 0,
) -> dict[str, Any]:
    """A realistic result document; status "failed" stops after R0 with no breakdown."""
    rng = np.random.default_rng(seed)
    started_at = started_at or datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    means = {"R0": compute_s}
    means["R1"] = means["R0"] + interconnect_s
    means["R3"] = means["R1"] + cpu_s
    means["R2"] = means["R3"] + disk_s
    phases = []
    for name, description, phase_workers, data in _PHASES:
        if status == "failed" and name != "R0":
            phases.append(
                {
                    "name": name,
                    "description": description,
                    "workers": phase_workers,
                    "nodes": 1,
                    "data": data,
                    "status": "failed",
                    "error": "worker 1 exited with code 1",
                    "iterations": 0,
                    "samples": {},
                }
            )
            break
        samples = rng.normal(means[name], means[name] * 0.03, iterations).clip(min=1e-4)
        t_s = [round(0.5 * (i + 1), 3) for i in range(int(iterations * means[name] / 0.5) + 2)]
        metrics = {
            "cpu_util_pct": list(rng.uniform(40, 95, len(t_s)).round(1)),
            "cpu0_util_pct": list(rng.uniform(40, 95, len(t_s)).round(1)),
            "mem_used_bytes": list(rng.uniform(2e9, 3e9, len(t_s)).round()),
            "disk_read_mbps": list(
                (rng.uniform(0, 200, len(t_s)) if data == "cold" else np.zeros(len(t_s))).round(2)
            ),
            "net_rx_mbps": [0.0] * len(t_s),
        }
        phases.append(
            {
                "name": name,
                "description": description,
                "workers": phase_workers,
                "nodes": 1,
                "data": data,
                "status": "completed",
                "error": None,
                "resident_fraction_start": {"cached": 1.0, "cold": 0.0}.get(data),
                "warmup_iterations": 5,
                "iterations": iterations,
                "iteration_s": {
                    "mean": float(samples.mean()),
                    "ci95": float(1.96 * samples.std(ddof=1) / np.sqrt(iterations)),
                    "std": float(samples.std(ddof=1)),
                    "median": float(np.median(samples)),
                    "p5": float(np.percentile(samples, 5)),
                    "p95": float(np.percentile(samples, 95)),
                    "n": iterations,
                },
                "parts_mean_s": {
                    "data_s": 0.01,
                    "forward_s": means[name] * 0.35,
                    "backward_s": means[name] * 0.55,
                    "optimizer_s": means[name] * 0.05,
                },
                "samples": {
                    "iteration_s": [float(v) for v in samples],
                    "data_s": [0.01] * iterations,
                    "forward_s": [float(v) * 0.35 for v in samples],
                    "backward_s": [float(v) * 0.55 for v in samples],
                    "optimizer_s": [float(v) * 0.05 for v in samples],
                    "slowest_rank": [i % phase_workers for i in range(iterations)],
                },
                "rank_skew_s": 0.002,
                "wall_s": float(samples.sum() + 3.0),
                "telemetry": {"interval_s": 0.5, "gpu_status": "no GPU", "t_s": t_s, "metrics": metrics},
            }
        )
    breakdown = None
    if status == "completed":
        iteration_s = means["R2"]
        per_epoch = 2000 // (batch_size * workers)
        values = {
            "compute": compute_s,
            "interconnect": interconnect_s,
            "network": None,
            "cpu": cpu_s,
            "disk": disk_s,
        }
        stalls = {}
        for stall in STALL_ORDER:
            seconds = values[stall]
            stalls[stall] = {
                "seconds": seconds,
                "ci95_s": None if seconds is None else seconds * 0.05,
                "share": None if seconds is None else seconds / iteration_s,
                "epoch_s": None if seconds is None else seconds * per_epoch,
                "status": "not_measured" if seconds is None else "measured",
                "note": "",
            }
        breakdown = {
            "iteration_s": iteration_s,
            "iteration_ci95_s": iteration_s * 0.02,
            "iterations_per_epoch": per_epoch,
            "epoch_s": iteration_s * per_epoch,
            "reference_phase": "R2",
            "stalls": stalls,
            "warnings": [],
        }
    return {
        "schema_version": 1,
        "kind": "stash-profile",
        "run_id": run_id,
        "status": status,
        "error": None if status == "completed" else "phase R1 failed: worker 1 exited with code 1",
        "started_at": started_at.isoformat(),
        "finished_at": (started_at + timedelta(seconds=90)).isoformat(),
        "stash_version": "0.1.0",
        "spec": {
            "model": model,
            "batch_size": batch_size,
            "workers_per_node": workers,
            "nodes": 1,
            "stalls": ["compute", "interconnect", "cpu", "disk"],
            "dataset": None,
            "dataset_images": 2000,
            "synthetic_images": 2000,
            "loader_workers": 2,
            "iterations": "auto",
            "device": "cpu",
            "backend": "gloo",
            "instance": instance,
            "threads_per_worker": 1,
            "disk_read_mbps": None,
            "input_shape": [3, 64, 64],
            "num_classes": 10,
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
            "hostname": "test-host",
            "instance": instance,
            "cpu_model": "Test CPU",
            "cpu_cores_logical": 2,
            "cpu_cores_physical": 2,
            "memory_bytes": 8_000_000_000,
            "gpu_count": 0,
            "gpus": [],
            "gpu_status": "no GPU",
            "gpu_topology": None,
            "torch_version": "2.13.0+cpu",
            "cuda_version": None,
            "nccl_version": None,
            "python_version": "3.11.7",
            "os": "Linux",
        },
        "phases": phases,
        "breakdown": breakdown,
    }


def populate(db: Path) -> list[dict[str, Any]]:
    """Five runs: resnet18 b32 on two instances (two runs on one), vgg11 b16, a failed run; and prices."""
    base = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    docs = [
        make_result_doc(
            "20261120T090000Z-aaaa0001",
            instance="small-vm",
            compute_s=0.30,
            interconnect_s=0.08,
            started_at=base,
            seed=1,
        ),
        make_result_doc(
            "20261120T100000Z-aaaa0002",
            instance="small-vm",
            compute_s=0.31,
            interconnect_s=0.07,
            started_at=base + timedelta(hours=1),
            seed=2,
        ),
        make_result_doc(
            "20261120T110000Z-bbbb0003",
            instance="big-vm",
            compute_s=0.12,
            interconnect_s=0.03,
            started_at=base + timedelta(hours=2),
            seed=3,
        ),
        make_result_doc(
            "20261121T090000Z-cccc0004",
            model="vgg11",
            batch_size=16,
            instance="big-vm",
            started_at=base + timedelta(days=1),
            seed=4,
        ),
        make_result_doc(
            "20261121T100000Z-dddd0005",
            instance="small-vm",
            status="failed",
            started_at=base + timedelta(days=1, hours=1),
            seed=5,
        ),
    ]
    for doc in docs:
        assert store.ingest_result(db, doc)
    with store.connect(db) as con:
        con.execute(
            "INSERT INTO instances (name, provider, accelerator, accelerator_count, vcpus, memory_gib, "
            "on_demand_usd_per_h, spot_usd_per_h) VALUES "
            "('small-vm', 'test', NULL, 0, 2, 8, 0.10, 0.03), ('big-vm', 'test', NULL, 0, 8, 32, 0.40, 0.12)"
        )
    return docs


def write_doc(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def table_exists(db: Path, table: str) -> bool:
    with duckdb.connect(str(db), read_only=True) as con:
        return bool(
            con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()[0]
        )


def run_count(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
