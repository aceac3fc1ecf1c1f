"""Schedule: simulate a trace (uploaded or synthetic) on a cluster under several policies, store it, and the
frames behind the page's charts; past simulations from the database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.api.schedule_unused import USED_BY
from stash_core.api.scheduling import TraceTooLarge, simulate_schedule
from stash_core.errors import UsageError
from stash_core.sched import defaults as d
from stash_core.sched.assumptions import (
    links_line,
    offered_load_line,
    sensitivity_counts,
    sensitivity_line,
)
from stash_core.sched.detect import detect_format
from stash_core.sched.pai import task_table_of
from stash_core.store.simulations import simulations_frame
from stash_core.units import duration_words

MAX_PAGE_JOBS = 20_000
# An upload past this is refused before it is read: 20,000 jobs of any format take a few MB to some tens
# (a Philly log's ~1.3 kB a job); a 72 MB trace of 3 million jobs took 55 s to be refused for its jobs.
MAX_PAGE_TRACE_BYTES = 64 * 2**20
# A simulation's cost grows with its jobs and with the nodes each placement looks at: measured on 2 busy
# cores, 20,000 synthetic jobs on the default 2x4x8 cluster took 49 s, 500 jobs on 10,000 nodes 14 s,
# 50 jobs on 100,000 nodes 8 s and 50 jobs on 1,000,000 nodes 87 s. A synthetic trace of more jobs x nodes
# than this is refused before it starts (about 15 s at the rates above)...
MAX_PAGE_JOB_NODES = 5_000_000
# ...and every simulation, an uploaded trace's too, runs in a process of its own that is stopped at this
# limit (a page's request keeps no process running after it; the largest accepted case runs at most this
# long plus the worker's start, about 2 s).
PAGE_TIME_LIMIT_S = 120.0
BEYOND_THE_PAGE = "run it with `stash schedule` (docs/scheduling.md), which has no such limit"
MODELS = list(d.MODELS)
SUMMARY = {"makespan_s": "makespan", "avg_jct_s": "average JCT", "p95_jct_s": "p95 JCT",
           "avg_queue_s": "average queueing delay", "comm_overhead_s": "communication overhead"}  # fmt: skip


def simulate(
    db_path: Path | str, *, files: list[tuple[str, bytes]] | None, trace_format: str = d.TRACE_FORMAT,
    synthetic_jobs: int = d.SYNTHETIC_JOBS, seed: int = d.SEED, mean_gap_s: float = d.MEAN_GAP_S,
    arrivals: str = d.ARRIVALS, generator: str = d.GENERATOR, cluster: tuple[int, int, int] = d.CLUSTER,
    policies: list[str] | None = None, tuning: str = d.TUNING, delay_s: float = d.DELAY_S,
    scale: float = d.SCALE, checkpoint_s: float = d.CHECKPOINT_S, min_run_s: float = d.MIN_RUN_S,
    uplink_factor: float = d.UPLINK_FACTOR, node_gbps: float | None = d.NODE_GBPS,
    oversubscription: float = d.OVERSUBSCRIPTION, reference_gbps: float = d.REFERENCE,
    out_dir: Path | str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run, write (sim-*.json in `out_dir`, by default results/ next to the database) and store one
    simulation; its document. UsageError on bad input. Every default is the command's (sched/defaults.py)."""
    policies = list(d.POLICY_NAMES) if policies is None else policies
    if not policies:
        raise UsageError("choose at least one policy")
    options = dict(
        cluster=tuple(cluster), policies=policies, tuning=tuning, delay_s=delay_s, scale=scale,
        checkpoint_s=checkpoint_s, min_run_s=min_run_s, uplink_factor=uplink_factor,
        node_gbps=node_gbps or None, oversubscription=oversubscription if node_gbps else None,
        reference_gbps=reference_gbps if node_gbps else None,
        out=None if out_dir is None else Path(out_dir), max_jobs=MAX_PAGE_JOBS, db=db_path,
    )  # fmt: skip
    # The page always sends every setting; the API refuses one no policy run here uses (or, for the uplink
    # factor, the link model replaces): sent where they count
    if tuning != "given":
        options.update(delay_s=None, scale=None)
    options.update({name: None for name, users in USED_BY.items() if name in options
                    and not set(users) & set(policies)})  # fmt: skip
    if node_gbps:
        options.update(uplink_factor=None)
    if files:
        if (size := sum(len(data) for _, data in files)) > MAX_PAGE_TRACE_BYTES:
            most = f"the page reads at most {MAX_PAGE_TRACE_BYTES // 2**20} MiB"
            raise UsageError(
                f"the uploaded trace is {size / 2**20:,.0f} MiB; {most} (its {MAX_PAGE_JOBS:,} jobs take far "
                "less): `stash schedule --trace FILE` takes a larger one"
            )
        with tempfile.TemporaryDirectory(prefix="stash-trace-") as folder:
            try:
                main, trace_format = _uploaded_trace(files, trace_format, Path(folder))
                batch = arrivals == "batch"  # the page's other arrivals are for synthetic traces
                label = f"{main.name} (read as {trace_format})" + (", all submitted at 0" if batch else "")
                schedule = simulate_schedule(main, trace_format=trace_format, trace_label=label,
                                             arrivals="batch" if batch else None, **options)  # fmt: skip
            except TraceTooLarge as error:
                raise UsageError(f"the trace has {error.jobs:,} jobs; the page simulates at most "
                                 f"{error.most:,}: {BEYOND_THE_PAGE}") from None  # fmt: skip
            except UsageError as error:  # named as uploaded, not by the server's temporary copy
                raise UsageError(str(error).replace(f"{folder}{os.sep}", "")) from None
        return _with_sensitivity(schedule)
    if not 1 <= synthetic_jobs <= MAX_PAGE_JOBS or not mean_gap_s > 0:
        raise UsageError(f"a synthetic trace needs 1 to {MAX_PAGE_JOBS:,} jobs and a positive mean gap")
    schedule = simulate_schedule(synthetic_jobs=synthetic_jobs, seed=seed, mean_gap_s=mean_gap_s,
                                 arrivals=arrivals, generator=generator, **options)  # fmt: skip
    return _with_sensitivity(schedule)


