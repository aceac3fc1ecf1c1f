"""The queries and data shaping behind the dashboard pages (no Streamlit here).

Every function opens the database for one query and closes it again (see stash_core.store.connect), aggregates
in SQL and returns small pandas frames, so a page stays fast on a database of thousands of runs and never
keeps a profile that is finishing from writing its results.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stash_core import PACKAGE_PARENT, store
from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES, upgrade_result

STALL_LABELS = {
    "compute": "Compute",
    "interconnect": "Interconnect",
    "network": "Network",
    "cpu": "CPU pre-processing",
    "disk": "Disk fetch",
}
STALL_COLORS = {
    "compute": "#4C78A8",
    "interconnect": "#F58518",
    "network": "#E45756",
    "cpu": "#72B7B2",
    "disk": "#54A24B",
}
NO_INSTANCE = "(no label)"
RUN_STATUSES = ("completed", "failed", "interrupted")
MAX_ITERATION_POINTS = 20_000
MAX_TELEMETRY_POINTS_PER_METRIC = 600
SCHEMA_DOC = Path(PACKAGE_PARENT) / "docs" / "schema.md"

# ---------------------------------------------------------------------------------------------------------
# Database identity (for caches)


def resolve_db_path(text: str | os.PathLike | None) -> Path:
    """The database file a setting names: STASH_DB, then ./results.duckdb; `~` expanded, made absolute."""
    chosen = str(text).strip() if text else ""
    if not chosen:
        chosen = os.environ.get("STASH_DB") or str(store.DEFAULT_DB_PATH)
    path = Path(chosen).expanduser()
    if path.exists() and path.is_dir():
        raise UsageError(f"{path} is a folder; give the path of a .duckdb file")
    return path.resolve()


def db_signature(db_path: Path | str) -> tuple[str, int, int, int]:
    """(path, mtime_ns, size, wal mtime_ns): changes whenever a writer changes the database (cache keys)."""
    path = Path(db_path)
    wal = path.with_name(path.name + ".wal")
    try:
        stat = path.stat()
        mtime, size = stat.st_mtime_ns, stat.st_size
    except OSError:
        mtime, size = 0, 0
    try:
        wal_mtime = wal.stat().st_mtime_ns
    except OSError:
        wal_mtime = 0
    return (str(path), mtime, size, wal_mtime)


# ---------------------------------------------------------------------------------------------------------
# Overview


def overview(db_path: Path | str, latest: int = 8, recent: int = 10) -> dict[str, Any]:
    """Everything the Overview shows, read over one connection: counts, the newest completed runs'
    breakdowns (labelled) and the newest runs of any status."""
    with store.connect(db_path, read_only=True) as con:
        row = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'completed'), count(DISTINCT model), "
            "count(DISTINCT coalesce(instance, hostname)), CAST(max(started_at) AS TIMESTAMP), "
            "(SELECT count(*) FROM iterations) FROM runs"
        ).fetchone()
        newest = _breakdown_rows(con, "status = 'completed'", [], latest)
        recent_frame = store.relation_frame(
            con.sql(
                "SELECT run_id, started_at, status, model, batch_size, workers_per_node, nodes, "
                "coalesce(instance, ?) AS instance, device, iteration_s, epoch_s, error FROM runs "
                "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT ?",
                params=[NO_INSTANCE, int(recent)],
            )
        )
    runs, completed, models, instances, last_run, iterations = row
    return {
        "db_path": str(db_path),
        "runs": int(runs),
        "completed_runs": int(completed),
        "models": int(models),
        "instances": int(instances),
        "iterations": int(iterations),
        "last_run_at": None if last_run is None else last_run.replace(tzinfo=UTC),
        "latest": newest,
        "recent": recent_frame,
    }


def run_breakdowns(db_path: Path | str, run_ids: list[str]) -> pd.DataFrame:
    """stall_breakdown rows of the given runs, with labels."""
    with store.connect(db_path, read_only=True) as con:
        return _breakdown_rows(
            con, "list_contains(CAST(? AS VARCHAR[]), run_id)", [list(run_ids)], len(run_ids)
        )


def _breakdown_rows(con: Any, where: str, params: list[Any], limit: int) -> pd.DataFrame:
    """stall_breakdown rows of the newest `limit` runs matching `where` (on runs), labelled, newest first.

    The runs are picked on the runs table first and the view is read for those ids only: the view pivots the
    stalls of every run, which costs far more than finding a few ids.
    """
    ids = [
        row[0]
        for row in con.execute(
            f"SELECT run_id FROM runs WHERE {where or 'true'} "
            "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT ?",
            [*params, max(0, int(limit))],
        ).fetchall()
    ]
    if not ids:
        frame = store.relation_frame(con.sql("SELECT * FROM stall_breakdown LIMIT 0"))
    else:
        marks = ", ".join("?" for _ in ids)
        frame = store.relation_frame(
            con.sql(
                f"SELECT * FROM stall_breakdown WHERE run_id IN ({marks}) "
                "ORDER BY started_at DESC NULLS LAST, run_id DESC",
                params=ids,
            )
        )
    return add_run_labels(frame)


# ---------------------------------------------------------------------------------------------------------
# Stall breakdown


@dataclass
class RunFilter:
    """What the breakdown page filters runs by; empty lists mean "any"."""

    models: list[str] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    workers: list[int] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    statuses: list[str] = field(default_factory=lambda: ["completed"])
    date_from: date | None = None
    date_to: date | None = None
    limit: int = 20


def model_names(db_path: Path | str) -> list[str]:
    """Models the database knows (the models table), sorted."""
    with store.connect(db_path, read_only=True) as con:
        return [row[0] for row in con.execute("SELECT name FROM models ORDER BY name").fetchall()]


def filter_options(db_path: Path | str) -> dict[str, Any]:
    """Distinct values to filter on (sorted), and the first and last run date."""
    with store.connect(db_path, read_only=True) as con:
        return _filter_options(con)


def _filter_options(con: Any) -> dict[str, Any]:
    lists = con.execute(
        "SELECT list_sort(list(DISTINCT model) FILTER (WHERE model IS NOT NULL)), "
        "list_sort(list(DISTINCT batch_size) FILTER (WHERE batch_size IS NOT NULL)), "
        "list_sort(list(DISTINCT coalesce(instance, ?))), "
        "list_sort(list(DISTINCT workers_per_node) FILTER (WHERE workers_per_node IS NOT NULL)), "
        "list_sort(list(DISTINCT nodes) FILTER (WHERE nodes IS NOT NULL)), "
        "list_sort(list(DISTINCT status) FILTER (WHERE status IS NOT NULL)), "
        "CAST(min(started_at) AS DATE), CAST(max(started_at) AS DATE) FROM runs",
        [NO_INSTANCE],
    ).fetchone()
    keys = ("models", "batch_sizes", "instances", "workers", "nodes", "statuses")
    options = {key: list(values or []) for key, values in zip(keys, lists[:6], strict=True)}
    options["first_date"], options["last_date"] = lists[6], lists[7]
    return options


def find_runs(db_path: Path | str, run_filter: RunFilter) -> tuple[pd.DataFrame, int]:
    """(stall_breakdown rows matching the filter, newest first, at most `run_filter.limit`, labelled;
    how many runs match in all)."""
    with store.connect(db_path, read_only=True) as con:
        return _find_runs(con, run_filter)


def _find_runs(con: Any, run_filter: RunFilter) -> tuple[pd.DataFrame, int]:
    where, params = _filter_sql(run_filter)
    condition = " AND ".join(where) if where else "true"
    total = int(con.execute(f"SELECT count(*) FROM runs WHERE {condition}", params).fetchone()[0])
    return _breakdown_rows(con, condition, params, max(1, int(run_filter.limit))), total


def breakdown_page(
    db_path: Path | str, run_filter: RunFilter, linked_run: str | None = None, previous_run: str | None = None
) -> dict[str, Any]:
    """What the Stall breakdown page shows, read over one connection: "options" (filter_options), "runs" and
    "total" (find_runs), "detail" (run_detail) and "missing" (a linked run id that is not stored, else None).

    The detail is of `linked_run` (a run opened by a link) when it is stored, else of `previous_run` (the one
    shown before) when it still matches the filter, else of the newest matching run.
    """
    with store.connect(db_path, read_only=True) as con:
        options = _filter_options(con)
        runs, total = _find_runs(con, run_filter)
        detail = _run_detail(con, linked_run) if linked_run else None
        missing = linked_run if linked_run and detail is None else None
        shown = set(runs["run_id"])
        if detail is None and previous_run in shown:
            detail = _run_detail(con, previous_run)
        if detail is None and not runs.empty:
            detail = _run_detail(con, str(runs["run_id"].iloc[0]))
    return {"options": options, "runs": runs, "total": total, "detail": detail, "missing": missing}


def _filter_sql(run_filter: RunFilter) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []

    def pick(column: str, values: list[Any], cast: str) -> None:
        if values:
            where.append(f"list_contains(CAST(? AS {cast}[]), {column})")
            params.append(list(values))

    pick("model", run_filter.models, "VARCHAR")
    pick("batch_size", [int(v) for v in run_filter.batch_sizes], "INTEGER")
    pick(f"coalesce(instance, '{NO_INSTANCE}')", run_filter.instances, "VARCHAR")
    pick("workers_per_node", [int(v) for v in run_filter.workers], "INTEGER")
    pick("nodes", [int(v) for v in run_filter.nodes], "INTEGER")
    pick("status", run_filter.statuses, "VARCHAR")
    if run_filter.date_from is not None:
        where.append("started_at >= CAST(? AS TIMESTAMPTZ)")
        params.append(datetime.combine(run_filter.date_from, datetime.min.time(), UTC).isoformat())
    if run_filter.date_to is not None:
        where.append("started_at < CAST(? AS TIMESTAMPTZ)")
        end = datetime.combine(run_filter.date_to + timedelta(days=1), datetime.min.time(), UTC)
        params.append(end.isoformat())
    return where, params


def add_run_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Add `run_label`: model, batch, workers x nodes, instance and the run id's tail - unique per run."""
    frame = frame.copy()
    if frame.empty:
        frame["run_label"] = pd.Series(dtype="object")
        return frame
    labels = []
    for row in frame.itertuples(index=False):
        row_dict = row._asdict()
        workers = _int_or_none(row_dict.get("workers_per_node"))
        nodes = _int_or_none(row_dict.get("nodes")) or 1
        scale = f"{workers or '?'}w" + (f"x{nodes}n" if nodes > 1 else "")
        instance = row_dict.get("instance") or NO_INSTANCE
        batch = _int_or_none(row_dict.get("batch_size")) or "?"
        parts = [short_model(row_dict.get("model")), f"b{batch}", scale, str(instance),
                 short_run_id(str(row_dict.get("run_id")))]  # fmt: skip
        labels.append(" · ".join(parts))
    frame["run_label"] = labels
    return frame


