"""Compare: the same job on different instances, side by side, with costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stash_core import store
from stash_core.results.file import STALL_NAMES
from stash_core.views.common import NO_INSTANCE
from stash_core.views.stall_frames import stall_long_frame

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
        f"avg({stall}_share) AS {stall}_share, avg({stall}_s) AS {stall}_s, "
        f"avg({stall}_ci95_s) AS {stall}_ci95_s, mode({stall}_status) AS {stall}_status"
        for stall in STALL_NAMES
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
    """Stall shares per configuration, long format, for a stacked bar that ends at 100%.

    The parts are the named stalls and the signed remainder ("Not separated", stall "unattributed": what the
    mean stalls leave of the mean iteration time), laid end to end (`bar_start`, `bar_end`, in shares);
    `resolved` is False for a stall whose mean interval is wider than its mean value.
    """
    columns = ["configuration", "stall", "stall_label", "stall_order", "status", "share", "seconds", "ci95",
               "bar_start", "bar_end", "resolved", "note"]  # fmt: skip
    if frame.empty:
        return pd.DataFrame(columns=columns)
    labelled = frame.assign(run_id=frame["configuration"], run_label=frame["configuration"])
    long_frame = stall_long_frame(labelled, "share")
    iteration_s = dict(zip(frame["configuration"], frame["iteration_s"], strict=True))
    long_frame["configuration"] = long_frame["run_label"]
    long_frame["share"] = long_frame["value"]
    long_frame["seconds"] = [
        share * float(iteration_s[name])
        for share, name in zip(long_frame["value"], long_frame["configuration"], strict=True)
    ]
    return long_frame[columns].reset_index(drop=True)