def _with_sensitivity(schedule: Any) -> dict[str, Any]:
    """The document, with where its jobs' network sensitivity came from (the command says it; the file and
    the database do not keep it)."""
    return {**schedule.doc, "sensitivity": sensitivity_counts(job.slowdown_source for job in schedule.jobs),
            "offered_load": offered_load_line(schedule.jobs, schedule.cluster.total_gpus)}  # fmt: skip


def assumption_lines(doc: dict[str, Any]) -> list[str]:
    """What the simulation assumed, as `stash schedule` says it: the link model, and (for one just run) where
    the jobs' network sensitivity came from."""
    lines = [links_line(doc["fabric"])] if isinstance(doc.get("fabric"), dict) else []
    lines += [sensitivity_line(doc["sensitivity"])] if doc.get("sensitivity") else []
    return lines + ([doc["offered_load"]] if doc.get("offered_load") else [])


def simulate_within_limit(
    db_path: Path | str, *, files: list[tuple[str, bytes]] | None, time_limit_s: float = PAGE_TIME_LIMIT_S,
    **options: Any,
) -> dict[str, Any]:  # fmt: skip
    """simulate() in a process of its own (views/schedule_worker.py), stopped after `time_limit_s`: its
    document, or UsageError (one line) for bad input, a simulation too large for the page or one that ran
    past the limit. Nothing keeps running after it returns."""
    cluster = tuple(options.get("cluster", d.CLUSTER))
    jobs = int(options.get("synthetic_jobs", d.SYNTHETIC_JOBS))
    nodes = int(cluster[0]) * int(cluster[1])
    if not files and jobs * nodes > MAX_PAGE_JOB_NODES:
        raise UsageError(f"{jobs:,} jobs on {nodes:,} nodes is more than the page simulates (jobs x nodes at "
                         f"most {MAX_PAGE_JOB_NODES:,}): {BEYOND_THE_PAGE}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="stash-schedule-") as folder:
        paths = []
        for position, (name, content) in enumerate(files or [], start=1):
            path = Path(folder) / f"upload-{position}"
            path.write_bytes(content)
            paths.append((name, str(path)))
        request = {"db": str(db_path), "files": paths or None, **options, "cluster": list(cluster)}
        if request.get("out_dir") is not None:
            request["out_dir"] = str(request["out_dir"])
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        try:
            done = subprocess.run([sys.executable, "-m", "stash_core.views.schedule_worker"],
                                  input=json.dumps(request).encode(), capture_output=True, env=env,
                                  timeout=time_limit_s, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:  # run() has killed the worker
            raise UsageError(f"the simulation ran past the page's {time_limit_s:.0f} s limit and was "
                             f"stopped: {BEYOND_THE_PAGE}") from None  # fmt: skip
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    answer = json.loads(lines[-1]) if done.returncode == 0 and lines else {}
    if "error" in answer:
        raise UsageError(answer["error"])
    if "doc" not in answer:
        detail = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1]  # the error's line
        raise UsageError(f"the simulation stopped: {detail or f'exit status {done.returncode}'}")
    return answer["doc"]


def _uploaded_trace(files: list[tuple[str, bytes]], trace_format: str, folder: Path) -> tuple[Path, str]:
    """The uploaded files written to `folder`: the trace's main file (a PAI job table beside its task table)
    and the format it is read as."""
    paths: list[Path] = []
    for position, (name, content) in enumerate(files, start=1):
        base = Path(name).name
        path = folder / (base if base not in ("", ".", "..") else f"upload-{position}")
        if path in paths:
            raise UsageError(f"two uploaded files are named {path.name}: upload each file once")
        path.write_bytes(content)
        paths.append(path)
    tables = [p for p in paths if "job_table" in p.name]
    pai = bool(tables) and trace_format in ("auto", "pai2020")
    paired = pai and len(paths) == 2 and task_table_of(tables[0]) in paths
    if len(paths) > 1 and not paired:  # the rest would be left out without a word
        names = ", ".join(path.name for path in paths)
        raise UsageError(f"{len(paths)} files uploaded ({names}): a simulation reads one trace file, or "
                         "a PAI job table with its task table (pai_job_table.csv, pai_task_table.csv)")
    main = tables[0] if pai else paths[0]
    return main, detect_format(main) if trace_format == "auto" else trace_format


def summary_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """One row per policy: its label and metrics."""
    return pd.DataFrame(
        [{"policy": e["policy"], "label": e["settings"]["label"], **e["metrics"]} for e in doc["policies"]]
    )


def summary_table(doc: dict[str, Any]) -> pd.DataFrame:
    """The summary as the page shows it: times in hours, the busy share in percent, headers in words."""
    frame = summary_frame(doc)
    # each policy by its label, which names it with its setting ("delay 300 s"): both, side by side, took a
    # column an 800 px page needed for the figures
    table = frame[["label"]].rename(columns={"label": "policy"})
    for column, label in SUMMARY.items():
        table[f"{label} (h)"] = (frame[column] / 3600).round(2)
    counts = (("preemptions", "preemptions"), ("spread_jobs", "jobs placed looser than their tightest"))
    for column, label in counts:
        if column in frame:
            table[label] = frame[column]
    if "gpu_busy_share" in frame:
        table["GPUs busy, these jobs (%)"] = (100 * frame["gpu_busy_share"].astype(float)).round(1)
    return table


def metrics_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """Long form of the summary's times for the bar chart: label, metric (in words), hours."""
    frame = summary_frame(doc)
    long = frame.melt(id_vars=["label"], value_vars=list(SUMMARY), var_name="column", value_name="s")
    long["metric"] = long["column"].map(SUMMARY)
    long["hours"] = long["s"] / 3600
    return long[["label", "metric", "hours"]]


def policy_label(entry: dict[str, Any]) -> str:
    """A policy as the summary and the bars name it, with its setting ("delay 300 s"): the line charts named
    it bare ("delay") beside them."""
    return str((entry.get("settings") or {}).get("label") or entry["policy"])


def cdf_frame(doc: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"policy": policy_label(e), "jct_h": s / 3600, "fraction": f}
                         for e in doc["policies"] for s, f in e["jct_cdf"]])  # fmt: skip