def short_run_id(run_id: str) -> str:
    """The random tail of a run id (unique enough to tell runs apart on a chart)."""
    return run_id.rsplit("-", 1)[-1] if "-" in run_id else run_id[-8:]


def short_model(model: Any) -> str:
    """A model name fit for a chart label: a user model /path/to/FILE.py:FACTORY shows as FILE.py:FACTORY."""
    if not model or (isinstance(model, float) and math.isnan(model)):
        return "?"
    text = str(model)
    if "/" in text:
        text = text.rsplit("/", 1)[-1]
    return text


def stall_long_frame(breakdown: pd.DataFrame, measure: str = "seconds") -> pd.DataFrame:
    """Stall rows (one per run and stall) for a stacked bar, with explicit bar ends and error-bar ends.

    `measure`: "seconds" (per iteration), "epoch_s" (per epoch) or "share" (of the iteration). The bars of one
    run are laid end to end in STALL_NAMES order; an error bar sits at the end of its stall's bar and spans
    the stall's 95% confidence interval. Stalls without a value (not measured) are left out.
    """
    if measure not in ("seconds", "epoch_s", "share"):
        raise UsageError(f"unknown measure {measure!r}")
    rows = []
    for record in breakdown.to_dict(orient="records"):
        start = 0.0
        iteration_s = _num(record.get("iteration_s"))
        per_epoch = _num(record.get("iterations_per_epoch"))
        for order, stall in enumerate(STALL_NAMES):
            seconds = _num(record.get(f"{stall}_s"))
            ci_s = _num(record.get(f"{stall}_ci95_s"))
            if measure == "seconds":
                value, ci = seconds, ci_s
            elif measure == "epoch_s":
                value = _num(record.get(f"{stall}_epoch_s"))
                if value is None and seconds is not None and per_epoch:
                    value = seconds * per_epoch
                ci = ci_s * per_epoch if ci_s is not None and per_epoch else None
            else:
                value = _num(record.get(f"{stall}_share"))
                ci = ci_s / iteration_s if ci_s is not None and iteration_s else None
            if value is None:
                continue
            end = start + value
            rows.append(
                {
                    "run_id": record.get("run_id"),
                    "run_label": record.get("run_label") or record.get("run_id"),
                    "stall": stall,
                    "stall_label": STALL_LABELS[stall],
                    "stall_order": order,
                    "status": record.get(f"{stall}_status"),
                    "value": value,
                    "ci95": ci,
                    "bar_start": start,
                    "bar_end": end,
                    "error_low": None if ci is None else end - ci,
                    "error_high": None if ci is None else end + ci,
                }
            )
            start = end
    columns = ["run_id", "run_label", "stall", "stall_label", "stall_order", "status", "value", "ci95",
               "bar_start", "bar_end", "error_low", "error_high"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def breakdown_table(breakdown: pd.DataFrame) -> pd.DataFrame:
    """A readable per-run table: seconds and share of each stall next to the run's identity."""
    columns = ["run_label", "run_id", "started_at", "status", "iteration_s", "iteration_ci95_s", "epoch_s"]
    table = breakdown[[c for c in columns if c in breakdown.columns]].copy()
    for stall in STALL_NAMES:
        if f"{stall}_s" in breakdown.columns:
            table[f"{stall}_s"] = breakdown[f"{stall}_s"]
            table[f"{stall}_share"] = breakdown[f"{stall}_share"]
    return table


def run_detail(
    db_path: Path | str,
    run_id: str,
    max_iterations: int = MAX_ITERATION_POINTS,
    max_points_per_metric: int = MAX_TELEMETRY_POINTS_PER_METRIC,
) -> dict[str, Any] | None:
    """One stored run, read over one connection: the runs row (spec, fingerprint, warnings parsed), "phases"
    and "stalls" (lists of dicts, as store.get_run gives them), "samples" (per-iteration times) and
    "telemetry" (see telemetry_frame). None when there is no such run."""
    with store.connect(db_path, read_only=True) as con:
        return _run_detail(con, run_id, max_iterations, max_points_per_metric)


def _run_detail(
    con: Any,
    run_id: str,
    max_iterations: int = MAX_ITERATION_POINTS,
    max_points_per_metric: int = MAX_TELEMETRY_POINTS_PER_METRIC,
) -> dict[str, Any] | None:
    runs = store.relation_frame(con.sql("SELECT * FROM runs WHERE run_id = ?", params=[run_id]))
    if runs.empty:
        return None
    phases = store.relation_frame(
        con.sql("SELECT * FROM phases WHERE run_id = ? ORDER BY phase_index, phase", params=[run_id])
    )
    stalls = store.relation_frame(
        con.sql(
            "SELECT * FROM stalls WHERE run_id = ? ORDER BY list_position(?, stall) NULLS LAST, stall",
            params=[run_id, list(STALL_NAMES)],
        )
    )
    samples = store.relation_frame(
        con.sql(
            "SELECT phase, iteration, iteration_s, data_s, forward_s, backward_s, optimizer_s "
            "FROM iterations WHERE run_id = ? ORDER BY list_position(?, phase), phase, iteration LIMIT ?",
            params=[run_id, list(phases["phase"]), int(max_iterations)],
        )
    )
    telemetry = store.relation_frame(
        con.sql(
            "WITH t AS (SELECT phase, metric, t_s, value, "
            "row_number() OVER (PARTITION BY phase, metric ORDER BY t_s) AS n, "
            "count(*) OVER (PARTITION BY phase, metric) AS total FROM telemetry WHERE run_id = ?), "
            "s AS (SELECT count(DISTINCT phase) AS phases FROM t) "
            "SELECT phase, metric, t_s, value FROM t, s "
            "WHERE (n - 1) % greatest(1, CAST(ceil(total * phases / ?) AS BIGINT)) = 0 "
            "ORDER BY phase, metric, t_s",
            params=[run_id, float(max_points_per_metric)],
        )
    )
    run = _records(runs)[0]
    for column in ("spec", "fingerprint", "warnings"):
        if isinstance(run.get(column), str):
            run[column] = json.loads(run[column])
    for column in ("started_at", "finished_at", "ingested_at"):
        if isinstance(run.get(column), str):
            run[column] = datetime.fromisoformat(run[column])
    run["phases"] = _records(phases)
    run["stalls"] = _records(stalls)
    run["samples"] = samples
    run["telemetry"] = telemetry_frame(telemetry, run["phases"])
    return run


def telemetry_frame(telemetry: pd.DataFrame, phases: list[dict[str, Any]]) -> pd.DataFrame:
    """Telemetry rows (phase, metric, t_s, value) on one time axis, phases laid end to end by wall time.

    Adds run_t_s (seconds since the first phase started) and group (which chart: CPU %, Disk MB/s, ...);
    byte counts become GB for a readable axis.
    """
    frame = telemetry.copy()
    spans = phase_spans(phases)
    offsets = dict(zip(spans["phase"], spans["start_s"], strict=True)) if not spans.empty else {}
    frame["run_t_s"] = frame["t_s"] + frame["phase"].map(offsets).fillna(0.0)
    frame["group"] = frame["metric"].map(metric_group)
    scale = frame["metric"].str.endswith("_bytes")
    frame.loc[scale, "value"] = frame.loc[scale, "value"] / 1e9
    frame["metric"] = frame["metric"].where(~scale, frame["metric"].str.replace("_bytes", "_gb", regex=False))
    return frame


def metric_group(metric: str) -> str:
    """Which chart a telemetry metric belongs on."""
    if re.fullmatch(r"cpu\d*_util_pct", metric):
        return "CPU utilisation (%)"
    if metric.startswith("mem_"):
        return "Memory used (GB)"
    if metric.startswith("disk_"):
        return "Disk (MB/s)"
    if metric.startswith("net_"):
        return "Network (MB/s)"
    if re.fullmatch(r"gpu\d+_util_pct", metric):
        return "GPU utilisation (%)"
    if re.fullmatch(r"gpu\d+_mem_used_bytes", metric):
        return "GPU memory used (GB)"
    if metric.endswith("_power_w"):
        return "GPU power (W)"
    if metric.startswith("gpu"):
        return "GPU links (MB/s)"
    return "Other"


def phase_spans(phases: list[dict[str, Any]]) -> pd.DataFrame:
    """(phase, description, start_s, end_s) with phases laid end to end by their wall time."""
    rows = []
    start = 0.0
    for phase in sorted(phases, key=lambda p: p.get("phase_index") or 0):
        wall = _num(phase.get("wall_s")) or 0.0
        rows.append({"phase": phase.get("phase"), "description": phase.get("description") or "",
                     "start_s": start, "end_s": start + wall})  # fmt: skip
        start += wall
    return pd.DataFrame(rows, columns=["phase", "description", "start_s", "end_s"])


# ---------------------------------------------------------------------------------------------------------
# Compare instances


def compare_choices(db_path: Path | str) -> pd.DataFrame:
    """(model, batch_size, runs, configurations) of completed runs, most-compared first."""
    sql = (
        "SELECT model, batch_size, count(*) AS runs, "
        "count(DISTINCT (coalesce(instance, ?), workers_per_node, nodes)) AS configurations "
        "FROM runs WHERE status = 'completed' AND model IS NOT NULL AND batch_size IS NOT NULL "
        "AND iteration_s IS NOT NULL GROUP BY ALL ORDER BY configurations DESC, runs DESC, model, batch_size "
        "LIMIT 500"
    )
    with store.connect(db_path, read_only=True) as con:
        return store.relation_frame(con.sql(sql, params=[NO_INSTANCE]))


def compare_configurations(db_path: Path | str, model: str, batch_size: int) -> pd.DataFrame:
    """One row per (instance, workers per node, nodes) that ran `model` at `batch_size`, with costs.

    Times are means over the completed runs of a configuration; prices come from the instances catalog
    (NULL when the instance is not in it). Derived: samples_per_s, time per million samples, cost per epoch,
    per million samples, throughput per GPU and samples per dollar.
    """
    shares = ", ".join(
        f"avg({stall}_share) AS {stall}_share, avg({stall}_s) AS {stall}_s" for stall in STALL_NAMES
    )
    sql = f"""
        WITH picked AS (
            SELECT * FROM stall_breakdown
            WHERE status = 'completed' AND model = ? AND batch_size = ? AND iteration_s IS NOT NULL
        )
        SELECT coalesce(p.instance, ?) AS instance, p.workers_per_node, p.nodes,
               count(*) AS runs, arg_max(p.run_id, p.started_at) AS latest_run_id,
               max(p.device) AS device,
               avg(p.iteration_s) AS iteration_s, avg(p.iteration_ci95_s) AS iteration_ci95_s,
               avg(p.epoch_s) AS epoch_s, avg(p.iterations_per_epoch) AS iterations_per_epoch, {shares},
               any_value(i.provider) AS provider, any_value(i.accelerator) AS accelerator,
               any_value(i.accelerator_count) AS accelerator_count,
               any_value(i.on_demand_usd_per_h) AS on_demand_usd_per_h,
               any_value(i.spot_usd_per_h) AS spot_usd_per_h
        FROM picked AS p LEFT JOIN instances AS i ON i.name = p.instance
        GROUP BY ALL
        ORDER BY iteration_s
        LIMIT 200
    """
    with store.connect(db_path, read_only=True) as con:
        frame = store.relation_frame(con.sql(sql, params=[model, int(batch_size), NO_INSTANCE]))
    return add_costs(frame, batch_size)


def add_costs(frame: pd.DataFrame, batch_size: int) -> pd.DataFrame:
    """Throughput, cost and normalised columns of compare_configurations (NaN where unknown)."""
    frame = frame.copy()
    nodes = frame["nodes"].fillna(1).astype(float)
    workers = frame["workers_per_node"].fillna(1).astype(float)
    frame["configuration"] = [
        f"{instance} · {int(w)}w" + (f"x{int(n)}n" if n > 1 else "")
        for instance, w, n in zip(frame["instance"], workers, nodes, strict=True)
    ]
    frame["samples_per_iteration"] = batch_size * workers * nodes
    iteration_s = frame["iteration_s"].astype(float)
    frame["samples_per_s"] = frame["samples_per_iteration"] / iteration_s
    frame["s_per_million_samples"] = 1e6 / frame["samples_per_s"]
    usd_per_h = frame["on_demand_usd_per_h"].astype(float) * nodes
    frame["usd_per_h"] = usd_per_h
    frame["usd_per_epoch"] = frame["epoch_s"].astype(float) / 3600.0 * usd_per_h
    frame["usd_per_million_samples"] = frame["s_per_million_samples"] / 3600.0 * usd_per_h
    frame["samples_per_usd"] = frame["samples_per_s"] * 3600.0 / usd_per_h
    gpus = frame["accelerator_count"].astype(float) * nodes
    on_gpu = frame["device"].fillna("").eq("cuda")
    gpus = gpus.where(gpus > 0, (workers * nodes).where(on_gpu))
    frame["gpus"] = gpus
    frame["samples_per_s_per_gpu"] = frame["samples_per_s"] / gpus
    return frame.replace([np.inf, -np.inf], np.nan)


def compare_verdict(frame: pd.DataFrame) -> dict[str, Any]:
    """Which configuration is fastest (highest throughput) and which cheapest (lowest cost per sample).

    Returns {"fastest", "slowest", "speedup", "cheapest", "next_cheapest", "saving", "priced"}: names and
    ratios (speedup = fastest / slowest throughput; saving = 1 - cheapest / next cheapest cost).
    """
    verdict: dict[str, Any] = {"fastest": None, "cheapest": None, "priced": 0}
    usable = frame.dropna(subset=["samples_per_s"])
    if usable.empty:
        return verdict
    ordered = usable.sort_values("samples_per_s", ascending=False)
    verdict["fastest"] = ordered.iloc[0]["configuration"]
    verdict["fastest_samples_per_s"] = float(ordered.iloc[0]["samples_per_s"])
    if len(ordered) > 1:
        verdict["slowest"] = ordered.iloc[-1]["configuration"]
        verdict["speedup"] = float(ordered.iloc[0]["samples_per_s"] / ordered.iloc[-1]["samples_per_s"])
        verdict["runner_up"] = ordered.iloc[1]["configuration"]
        verdict["lead_over_runner_up"] = float(
            ordered.iloc[0]["samples_per_s"] / ordered.iloc[1]["samples_per_s"]
        )
    priced = usable.dropna(subset=["usd_per_million_samples"]).sort_values("usd_per_million_samples")
    verdict["priced"] = len(priced)
    if not priced.empty:
        verdict["cheapest"] = priced.iloc[0]["configuration"]
        verdict["cheapest_usd_per_million_samples"] = float(priced.iloc[0]["usd_per_million_samples"])
        if len(priced) > 1:
            verdict["next_cheapest"] = priced.iloc[1]["configuration"]
            verdict["saving"] = float(
                1.0 - priced.iloc[0]["usd_per_million_samples"] / priced.iloc[1]["usd_per_million_samples"]
            )
    return verdict


def compare_stall_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Stall shares per configuration, long format, for a stacked bar."""
    rows = []
    for record in frame.to_dict(orient="records"):
        for order, stall in enumerate(STALL_NAMES):
            share = _num(record.get(f"{stall}_share"))
            if share is None:
                continue
            rows.append({"configuration": record["configuration"], "stall": stall,
                         "stall_label": STALL_LABELS[stall], "stall_order": order, "share": share,
                         "seconds": _num(record.get(f"{stall}_s"))})  # fmt: skip
    return pd.DataFrame(
        rows, columns=["configuration", "stall", "stall_label", "stall_order", "share", "seconds"]
    )


# ---------------------------------------------------------------------------------------------------------
# SQL console: schema browser and examples

EXAMPLE_QUERIES: list[tuple[str, str]] = [
    (
        "Newest runs and their breakdown",
        "SELECT run_id, model, batch_size, workers_per_node, instance, iteration_s,\n"
        "       compute_share, interconnect_share, cpu_share, disk_share\n"
        "FROM stall_breakdown\nORDER BY started_at DESC\nLIMIT 20",
    ),
    (
        "Largest stall of each run",
        "SELECT run_id, model, arg_max(stall, seconds) AS largest_stall, max(seconds) AS seconds\n"
        "FROM stalls JOIN runs USING (run_id)\nWHERE seconds IS NOT NULL\nGROUP BY ALL\n"
        "ORDER BY seconds DESC\nLIMIT 20",
    ),
    (
        "Mean iteration time per model and instance",
        "SELECT model, instance, count(*) AS runs, avg(iteration_s) AS iteration_s\n"
        "FROM runs\nWHERE status = 'completed'\nGROUP BY ALL\nORDER BY model, iteration_s",
    ),
    (
        "Iteration-time percentiles per phase",
        "SELECT run_id, phase, count(*) AS iterations,\n"
        "       quantile_cont(iteration_s, 0.5) AS median_s,\n"
        "       quantile_cont(iteration_s, 0.95) AS p95_s\n"
        "FROM iterations\nWHERE run_id = (SELECT max(run_id) FROM runs)\nGROUP BY ALL\nORDER BY phase",
    ),
    (
        "Peak CPU and disk use per run",
        "SELECT run_id, metric, max(value) AS peak\nFROM telemetry\n"
        "WHERE metric IN ('cpu_util_pct', 'disk_read_mbps')\nGROUP BY ALL\nORDER BY run_id DESC\nLIMIT 40",
    ),
]


def schema_browser(db_path: Path | str) -> dict[str, dict[str, Any]]:
    """Per table and view of the store: kind, row count (tables), columns with type and documented meaning."""
    documented = schema_documentation()
    names = [*store.TABLES, *store.VIEWS]
    with store.connect(db_path, read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND list_contains(?, table_name) "
            "ORDER BY table_name, ordinal_position",
            [names],
        ).fetchall()
        counts = {}
        for table in store.TABLES:
            row = con.execute(
                "SELECT estimated_size FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?",
                [table],
            ).fetchone()
            counts[table] = None if row is None else int(row[0])
    browser: dict[str, dict[str, Any]] = {
        name: {
            "kind": "view" if name in store.VIEWS else "table",
            "rows": counts.get(name),
            "columns": [],
            "about": documented.get(name, {}).get("", ""),
        }  # fmt: skip
        for name in names
    }
    for table, column, data_type in columns:
        meaning = documented.get(table, {}).get(column, "")
        browser[table]["columns"].append({"column": column, "type": data_type, "meaning": meaning})
    return browser


def schema_documentation(path: Path = SCHEMA_DOC) -> dict[str, dict[str, str]]:
    """Column meanings from docs/schema.md: {table: {column: meaning, "": what the table holds}}.

    Reads a heading that names a table or view (e.g. "### `runs` - one row per profile") followed by a
    Markdown table with a "column" header and a "meaning" header (a "unit" column is added in brackets).
    A cell may name several columns (`a`, `b`) or a pattern with `<stall>`; "as in `runs`" borrows the runs
    table's meaning. A missing file gives an empty result.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    known = {*store.TABLES, *store.VIEWS}
    docs: dict[str, dict[str, str]] = {}
    current: str | None = None
    header: list[str] = []
    summary = ""  # the heading's own description ("### `runs` - one row per profile")
    paragraph: list[str] = []  # the first paragraph under the heading
    paragraph_done = False

    def finish() -> None:
        if current is not None:
            text = " ".join(paragraph)
            parts = [summary[:1].upper() + summary[1:] if summary else "", text]
            docs[current][""] = ". ".join(part.rstrip(".") for part in parts if part) + (
                "." if any(parts) else ""
            )

    for index, line in enumerate(lines):
        heading = re.match(r"^#{2,4}\s+(.*)$", line)
        if heading:
            finish()
            name_part, _, description = heading.group(1).partition(" - ")
            words = re.findall(r"[A-Za-z_]+", name_part)
            current = next((word for word in words if word in known), None)
            header, paragraph, paragraph_done = [], [], False
            summary = description.strip()
            if current is not None:
                docs.setdefault(current, {})
            continue
        if current is None:
            continue
        if not line.startswith("|"):
            if line.strip() and not header and not paragraph_done:
                paragraph.append(line.strip())
            elif paragraph:
                paragraph_done = True
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if re.fullmatch(r"\|?[\s:|-]+\|?", following.strip() or "x"):
            header = [cell.lower() for cell in cells]  # the header row sits above the separator
            continue
        if set("".join(cells)) <= set("-: ") or not header or "meaning" not in header:
            continue
        meaning = cells[header.index("meaning")].replace("`", "") if len(cells) == len(header) else cells[-1]
        unit = cells[header.index("unit")] if "unit" in header and len(cells) == len(header) else ""
        text = f"{meaning} ({unit})" if unit else meaning
        for name in _column_names(cells[0]):
            borrowed = re.fullmatch(r"as in (\w+)", meaning.strip())
            if borrowed and borrowed.group(1) in docs and name in docs[borrowed.group(1)]:
                docs[current][name] = docs[borrowed.group(1)][name]
            else:
                docs[current][name] = text
    finish()
    return docs


def _column_names(cell: str) -> list[str]:
    names = re.findall(r"`([^`]+)`", cell) or [cell.strip("* ")]
    expanded = []
    for name in names:
        if "<stall>" in name:
            expanded += [name.replace("<stall>", stall) for stall in STALL_NAMES]
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            expanded.append(name)
    return expanded


# ---------------------------------------------------------------------------------------------------------
# Upload


@dataclass
class UploadCheck:
    """The verdict on one uploaded file."""

    name: str
    ok: bool
    reason: str  # why it was refused, or what it holds
    kind: str = "result"  # result | export:<table> | unknown
    docs: list[dict[str, Any]] = field(default_factory=list)  # result documents it yields (validated)
    run_ids: list[str] = field(default_factory=list)
    frame: pd.DataFrame | None = None  # the table of an export file
    storable: bool = True


@dataclass
class UploadReport:
    """Checks of all uploaded files and a stall_breakdown preview of the runs they hold."""

    checks: list[UploadCheck]
    preview: pd.DataFrame
    already_stored: set[str]

    @property
    def good(self) -> list[UploadCheck]:
        return [check for check in self.checks if check.ok]

    @property
    def bad(self) -> list[UploadCheck]:
        return [check for check in self.checks if not check.ok]

    @property
    def storable_docs(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (check.name, doc) for check in self.checks if check.ok and check.storable for doc in check.docs
        ]


def check_uploads(files: list[tuple[str, bytes]], db_path: Path | str | None = None) -> UploadReport:
    """Validate uploaded files without touching the database.

    JSON result files, and exports of `stash export` (Parquet, CSV or JSON lines; runs plus optionally
    phases, stalls, iterations and telemetry uploaded together, or a stall_breakdown table for comparing
    only). Every run is test-ingested into a scratch database, so a file that passes here also stores.
    """
    checks = [_check_file(name, data) for name, data in files]
    _assemble_exports(checks)
    preview = _dry_run(checks)
    stored: set[str] = set()
    run_ids = [run_id for check in checks if check.ok for run_id in check.run_ids]
    if db_path is not None and run_ids:
        with store.connect(db_path, read_only=True) as con:
            rows = con.execute(
                "SELECT run_id FROM runs WHERE list_contains(CAST(? AS VARCHAR[]), run_id)", [run_ids]
            ).fetchall()
        stored = {row[0] for row in rows}
    return UploadReport(checks=checks, preview=preview, already_stored=stored)


def store_uploads(db_path: Path | str, report: UploadReport) -> list[tuple[str, str, bool]]:
    """Ingest the storable runs of a checked upload; (file name, run_id, inserted) per run."""
    outcomes = []
    for name, doc in report.storable_docs:
        inserted = store.ingest_result(db_path, doc, source_file=f"upload:{name}")
        outcomes.append((name, doc["run_id"], inserted))
    return outcomes


_EXPORT_TABLES = (
    "runs",
    "phases",
    "stalls",
    "iterations",
    "telemetry",
    "stall_breakdown",
    "models",
    "instances",
    "probes",
)


def _check_file(name: str, data: bytes) -> UploadCheck:
    suffix = Path(name).suffix.lower()
    if not data:
        stem = Path(name).stem.lower()
        if suffix == ".json" and stem in _table_columns():
            # `stash export --format json` writes a table with no rows as an empty JSON-lines file.
            return _check_table(name, pd.DataFrame(columns=sorted(_table_columns()[stem])))
        return UploadCheck(name, False, "the file is empty", kind="unknown")
    try:
        if suffix == ".json":
            return _check_json(name, data)
        if suffix in (".parquet", ".pq"):
            return _check_table(name, pd.read_parquet(io.BytesIO(data)))
        if suffix == ".csv":
            return _check_table(name, pd.read_csv(io.BytesIO(data)))
    except UsageError as exc:
        return UploadCheck(name, False, str(exc), kind="unknown")
    except Exception as exc:  # pandas/pyarrow raise many kinds for a corrupt file
        return UploadCheck(name, False, f"cannot read it as {suffix[1:]}: {_first_line(exc)}", kind="unknown")
    reason = f"unsupported file type {suffix or '(none)'}; upload .json, .parquet or .csv"
    return UploadCheck(name, False, reason,
                       kind="unknown")  # fmt: skip


def _check_json(name: str, data: bytes) -> UploadCheck:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return UploadCheck(name, False, "not UTF-8 text", kind="unknown")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1:  # `stash export --format json` writes one object per line
            try:
                return _check_table(name, pd.DataFrame([json.loads(line) for line in lines]))
            except (json.JSONDecodeError, ValueError, TypeError):
                pass
        return UploadCheck(name, False, f"not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})",
                           kind="unknown")  # fmt: skip
    if isinstance(doc, dict) and doc.get("kind") != "stash-profile" and "run_id" in doc and "model" in doc:
        return _check_table(name, pd.DataFrame([doc]))  # a one-row JSON-lines export
    try:
        doc = upgrade_result(doc)
    except UsageError as exc:
        return UploadCheck(name, False, str(exc))
    summary_text = f"{doc['status']} run of {doc['spec'].get('model')} with {len(doc['phases'])} phase(s)"
    return UploadCheck(name, True, summary_text, docs=[doc], run_ids=[doc["run_id"]])


def _check_table(name: str, frame: pd.DataFrame) -> UploadCheck:
    table = _identify_table(name, frame)
    if table is None:
        return UploadCheck(name, False, "not a Stash export: its columns match none of the store's tables",
                           kind="unknown")  # fmt: skip
    check = UploadCheck(
        name, True, f"{table} table, {len(frame)} row(s)", kind=f"export:{table}", frame=frame
    )
    if table == "stall_breakdown":
        check.storable = False
        check.reason += " - for comparing here; upload runs (with phases, stalls, ...) to store runs"
        check.run_ids = [str(v) for v in frame["run_id"].dropna().unique()]
    elif table in ("models", "instances", "probes"):
        # Part of a whole export folder: nothing to store from it (models come with the runs; the instance
        # catalog is edited on its own; probes are measured by `stash probe`), but no reason to refuse it.
        check.storable = False
        check.reason += (
            " - not stored from here (models come with their runs; the catalog is edited on its own;"
            " probes come from `stash probe`)"
        )
    return check


def _identify_table(name: str, frame: pd.DataFrame) -> str | None:
    columns = set(frame.columns)
    expected = _table_columns()
    matches = [table for table, wanted in expected.items() if wanted and wanted <= columns]
    if not matches:
        stem = Path(name).stem.lower()
        return stem if stem in expected and expected[stem] & columns == expected[stem] else None
    # The most specific table wins (stall_breakdown's columns include several of runs').
    return max(matches, key=lambda table: len(expected[table]))


_COLUMNS_CACHE: dict[str, set[str]] = {}


def _table_columns() -> dict[str, set[str]]:
    if not _COLUMNS_CACHE:
        with tempfile.TemporaryDirectory(prefix="stash-schema-") as folder:
            with store.connect(Path(folder) / "schema.duckdb") as con:
                rows = con.execute(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = 'main'"
                ).fetchall()
        for table, column in rows:
            # exports made before the later runs columns lack them and are still whole
            if table in _EXPORT_TABLES and not (table == "runs" and column in store.LATER_RUN_COLUMNS):
                _COLUMNS_CACHE.setdefault(table, set()).add(column)
    return _COLUMNS_CACHE


def _assemble_exports(checks: list[UploadCheck]) -> None:
    """Turn uploaded export tables into result documents: runs rows plus their phases, stalls, samples."""
    tables: dict[str, pd.DataFrame] = {}
    for check in checks:
        if check.ok and check.kind.startswith("export:") and check.frame is not None:
            table = check.kind.split(":", 1)[1]
            tables[table] = pd.concat([tables[table], check.frame]) if table in tables else check.frame
    companions = ("phases", "stalls", "iterations", "telemetry")
    for check in checks:
        if not (check.ok and check.kind.startswith("export:")):
            continue
        table = check.kind.split(":", 1)[1]
        if table in companions and "runs" not in tables:
            check.ok = False
            check.reason = f"a {table} table adds nothing alone; upload it together with the runs table"
        elif table == "runs":
            try:
                check.docs = [upgrade_result(doc) for doc in docs_from_export(tables)]
            except UsageError as exc:
                check.ok = False
                check.reason = f"runs table: {exc}"
                continue
            check.run_ids = [doc["run_id"] for doc in check.docs]
            check.reason = f"runs table with {len(check.docs)} run(s)" + (
                f", with {', '.join(t for t in companions if t in tables)}"
                if any(t in tables for t in companions)
                else ""
            )


def docs_from_export(tables: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Result documents rebuilt from exported tables (runs required; phases, stalls, iterations, telemetry
    optional). UsageError when a row cannot be read back."""
    runs = tables["runs"]
    by_run = {name: _group(tables.get(name)) for name in ("phases", "stalls", "iterations", "telemetry")}
    docs = []
    for row in _records(runs):
        run_id = row.get("run_id")
        if not run_id:
            raise UsageError("a row has no run_id")
        docs.append(
            _doc_from_rows(
                str(run_id), row, {name: groups.get(str(run_id)) for name, groups in by_run.items()}
            )
        )
    return docs


def _doc_from_rows(run_id: str, run: dict[str, Any], parts: dict[str, pd.DataFrame | None]) -> dict[str, Any]:
    spec = _json_value(run.get("spec"), f"run {run_id} spec") or {}
    phases = []
    phase_rows = parts["phases"]
    iterations = parts["iterations"]
    telemetry = parts["telemetry"]
    if phase_rows is not None:
        for phase in sorted(_records(phase_rows), key=lambda p: p.get("phase_index") or 0):
            name = phase["phase"]
            entry: dict[str, Any] = {
                "name": name,
                "description": phase.get("description"),
                "workers": phase.get("workers"),
                "nodes": phase.get("nodes"),
                "data": phase.get("data"),
                "status": phase.get("status") or "completed",
                "error": phase.get("error"),
                "resident_fraction_start": phase.get("resident_fraction_start"),
                "warmup_iterations": phase.get("warmup_iterations"),
                "iterations": phase.get("iterations"),
                "iteration_s": {
                    key: phase.get(f"{key}_s") for key in ("mean", "ci95", "std", "median", "p5", "p95")
                }
                | {"n": phase.get("iterations")},
                "parts_mean_s": {
                    key: phase.get(key) for key in ("data_s", "forward_s", "backward_s", "optimizer_s")
                },
                "samples": {},
                "rank_skew_s": phase.get("rank_skew_s"),
                "wall_s": phase.get("wall_s"),
                "telemetry": {"interval_s": phase.get("telemetry_interval_s"), "t_s": [], "metrics": {}},
            }
            if iterations is not None:
                mine = iterations[iterations["phase"] == name].sort_values("iteration")
                for key in (
                    "iteration_s",
                    "data_s",
                    "forward_s",
                    "backward_s",
                    "optimizer_s",
                    "slowest_rank",
                ):
                    if key in mine.columns:
                        entry["samples"][key] = [_plain(value) for value in mine[key].tolist()]
            if telemetry is not None:
                mine = telemetry[telemetry["phase"] == name]
                if not mine.empty:
                    wide = mine.pivot_table(index="t_s", columns="metric", values="value", aggfunc="first")
                    entry["telemetry"]["t_s"] = [float(t) for t in wide.index]
                    entry["telemetry"]["metrics"] = {
                        str(metric): [_plain(v) for v in wide[metric].tolist()] for metric in wide.columns
                    }
            phases.append(entry)
    stalls = {}
    if parts["stalls"] is not None:
        for stall in _records(parts["stalls"]):
            stalls[stall["stall"]] = {
                key: stall.get(key) for key in ("seconds", "ci95_s", "share", "epoch_s", "status")
            }
            stalls[stall["stall"]]["note"] = stall.get("note") or ""
    breakdown = {
        "iteration_s": run.get("iteration_s"),
        "iteration_ci95_s": run.get("iteration_ci95_s"),
        "iterations_per_epoch": run.get("iterations_per_epoch"),
        "epoch_s": run.get("epoch_s"),
        "reference_phase": run.get("reference_phase"),
        "stalls": stalls,
        "warnings": _json_value(run.get("warnings"), f"run {run_id} warnings") or [],
    }
    # columns added to version 1 later: absent from older exports
    if _num(run.get("unattributed_s")) is not None:
        breakdown["unattributed_s"] = _num(run.get("unattributed_s"))
    if isinstance(run.get("network_reference"), str) and run["network_reference"]:
        breakdown["network_reference"] = run["network_reference"]
    communication = _json_value(run.get("communication"), f"run {run_id} communication")
    if communication:
        breakdown["communication"] = communication
    model = {key: run.get(column) for key, column in (("name", "model"), ("kind", "model_kind"),
             ("param_count", "param_count"), ("grad_tensor_count", "grad_tensor_count"),
             ("layer_count", "layer_count"), ("grad_bytes", "grad_bytes"))}  # fmt: skip
    return {
        "schema_version": 1,
        "kind": "stash-profile",
        "run_id": run_id,
        "status": run.get("status"),
        "error": run.get("error"),
        "started_at": _iso(run.get("started_at")),
        "finished_at": _iso(run.get("finished_at")),
        "stash_version": run.get("stash_version"),
        "spec": spec,
        "model": model,
        "fingerprint": _json_value(run.get("fingerprint"), f"run {run_id} fingerprint"),
        "phases": phases,
        "breakdown": breakdown if (stalls or breakdown["iteration_s"] is not None) else None,
    }


def _dry_run(checks: list[UploadCheck]) -> pd.DataFrame:
    """Ingest the runs into a scratch database (each on its own) and return their stall_breakdown rows."""
    frames = []
    with tempfile.TemporaryDirectory(prefix="stash-upload-") as folder:
        scratch = Path(folder) / "scratch.duckdb"
        seen: set[str] = set()
        for check in checks:
            if not check.ok:
                continue
            if check.kind == "export:stall_breakdown" and check.frame is not None:
                frames.append(check.frame.assign(source=check.name))
                continue
            for doc in check.docs:
                if doc["run_id"] in seen:
                    continue
                try:
                    store.ingest_result(scratch, doc)
                except UsageError as exc:
                    check.ok = False
                    check.reason = str(exc)
                    break
                seen.add(doc["run_id"])
        if seen:
            with store.connect(scratch, read_only=True) as con:
                stored = store.relation_frame(
                    con.sql("SELECT * FROM stall_breakdown ORDER BY started_at DESC")
                )
            names = {doc["run_id"]: check.name for check in checks if check.ok for doc in check.docs}
            frames.append(stored.assign(source=stored["run_id"].map(names)))
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return add_run_labels(pd.DataFrame(columns=["run_id", "source"]))
    preview = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if "started_at" in preview.columns:
        preview["started_at"] = pd.to_datetime(preview["started_at"], utc=True, errors="coerce")
    return add_run_labels(preview.drop_duplicates(subset=["run_id"]))


def _group(frame: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    if frame is None or frame.empty or "run_id" not in frame.columns:
        return {}
    return {str(key): group for key, group in frame.groupby("run_id", sort=False)}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{key: _plain(value) for key, value in row.items()} for row in frame.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_value(value: Any, what: str) -> Any:
    if value is None or isinstance(value, (dict, list)):
        return value
    if isinstance(value, float) and value != value:  # an empty CSV cell
        return None
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError):
        raise UsageError(f"{what} is not valid JSON") from None


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    try:
        moment = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise UsageError(f"{value!r} is not a time") from None
    if moment.tzinfo is None:
        moment = moment.tz_localize("UTC")
    return moment.isoformat()


# ---------------------------------------------------------------------------------------------------------
# Run form


@dataclass
class RunForm:
    """What the Run page's form asks for; `profile_args` turns it into `stash profile` arguments."""

    model: str
    batch_size: int
    workers: int = 1
    nodes: int = 1
    stalls: list[str] = field(default_factory=lambda: ["compute", "interconnect", "cpu", "disk"])
    data_source: str = "synthetic"  # synthetic (generated JPEG files) | dataset (a folder) | none
    synthetic_images: int = 512
    dataset: str = ""
    input_shape: str = ""
    num_classes: int | None = None
    iterations: str = "auto"
    max_phase_s: float = 60.0
    instance: str = ""
    where: str = "local"  # local | hosts | cluster
    hosts: str = ""
    ssh_user: str = ""
    ssh_key: str = ""
    device: str = "auto"


def profile_args(
    form: RunForm, base_dir: Path | None = None, supported_flags: set[str] | None = None
) -> list[str]:
    """`stash profile` arguments for a form; UsageError naming the first field that is wrong.

    Relative model files and data set folders are made absolute against `base_dir` (the dashboard's working
    folder), because the run starts in the database's folder.
    """
    base = Path(base_dir or Path.cwd())
    model = (form.model or "").strip()
    if not model:
        raise UsageError("Model: choose a zoo model or give FILE.py:FACTORY")
    if ":" in model and model.split(":", 1)[0].endswith(".py"):
        file_part, factory = model.split(":", 1)
        path = Path(file_part).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise UsageError(f"Model: no file {path}")
        if not factory.isidentifier():
            raise UsageError(f"Model: {factory!r} is not a Python function name")
        model = f"{path}:{factory}"
    if not isinstance(form.batch_size, int) or form.batch_size < 1:
        raise UsageError("Batch size must be a whole number of at least 1")
    if not isinstance(form.workers, int) or form.workers < 1:
        raise UsageError("Workers must be a whole number of at least 1")
    if not isinstance(form.nodes, int) or form.nodes < 1:
        raise UsageError("Nodes must be a whole number of at least 1")
    if not form.stalls:
        raise UsageError("Stalls: pick at least one stall to measure")
    unknown = [s for s in form.stalls if s not in STALL_NAMES]
    if unknown:
        raise UsageError(f"Stalls: unknown {', '.join(unknown)}")
    args = ["--model", model, "--batch-size", str(form.batch_size), "--workers", str(form.workers),
            "--stalls", ",".join(form.stalls)]  # fmt: skip
    if form.nodes > 1:
        args += ["--nodes", str(form.nodes)]
    if form.data_source == "synthetic":
        if not isinstance(form.synthetic_images, int) or form.synthetic_images < 1:
            raise UsageError("Synthetic images must be a whole number of at least 1")
        args += ["--synthetic-images", str(form.synthetic_images)]
    elif form.data_source == "dataset":
        folder = Path(form.dataset.strip()).expanduser() if form.dataset.strip() else None
        if folder is None:
            raise UsageError("Data set: give the folder of the data set (one sub-folder per class)")
        folder = folder if folder.is_absolute() else base / folder
        if not folder.is_dir():
            raise UsageError(f"Data set: no folder {folder}")
        args += ["--dataset", str(folder)]
    elif form.data_source != "none":
        raise UsageError(f"unknown data source {form.data_source!r}")
    elif any(stall in ("cpu", "disk") for stall in form.stalls):
        raise UsageError("CPU and disk stalls need real data: choose synthetic images or a data set")
    shape = form.input_shape.strip()
    if shape:
        if not re.fullmatch(r"\d+(\s*,\s*\d+)*", shape) or any(int(v) < 1 for v in shape.split(",")):
            raise UsageError(
                "Input shape: give C,H,W for images (e.g. 3,64,64) or a sequence length (e.g. 128)"
            )
        args += ["--input-shape", ",".join(v.strip() for v in shape.split(","))]
    if form.num_classes is not None:
        if form.num_classes < 2:
            raise UsageError("Classes must be at least 2")
        args += ["--num-classes", str(form.num_classes)]
    iterations = str(form.iterations).strip()
    if iterations != "auto" and (not iterations.isdigit() or int(iterations) < 2):
        raise UsageError("Iterations: 'auto' or a whole number of at least 2")
    args += ["--iterations", iterations]
    if not form.max_phase_s or form.max_phase_s <= 0:
        raise UsageError("Time limit per phase must be positive")
    args += ["--max-phase-seconds", f"{float(form.max_phase_s):g}"]
    if form.instance.strip():
        if not re.fullmatch(r"[\w.:@+-]+", form.instance.strip()):
            raise UsageError("Instance label: letters, digits and . _ - : @ + only")
        args += ["--instance", form.instance.strip()]
    if form.device != "auto":
        args += ["--device", form.device]
    if form.where == "hosts":
        hosts = [h.strip() for h in re.split(r"[,\s]+", form.hosts) if h.strip()]
        if not hosts:
            raise UsageError("Remote hosts: give at least one host (user@host or host), separated by commas")
        bad = [h for h in hosts if not re.fullmatch(r"([\w.-]+@)?[\w.-]+(:\d+)?", h)]
        if bad:
            raise UsageError(f"Remote hosts: {bad[0]!r} is not a host name (user@host[:port])")
        _require_flag("--hosts", supported_flags, "remote hosts")
        args += ["--hosts", ",".join(hosts)]
        if form.ssh_user.strip():
            if not re.fullmatch(r"[A-Za-z_][\w.-]*", form.ssh_user.strip()):
                raise UsageError(f"SSH user: {form.ssh_user.strip()!r} is not a user name")
            args += ["--ssh-user", form.ssh_user.strip()]
        if form.ssh_key.strip():
            key = Path(form.ssh_key.strip()).expanduser()
            if not key.is_file():
                raise UsageError(f"SSH key: no file {key}")
            args += ["--ssh-key", str(key)]
    elif form.where == "cluster":
        _require_flag("--cluster", supported_flags, "the emulated cluster")
        args += ["--cluster", "emulated"]
    elif form.where != "local":
        raise UsageError(f"unknown place to run {form.where!r}")
    if form.nodes > 1 and form.where == "local":
        raise UsageError("Nodes > 1 needs remote hosts or the emulated cluster")
    return args


def _require_flag(flag: str, supported: set[str] | None, what: str) -> None:
    if supported is not None and flag not in supported:
        raise UsageError(f"this version of stash cannot run on {what} yet (no {flag} option)")


def zoo_models() -> list[str]:
    """Names of the model zoo (imports torch, so callers should cache it)."""
    from stash_core.zoo import list_models

    return list(list_models())


def profile_flags() -> set[str]:
    """The option strings `stash profile` accepts (to offer only what the installed command supports)."""
    from stash_core.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse keeps sub-parsers here; there is no public accessor
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and "profile" in choices:
            return {flag for sub in choices["profile"]._actions for flag in sub.option_strings}
    return set()


# ---------------------------------------------------------------------------------------------------------
# Small helpers


def frame_to_csv(frame: pd.DataFrame) -> bytes:
    """A frame as CSV bytes (for download buttons)."""
    return frame.to_csv(index=False).encode("utf-8")


def frame_to_parquet(frame: pd.DataFrame) -> bytes:
    """A frame as Parquet bytes; object columns holding mixed values are written as text."""
    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=False)
    except (ValueError, TypeError, ImportError, Exception):  # pyarrow refuses mixed-type columns
        buffer = io.BytesIO()
        frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(
            buffer, index=False
        )
    return buffer.getvalue()


def _num(value: Any) -> float | None:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int_or_none(value: Any) -> int | None:
    number = _num(value)
    return None if number is None else int(number)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def whatif(db_path: Path, run_id: str) -> dict:
    """What would hide a run's CPU, disk and network stalls (see stash_core.decide.whatif)."""
    from stash_core.decide.whatif import whatif as answer

    return answer(db_path, run_id)
