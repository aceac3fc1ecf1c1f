"""One simulation of a trace under several policies, as a result document (results/sim-*.json), written
atomically; the store's `simulations` table takes it (store/simulations.py)."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stash_core.decide.sched.fabric import Fabric
from stash_core.decide.sched.metrics import jct_cdf, queue_delay_over_time, sample_timeline, schedule_metrics
from stash_core.decide.sched.policy import Policy
from stash_core.decide.sched.simulator import JobOutcome, simulate
from stash_core.decide.sched.topology import Cluster
from stash_core.decide.sched.trace import Job
from stash_core.decide.sched.tuner import plan_policies
from stash_core.errors import UsageError
from stash_core.store.simulations import SIMULATION_KIND

STASH_VERSION = "0.1.0"


def run_simulation(
    jobs: list[Job], cluster: Cluster, bases: list[Policy], *, tuning: str = "split", fraction: float = 0.3,
    uplink_factor: float = 2.0, fabric: Fabric | None = None, trace: str = "", trace_format: str = "",
) -> tuple[dict[str, Any], dict[str, list[JobOutcome]]]:  # fmt: skip
    """The result document of every policy on the trace, and each policy's job outcomes."""
    policies, reported, how = plan_policies(bases, jobs, cluster, tuning, fraction, uplink_factor, fabric)
    entries, outcomes = [], {}
    for policy in policies:
        timeline: list[tuple[float, int, int]] = []
        result = simulate(reported, cluster, policy, uplink_factor, fabric, timeline)
        outcomes[policy.name] = result
        entries.append({
            "policy": policy.name, "settings": policy.settings(),
            "metrics": schedule_metrics(result, cluster),
            "jct_cdf": jct_cdf(result), "timeline": sample_timeline(timeline, cluster),
            "queue_delay": queue_delay_over_time(result),
        })  # fmt: skip
    now = datetime.now(UTC)
    doc = {
        "kind": SIMULATION_KIND, "schema_version": 1,
        "simulation_id": f"sim-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}", "created_at": now.isoformat(),
        "stash_version": STASH_VERSION, "trace": trace, "trace_format": trace_format, "jobs": len(reported),
        "trace_jobs": len(jobs),
        "cluster": {"switches": cluster.switches, "nodes_per_switch": cluster.nodes_per_switch,
                    "gpus_per_node": cluster.gpus_per_node, "gpus": cluster.total_gpus},
        "fabric": asdict(fabric) if fabric is not None else {"uplink_factor": uplink_factor},
        "tuning": how, "policies": entries,
    }  # fmt: skip
    return doc, outcomes


def write_simulation(doc: dict[str, Any], out_dir: Path) -> Path:
    """results/<simulation_id>.json, written whole or not at all."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{doc['simulation_id']}.json"
        handle, tmp = tempfile.mkstemp(dir=out_dir, prefix=".sim-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as out:
                json.dump(doc, out, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageError(f"cannot write the simulation to {out_dir}: {exc.strerror or exc}") from None
    return path
