"""One simulation of a trace under several policies, as a result document (results/sim-*.json), saved with
its per-job CSV and its database row all or none (store/simulations.py holds the `simulations` table)."""

from __future__ import annotations

import secrets
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import __version__
from stash_core.cells import csv_text
from stash_core.errors import write_failure
from stash_core.interrupts import held_interrupts, stop_exception
from stash_core.sched.fabric import Fabric
from stash_core.sched.metrics import jct_cdf, queue_delay_over_time, sample_timeline, schedule_metrics
from stash_core.sched.policy import Policy
from stash_core.sched.simulator import JobOutcome, simulate
from stash_core.sched.topology import Cluster
from stash_core.sched.trace import TraceJob
from stash_core.sched.tuner import plan_policies
from stash_core.store import simulations
from stash_core.store.simulations import SIMULATION_KIND, SIMULATION_SCHEMA_VERSION
from stash_core.userfiles import StagedFile, json_text, writable_target


def run_simulation(
    jobs: list[TraceJob], cluster: Cluster, bases: list[Policy], *, tuning: str = "split",
    fraction: float = 0.3, uplink_factor: float = 2.0, fabric: Fabric | None = None,
    trace: str = "", trace_format: str = "",
) -> tuple[dict[str, Any], dict[str, list[JobOutcome]]]:  # fmt: skip
    """The result document of every policy on the trace, and each policy's job outcomes."""
    policies, reported, how = plan_policies(bases, jobs, cluster, tuning, fraction, uplink_factor, fabric)
    reported_ids = {job.job_id for job in reported}
    entries, outcomes = [], {}
    for policy in policies:
        timeline: list[tuple[float, int, int]] = []
        # The whole trace runs: the jobs split tuning tuned on still hold GPUs when the reported ones arrive
        # (simulated alone, the reported jobs met an empty cluster); the figures are the reported jobs'.
        whole = simulate(jobs, cluster, policy, uplink_factor, fabric, timeline)
        result = [outcome for outcome in whole if outcome.job.job_id in reported_ids]
        outcomes[policy.name] = result
        timeline = reported_span(timeline, result)
        entries.append({
            "policy": policy.name, "settings": policy.settings(),
            "metrics": schedule_metrics(result, cluster),
            "jct_cdf": jct_cdf(result), "timeline": sample_timeline(timeline, cluster),
            "queue_delay": queue_delay_over_time(result),
        })  # fmt: skip
    now = datetime.now(UTC)
    doc = {
        "kind": SIMULATION_KIND, "schema_version": SIMULATION_SCHEMA_VERSION,
        "simulation_id": f"sim-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}", "created_at": now.isoformat(),
        "stash_version": __version__, "trace": trace, "trace_format": trace_format, "jobs": len(reported),
        "trace_jobs": len(jobs),
        "cluster": {"switches": cluster.switches, "nodes_per_switch": cluster.nodes_per_switch,
                    "gpus_per_node": cluster.gpus_per_node, "gpus": cluster.total_gpus},
        "fabric": asdict(fabric) if fabric is not None else {"uplink_factor": uplink_factor},
        "tuning": how, "policies": entries,
    }  # fmt: skip
    return doc, outcomes


def reported_span(
    timeline: list[tuple[float, int, int]], reported: list[JobOutcome]
) -> list[tuple[float, int, int]]:
    """The cluster's timeline (every job's) from the first reported arrival to the last reported finish, the
    span the figures cover: the state at its start is the last event's before it."""
    if not timeline or not reported:
        return timeline
    first_s = min(outcome.job.submit_s for outcome in reported)
    end_s = max(outcome.finish_s for outcome in reported)
    before = [index for index, (t, _, _) in enumerate(timeline) if t <= first_s]
    kept = timeline[before[-1] if before else 0:]
    return [(max(t, first_s), queued, busy) for t, queued, busy in kept if t <= end_s]


def save_simulation(doc: dict[str, Any], out_dir: Path, database: Path | None = None,
                    per_job: pd.DataFrame | None = None, jobs_csv: Path | None = None) -> Path:  # fmt: skip
    """results/<simulation_id>.json, the per-job CSV and (with `database`) the row, all or none: the files are
    written beside their places first, the row stored, then the files moved into place. The result file."""
    created = _missing_folders(out_dir)
    staged: list[StagedFile] = []
    done = False
    try:
        path = out_dir / f"{doc['simulation_id']}.json"
        # An output that is a device or a FIFO is refused before anything is written.
        targets = [(path, "simulation file")] + (
            [(jobs_csv, "per-job CSV")] if per_job is not None and jobs_csv else []
        )
        for target, what in targets:
            writable_target(target, what)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            message = f"cannot write the results: {exc.strerror or exc} ({exc.filename})"
            raise write_failure(message, exc) from None
        staged.append(StagedFile(path, "simulation file"))
        staged[-1].write(json_text(doc, indent=1))
        if per_job is not None and jobs_csv is not None:
            staged.append(StagedFile(jobs_csv, "per-job CSV"))
            staged[-1].write(csv_text(per_job))
        # from the stored row to the files in place, one step: a Ctrl-C between them left the row stored
        # and its files discarded (or some moved), and the command said "interrupted"
        with held_interrupts() as received:
            if database is not None:
                simulations.ingest_simulation(database, doc, str(path.resolve()))
            for file in staged:
                file.commit()
            done = True
        if received:  # acted on once the simulation is whole, and said to be
            print(f"stash: the simulation is saved whole ({path})", file=sys.stderr, flush=True)
            raise stop_exception(received[0])
    finally:
        if not done:
            for file in staged:
                file.discard()
            for folder in reversed(created):
                try:
                    folder.rmdir()
                except OSError:
                    break  # not empty or gone: leave it
    return path


def _missing_folders(folder: Path) -> list[Path]:
    """The folders mkdir(parents=True) would create, outermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))
