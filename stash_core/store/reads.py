"""What decide/, spot/, sched/ and the Recommend page read from the store: one named function per data need,
each one query returning a DataFrame.

The fits, predictions and recommendations work on these frames and hold no SQL of their own. Every function
opens the database read-only through stash_core.store, runs its query and closes it again. (The instance
catalog's SQL is in store/instances.py; a run, and the runs as listed, are store/runs.py's.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.analysis.coherence import LINKS_CHANGED
from stash_core.store import connect, query_readonly
from stash_core.store.schema import VALID_FIGURE
from stash_core.zoo_names import canonical_model, factory_of, model_file_sha256

# The columns of the probes table that the alpha-beta fits read, in this order.
PROBE_COLUMNS = (
    "probe_id", "run_id", "started_at", "hostname", "instance", "backend", "device", "world_size", "nodes",
    "kind", "size_bytes", "time_s", "time_min_s", "algbw_gbps", "busbw_gbps",
)  # fmt: skip

# Only figures the breakdown view counts (store/schema.VALID_FIGURE): an inf, NaN or negative "measured"
# stall of a hand-edited or damaged row would make every fit over it NaN.
LINKS_CHANGED_SQL = LINKS_CHANGED.replace("'", "''")
_COMMUNICATION_STALLS_SQL = f"""
SELECT r.run_id, CAST(r.started_at AS TIMESTAMP) AS started_at, s.stall, s.seconds AS stall_s, s.ci95_s,
       s.status AS stall_status, r.model, r.batch_size, r.device, r.backend,
       -- an interconnect stall is R1's: the workers it ran on one machine (a 2 x 1 profile's R1 ran 2 there)
       CASE WHEN s.stall = 'interconnect' THEN coalesce(
           (SELECT p.workers FROM phases AS p WHERE p.run_id = r.run_id AND p.phase = 'R1' AND p.nodes = 1),
           r.workers_per_node) ELSE r.workers_per_node END AS workers_per_node, r.nodes,
       r.instance AS instance_label, r.hostname,
       r.grad_bytes, r.grad_tensor_count, r.layer_count, CAST(r.spec AS VARCHAR) AS spec_json,
       -- what keeps a run's network stall out of every fit: links changed under it (an impossible
       -- breakdown, the other, is decided as every list of runs decides it: decide/fit/observations.py)
       CASE WHEN s.stall = 'network' AND CAST(r.warnings AS VARCHAR) LIKE '%"{LINKS_CHANGED_SQL}%'
                 THEN 'its network changed while it ran (its figures mix both)' END AS left_out
FROM runs AS r JOIN stalls AS s ON s.run_id = r.run_id
WHERE r.status = 'completed' AND s.stall IN ('interconnect', 'network')
  AND s.status IN ('measured', 'clamped_zero') AND {VALID_FIGURE}
  AND r.grad_bytes IS NOT NULL AND r.grad_tensor_count IS NOT NULL AND r.layer_count IS NOT NULL
ORDER BY r.started_at, r.run_id, s.stall
"""

_PROBES_PRESENT_SQL = (
    "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = 'probes'"
)

_MEASURED_PROFILES_SQL = """
SELECT run_id, CAST(started_at AS TIMESTAMP) AS started_at, instance, workers_per_node, nodes, device,
       iteration_s, iteration_ci95_s, compute_s, interconnect_s, network_s, cpu_s, disk_s,
       compute_status, interconnect_status, network_status, cpu_status, disk_status,
       (SELECT CAST(json_extract(r.spec, '$.input_shape') AS VARCHAR) FROM runs AS r
        WHERE r.run_id = stall_breakdown.run_id) AS input_shape,
       (SELECT json_extract_string(r.fingerprint, '$.gpus[0].name') FROM runs AS r
        WHERE r.run_id = stall_breakdown.run_id) AS gpu_name,
       (SELECT CAST(json_extract(r.spec, '$.hosts') AS VARCHAR) FROM runs AS r
        WHERE r.run_id = stall_breakdown.run_id) AS hosts,
       (SELECT json_extract_string(r.spec, '$.model_sha256') FROM runs AS r
        WHERE r.run_id = stall_breakdown.run_id) AS model_sha256
FROM stall_breakdown
WHERE status = 'completed' AND batch_size = ? AND isfinite(iteration_s)
  AND (model = ? OR (ends_with(model, ?) AND run_id IN (
       SELECT run_id FROM runs WHERE json_extract_string(spec, '$.model_sha256') = ?)))