def queue_delay_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """Mean queueing delay of the jobs arriving in each stretch of time, per policy (hours)."""
    return pd.DataFrame([{"policy": policy_label(e), "arrival_h": t / 3600, "queue_h": q / 3600}
                         for e in doc["policies"] for t, q in e.get("queue_delay") or []])  # fmt: skip


def timeline_frame(doc: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"policy": policy_label(e), "t_h": t / 3600, "queued_jobs": q, "busy_share": b}
                         for e in doc["policies"] for t, q, b in e["timeline"]])  # fmt: skip


def winners(doc: dict[str, Any]) -> list[str]:
    """Which policy is lowest on each metric, and by how much against the next best; policies within
    TIE_S or TIE_SHARE of the lowest are said to be tied with it (no percentage of rounding noise)."""
    frame = summary_frame(doc)
    lines = []
    for column, label in SUMMARY.items():
        ranked = frame.sort_values(column, kind="stable")
        values = [float(value) for value in ranked[column]]
        labels = list(ranked["label"])
        tied = sum(1 for value in values if _tied(values[0], value))  # sorted: the tied ones come first
        if tied > 1:
            text = (f"{label}: {', '.join(labels[:tied])} tied (about {duration_words(values[0])}, within "
                    f"{TIE_S:.0f} s or {TIE_SHARE:.0%} of each other)")  # fmt: skip
        else:
            text = f"{label}: {labels[0]} ({duration_words(values[0])})"
        if tied < len(values) and values[tied] > 0:
            text += (f", {1 - values[0] / values[tied]:.1%} below {labels[tied]} "
                     f"({duration_words(values[tied])})")  # fmt: skip
        lines.append(text)
    return lines


