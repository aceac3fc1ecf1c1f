"""Schedule: simulate a trace (uploaded or synthetic) on a cluster under several policies, store it, and the
frames behind the page's charts; past simulations from the database."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.errors import UsageError
from stash_core.sched import Cluster, Fabric, Policy, jobs_from_frame, load_trace, synthetic_trace
from stash_core.sched.report import run_simulation, save_simulation
from stash_core.store.simulations import simulations_frame

MAX_PAGE_JOBS = 20_000  # keeps a page's simulation to seconds
MODELS = ["resnet50", "resnet18", "alexnet", "shufflenet_v2", "vgg16", "bert_base"]
SUMMARY = {"makespan_s": "makespan", "avg_jct_s": "average JCT", "p95_jct_s": "p95 JCT",
           "avg_queue_s": "average queueing delay", "comm_overhead_s": "communication overhead"}  # fmt: skip


def simulate(
    db_path: Path | str, *, files: list[tuple[str, bytes]] | None, trace_format: str, synthetic_jobs: int,
    seed: int, mean_gap_s: float, cluster: tuple[int, int, int], policies: list[str], tuning: str,
    node_gbps: float | None, oversubscription: float, out_dir: Path | str = "results",
) -> dict[str, Any]:  # fmt: skip
    """Run, write (results/sim-*.json) and store one simulation; its document. UsageError on bad input."""
    if not policies:
        raise UsageError("choose at least one policy")
    try:
        shape = Cluster(*(int(v) for v in cluster))
    except (TypeError, ValueError):
        raise UsageError("the cluster needs at least one switch, node and GPU") from None
    fabric = Fabric.oversubscribed(node_gbps, oversubscription, shape.nodes_per_switch) if node_gbps else None
    if files:
        jobs, trace = _uploaded_jobs(files, trace_format, db_path)
    else:
        if not 1 <= synthetic_jobs <= MAX_PAGE_JOBS or not mean_gap_s > 0:
            raise UsageError(f"a synthetic trace needs 1 to {MAX_PAGE_JOBS:,} jobs and a positive mean gap")
        frame = synthetic_trace(synthetic_jobs, seed, MODELS, mean_gap_s)
        jobs, trace, trace_format = jobs_from_frame(frame, None, "synthetic trace"), \
            f"synthetic({synthetic_jobs} jobs, seed {seed})", "synthetic"  # fmt: skip
    if len(jobs) > MAX_PAGE_JOBS:
        raise UsageError(f"the trace has {len(jobs):,} jobs; the page simulates up to {MAX_PAGE_JOBS:,} "
                         "(use `stash schedule` for more)")  # fmt: skip
    doc, _ = run_simulation(jobs, shape, [Policy(name) for name in policies], tuning=tuning, fabric=fabric,
                            trace=trace, trace_format=trace_format)  # fmt: skip
    save_simulation(doc, Path(out_dir), Path(db_path))
    return doc


def _uploaded_jobs(
    files: list[tuple[str, bytes]], trace_format: str, db_path: Path | str
) -> tuple[list, str]:
    with tempfile.TemporaryDirectory(prefix="stash-trace-") as folder:
        paths = []
        for name, content in files:
            path = Path(folder) / Path(name).name
            path.write_bytes(content)
            paths.append(path)
        main = next((p for p in paths if "job_table" in p.name), paths[0]) if trace_format == "pai2020" \
            else paths[0]  # fmt: skip
        return load_trace(main, Path(db_path), trace_format), main.name


def summary_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """One row per policy: its label and metrics."""
    return pd.DataFrame(
        [{"policy": e["policy"], "label": e["settings"]["label"], **e["metrics"]} for e in doc["policies"]]
    )


def summary_table(doc: dict[str, Any]) -> pd.DataFrame:
    """The summary as the page shows it: times in hours, the busy share in percent, headers in words."""
    frame = summary_frame(doc)
    table = frame[["policy", "label"]].copy()
    for column, label in SUMMARY.items():
        table[f"{label} (h)"] = (frame[column] / 3600).round(2)
    for column, label in (("preemptions", "preemptions"), ("spread_jobs", "jobs placed across nodes")):
        if column in frame:
            table[label] = frame[column]
    if "gpu_busy_share" in frame:
        table["GPUs busy (%)"] = (100 * frame["gpu_busy_share"].astype(float)).round(1)
    return table


def metrics_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """Long form of the summary's times for the bar chart: label, metric (in words), hours."""
    frame = summary_frame(doc)
    long = frame.melt(id_vars=["label"], value_vars=list(SUMMARY), var_name="column", value_name="s")
    long["metric"] = long["column"].map(SUMMARY)
    long["hours"] = long["s"] / 3600
    return long[["label", "metric", "hours"]]


def cdf_frame(doc: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"policy": e["policy"], "jct_h": s / 3600, "fraction": f}
                         for e in doc["policies"] for s, f in e["jct_cdf"]])  # fmt: skip


def timeline_frame(doc: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"policy": e["policy"], "t_h": t / 3600, "queued_jobs": q, "busy_share": b}
                         for e in doc["policies"] for t, q, b in e["timeline"]])  # fmt: skip


def winners(doc: dict[str, Any]) -> list[str]:
    """Which policy is lowest on each metric, and by how much against the next best."""
    frame = summary_frame(doc)
    lines = []
    for column, label in SUMMARY.items():
        ranked = frame.sort_values(column, kind="stable")
        best = ranked.iloc[0]
        text = f"{label}: {best['label']} ({best[column] / 3600:.2f} h)"
        if len(ranked) > 1 and ranked.iloc[1][column] > 0:
            text += f", {1 - best[column] / ranked.iloc[1][column]:.1%} below {ranked.iloc[1]['label']}"
        lines.append(text)
    return lines


def past_simulations(db_path: Path | str) -> pd.DataFrame:
    """Stored simulations, one row per policy, newest first."""
    return simulations_frame(db_path)


def stored_document(past: pd.DataFrame, simulation_id: str) -> dict[str, Any]:
    """A stored simulation in the shape of a result document, for the same charts."""
    rows = past[past["simulation_id"] == simulation_id]
    if rows.empty:
        raise UsageError(f"no stored simulation {simulation_id}")
    first = rows.iloc[0]
    metrics = ["makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "comm_overhead_s", "preemptions",
               "spread_jobs", "gpu_busy_share"]  # fmt: skip
    return {
        "simulation_id": simulation_id, "trace": first["trace"], "jobs": int(first["jobs"]),
        "tuning": first["tuning"],
        "policies": [{"policy": r["policy"], "settings": json.loads(r["settings"] or "{}")
                      or {"label": r["policy"]},
                      "metrics": {m: r[m] for m in metrics}, "jct_cdf": json.loads(r["jct_cdf"] or "[]"),
                      "timeline": json.loads(r["timeline"] or "[]")} for _, r in rows.iterrows()],
    }  # fmt: skip