ORDER BY started_at DESC, run_id DESC
"""

_GPU_COMPUTE_SQL = """
SELECT b.run_id, b.model, b.model_kind, b.batch_size, b.instance, b.workers_per_node, b.nodes, b.compute_s,
       b.interconnect_s, b.network_s, b.iteration_s, b.iteration_ci95_s,
       CAST(json_extract(r.spec, '$.input_shape') AS VARCHAR) AS input_shape,
       json_extract_string(r.fingerprint, '$.gpus[0].name') AS gpu_name, b.device,
       CAST(json_extract(r.spec, '$.hosts') AS VARCHAR) AS hosts,
       json_extract_string(r.spec, '$.model_sha256') AS model_sha256
FROM stall_breakdown AS b JOIN runs AS r ON r.run_id = b.run_id
WHERE b.status = 'completed' AND b.compute_s > 0 AND b.device LIKE 'cuda%'
ORDER BY b.started_at DESC, b.run_id DESC
"""

_MODEL_COUNTS_SQL = "SELECT grad_bytes, grad_tensor_count, layer_count FROM models WHERE name = ?"


def communication_stalls(db_path: Path | str) -> pd.DataFrame:
    """Measured (or clamped-zero) interconnect and network stalls of completed runs with model counts.

    One row per (run, stall), oldest first: run_id, started_at, stall, stall_s, ci95_s, stall_status, model,
    batch_size, device, backend, workers_per_node, nodes, instance_label, hostname, grad_bytes,
    grad_tensor_count, layer_count, spec_json (the run's spec as JSON text) and left_out (why no fit may use
    the row, else None).
    """
    with connect(db_path, read_only=True) as con:
        return con.execute(_COMMUNICATION_STALLS_SQL).df()


def bandwidth_probes(db_path: Path | str) -> pd.DataFrame:
    """The probes table in PROBE_COLUMNS (started_at left empty), or no rows when the database has none.

    A database written before the probes table existed (or without some of its columns) reads as empty
    columns rather than an error.
    """
    with connect(db_path, read_only=True) as con:
        present = con.execute(_PROBES_PRESENT_SQL).fetchall()[0][0]
        if not present:
            return pd.DataFrame(columns=list(PROBE_COLUMNS))
        columns = {row[0] for row in con.execute("DESCRIBE probes").fetchall()}
        wanted = [column for column in PROBE_COLUMNS if column in columns and column != "started_at"]
        frame = con.execute(f"SELECT {', '.join(wanted)} FROM probes").df()
    for column in PROBE_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    return frame


def measured_profiles(db_path: Path | str, model: str, batch_size: int) -> pd.DataFrame:
    """Completed profiles of `model` at per-worker `batch_size` with their stall breakdown, input shape (the
    spec's, as JSON text, or None) and, for a user's model file, the sha256 of the file that ran (None
    before profiles kept it), newest first."""
    return query_readonly(db_path, _MEASURED_PROFILES_SQL, [batch_size, *_model_match(model)])


def stall_breakdown_rows(db_path: Path | str, run_ids: list[str], columns: tuple[str, ...]) -> pd.DataFrame:
    """The stall_breakdown view's `columns` (and run_id) of the runs named; a column the view of an older
    database lacks is left out."""
    with connect(db_path, read_only=True) as con:
        present = {row[0] for row in con.execute("DESCRIBE stall_breakdown").fetchall()}
        chosen = ", ".join(f'"{column}"' for column in ("run_id", *columns) if column in present)
        marks = ", ".join("?" for _ in run_ids)
        return con.execute(f"SELECT {chosen} FROM stall_breakdown WHERE run_id IN ({marks})", run_ids).df()


def _model_match(model: str) -> list[Any]:
    """The parameters of `model = ? OR (ends_with(model, ?) AND model_sha256 = ?)`: a model by its stored
    name, or a user's model file by its factory and contents, whichever path it was profiled by."""
    return [canonical_model(model), f":{factory_of(model)}", model_file_sha256(model)]


def gpu_compute_profiles(db_path: Path | str) -> pd.DataFrame:
    """Completed GPU profiles with a compute time, any model, newest first: the measured steps that anchor the
    predictions for instances never profiled (input_shape is the spec's, as JSON text, or None; gpu_name the
    first GPU its machine reported, for a profile without a catalog instance label; iteration_s and its
    iteration_ci95_s for a configuration measured whole)."""
    return query_readonly(db_path, _GPU_COMPUTE_SQL)


def stored_model_counts(db_path: Path | str, model: str) -> dict[str, Any] | None:
    """grad_bytes, grad_tensor_count and layer_count of a model as stored; None unless all three are."""
    found = query_readonly(db_path, _MODEL_COUNTS_SQL, [canonical_model(model)])
    if len(found) and not found.iloc[0].isna().any():
        return {key: float(value) for key, value in found.iloc[0].to_dict().items()}
    return None


def latest_compute_s(
    db_path: Path | str, model: str, instance: str, batch_per_worker: int, workers_per_node: int
) -> float | None:
    """Compute seconds per iteration of the latest completed profile of the model on that instance, with
    `batch_per_worker` samples per worker process (per GPU) and `workers_per_node` workers on one machine; a
    user's model file only from profiles of its contents as they are now (or of before profiles kept them)."""
    if not Path(db_path).exists():
        return None
    sha256 = model_file_sha256(model)
    with connect(db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT s.seconds FROM runs r JOIN stalls s USING (run_id) "
            "WHERE r.status = 'completed' AND r.instance = ? AND r.batch_size = ? "
            "AND (r.model = ? OR (ends_with(r.model, ?) AND r.spec->>'model_sha256' = ?)) "
            "AND r.workers_per_node = ? AND r.nodes = 1 "
            "AND s.stall = 'compute' AND s.seconds > 0 AND isfinite(s.seconds) "
            "AND (? IS NULL OR r.spec->>'model_sha256' IS NULL OR r.spec->>'model_sha256' = ?) "
            "ORDER BY r.started_at DESC LIMIT 1",
            [instance, batch_per_worker, *_model_match(model), workers_per_node, *[sha256] * 2],
        ).fetchall()
    return float(rows[0][0]) if rows else None


def network_shares(db_path: Path | str) -> dict[str, float]:
    """Per model: network stall / (compute + interconnect) of its latest completed multi-node profile."""
    if not Path(db_path).exists():
        return {}
    with connect(db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT model, arg_max(network_s / (compute_s + interconnect_s), started_at) "
            "FROM stall_breakdown WHERE status = 'completed' AND nodes > 1 AND network_s IS NOT NULL "
            "AND compute_s + interconnect_s > 0 GROUP BY model"
        ).fetchall()
    return {str(model): float(share) for model, share in rows if share is not None}


def profiled_iteration_s(db_path: Path | str) -> dict[str, float]:
    """Per model: compute + interconnect seconds per iteration of its latest completed one-node profile (its
    consolidated iteration, without the network; the scheduler's compute when a trace gives none)."""
    if not Path(db_path).exists():
        return {}
    with connect(db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT model, arg_max(compute_s + coalesce(interconnect_s, 0), started_at) "
            "FROM stall_breakdown WHERE status = 'completed' AND nodes = 1 AND compute_s > 0 GROUP BY model"
        ).fetchall()
    return {str(model): float(seconds) for model, seconds in rows if seconds is not None and seconds > 0}


def completed_configurations(db_path: Path | str) -> pd.DataFrame:
    """run_id, model, batch_size, workers_per_node, nodes, instance of every completed run (cloud_instance:
    the instance type a cloud campaign rented for it, else null); for a
    script's run also the script's sha256 and its arguments (a JSON list), null otherwise; a model file's
    run the sha256 of the file it ran; and what else
    decides what it measured: its device, input shape, classes and stalls (JSON lists as text)."""
    return query_readonly(
        db_path,
        "SELECT DISTINCT run_id, model, batch_size, workers_per_node, nodes, instance, "
        "spec->>'script_sha256' AS script_sha256, CAST(spec->'script_args' AS VARCHAR) AS script_args, "
        "spec->>'model_sha256' AS model_sha256, spec->'cloud'->>'instance_type' AS cloud_instance, "
        "device, CAST(spec->'input_shape' AS VARCHAR) AS input_shape, spec->>'num_classes' AS num_classes, "
        "CAST(spec->'stalls' AS VARCHAR) AS stalls "
        "FROM runs WHERE status = 'completed' AND model IS NOT NULL",
    )


def profiled_models(db_path: Path | str) -> pd.DataFrame:
    """(model, batch_size, input_shape, runs) of completed runs, the most-profiled first (the Recommend page's
    choices); input_shape is the spec's as JSON text ("[3, 32, 32]"), None for the model's default."""
    return query_readonly(
        db_path,
        "SELECT model, batch_size, CAST(spec->'input_shape' AS VARCHAR) AS input_shape, count(*) AS runs "
        "FROM runs WHERE status = 'completed' AND model IS NOT NULL GROUP BY ALL "
        "ORDER BY runs DESC, model, batch_size, input_shape",
    )