# Two policies' times closer than this are a tie: a minute of a simulated schedule that runs for hours, or a
# share of the larger one that the simulation's own rounding of job times can move.
TIE_S = 60.0
TIE_SHARE = 0.01


def _tied(best_s: float, other_s: float) -> bool:
    return abs(other_s - best_s) < max(TIE_S, TIE_SHARE * max(abs(best_s), abs(other_s)))


PAST_SIMULATIONS_SHOWN = 100  # the newest simulations the page lists (their timelines are read whole)


def past_simulations(db_path: Path | str) -> pd.DataFrame:
    """The newest PAST_SIMULATIONS_SHOWN stored simulations, one row per policy, newest first;
    `attrs["simulations_stored"]` counts them all."""
    return simulations_frame(db_path, limit=PAST_SIMULATIONS_SHOWN)


def past_table(past: pd.DataFrame) -> pd.DataFrame:
    """Past simulations as the page lists them: when, which trace and cluster, each policy's times in hours
    (every column stays in the download)."""
    # to the second, beside its id: two made within a minute read alike, and the picker names the id
    created = pd.to_datetime(past["created_at"], utc=True).dt.strftime("%Y-%m-%d %H:%M:%S")  # stored in UTC
    table = pd.DataFrame({"simulation": past["simulation_id"], "created (UTC)": created,
                          "trace": past["trace"],
                          "jobs": past["jobs"], "GPUs": past["cluster_gpus"],
                          "policy": past["policy"]})  # fmt: skip
    for column in ("makespan_s", "avg_jct_s", "comm_overhead_s"):
        table[f"{SUMMARY[column]} (h)"] = (past[column].astype(float) / 3600).round(2)
    return table


def simulation_labels(past: pd.DataFrame) -> dict[str, str]:
    """Each stored simulation's id -> what the picker shows of it: when, which trace, how many jobs on how
    many GPUs, and the id the table lists."""
    labels = {}
    for row in past.drop_duplicates("simulation_id").to_dict(orient="records"):
        created = pd.to_datetime(row["created_at"], utc=True).strftime("%Y-%m-%d %H:%M:%S")
        jobs, gpus = int(row["jobs"]), int(row["cluster_gpus"])
        # the jobs reported, as the page's heading counts them (a split tuning tunes on the others)
        labels[row["simulation_id"]] = (f"{created} UTC · {row['trace']} · {jobs:,} jobs reported on "
                                        f"{gpus:,} GPUs · {row['simulation_id']}")  # fmt: skip
    return labels


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
        "tuning": first["tuning"], "fabric": json.loads(first["fabric"] or "null"),
        "cluster": {"switches": int(first["switches"]), "nodes_per_switch": int(first["nodes_per_switch"]),
                    "gpus_per_node": int(first["gpus_per_node"]), "gpus": int(first["cluster_gpus"])},
        "policies": [{"policy": r["policy"], "settings": json.loads(r["settings"] or "{}")
                      or {"label": r["policy"]},
                      "metrics": {m: r[m] for m in metrics}, "jct_cdf": json.loads(r["jct_cdf"] or "[]"),
                      "timeline": json.loads(r["timeline"] or "[]")} for _, r in rows.iterrows()],
    }  # fmt: skip
