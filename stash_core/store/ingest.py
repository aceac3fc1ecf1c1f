"""Putting result documents into the store: idempotent, one transaction per run, bulk inserts for samples."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from stash_core.errors import UsageError
from stash_core.results.file import SAMPLE_KEYS, SCHEMA_VERSION, json_safe, load_result, upgrade_result
from stash_core.store.connection import connect

_SAMPLE_FLOAT_KEYS = ("iteration_s", "data_s", "forward_s", "backward_s", "optimizer_s")

_TIME_COLUMNS = ("started_at", "finished_at", "ingested_at")
_JSON_COLUMNS = ("spec", "fingerprint", "warnings")

_PHASE_COLUMNS = {
    "run_id": "str",
    "phase": "str",
    "phase_index": "Int32",
    "description": "str",
    "workers": "Int32",
    "nodes": "Int32",
    "data": "str",
    "status": "str",
    "error": "str",
    "warmup_iterations": "Int32",
    "iterations": "Int32",
    "mean_s": "float64",
    "ci95_s": "float64",
    "std_s": "float64",
    "median_s": "float64",
    "p5_s": "float64",
    "p95_s": "float64",
    "data_s": "float64",
    "forward_s": "float64",
    "backward_s": "float64",
    "optimizer_s": "float64",
    "rank_skew_s": "float64",
    "resident_fraction_start": "float64",
    "wall_s": "float64",
    "telemetry_interval_s": "float64",
}
_PROBE_COLUMNS = {
    "probe_id": "str",
    "run_id": "str",
    "phase": "str",
    "started_at": "str",
    "hostname": "str",
    "instance": "str",
    "backend": "str",
    "device": "str",
    "world_size": "Int32",
    "nodes": "Int32",
    "workers_per_node": "Int32",
    "kind": "str",
    "scope": "str",
    "size_bytes": "Int64",
    "repetitions": "Int32",
    "time_s": "float64",
    "time_min_s": "float64",
    "algbw_gbps": "float64",
    "busbw_gbps": "float64",
    "link_gbps": "float64",
}
PROBE_KIND = "stash-probe"
_STALL_COLUMNS = {
    "run_id": "str",
    "stall": "str",
    "seconds": "float64",
    "ci95_s": "float64",
    "share": "float64",
    "epoch_s": "float64",
    "status": "str",
    "note": "str",
}


@dataclass
class _PreparedRun:
    """Everything one run adds to the store, built before the database is opened (keeps the lock short)."""

    run_id: str
    run_row: dict[str, Any]
    model_row: dict[str, Any] | None
    phases: pd.DataFrame
    stalls: pd.DataFrame
    iterations: list[tuple[str, pa.Table]]  # (phase, table) per phase with samples
    telemetry: list[tuple[str, pa.Table]]
    probes: pd.DataFrame | None = None


def ingest_result(db_path: Path | str, doc: dict[str, Any], source_file: str | None = None) -> bool:
    """Store one result document; True when inserted, False when its run_id was already stored.

    The document is migrated and validated first (UsageError when it is not a valid result); the insert is one
    transaction, so a failure leaves nothing of the run behind.
    """
    prepared = _prepare(upgrade_result(doc), source_file)
    with connect(db_path) as con:
        return _insert(con, prepared)


def ingest_files(db_path: Path | str, paths: list[Path] | list[str]) -> list[tuple[Path, str, bool]]:
    """Ingest result files; returns (path, run_id, inserted) per file.

    Every file is loaded and validated before anything is written, so one bad file (named in the UsageError)
    leaves the database unchanged. Each run then goes in with its own short transaction and connection, so
    readers get a turn between files; ingesting the same files again inserts nothing.
    """
    loaded = [(Path(path), _load_any(Path(path))) for path in paths]
    prepared = []
    for path, doc in loaded:
        try:
            if doc.get("kind") == PROBE_KIND:
                prepared.append((path, _prepare_probe(doc)))
            else:
                prepared.append((path, _prepare(doc, str(path.resolve()))))
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None
    outcomes = []
    for path, item in prepared:
        with connect(db_path) as con:
            if isinstance(item, _PreparedRun):
                outcomes.append((path, item.run_id, _insert(con, item)))
            else:
                probe_id, frame = item
                outcomes.append((path, probe_id, _insert_probe(con, probe_id, frame)))
    return outcomes


def ingest_probe(db_path: Path | str, doc: dict[str, Any]) -> bool:
    """Store a `stash probe` document (kind "stash-probe"); True when inserted, False when already stored."""
    probe_id, frame = _prepare_probe(doc)
    with connect(db_path) as con:
        return _insert_probe(con, probe_id, frame)


def _load_any(path: Path) -> dict[str, Any]:
    """A result file, or a probe file (kind "stash-probe")."""
    try:
        return load_result(path)
    except UsageError:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == PROBE_KIND:
            return doc
        raise


def _prepare_probe(doc: dict[str, Any]) -> tuple[str, pd.DataFrame]:
    from stash_core.store.probe_rows import probe_rows

    if not isinstance(doc, dict) or doc.get("kind") != PROBE_KIND:
        raise UsageError(f'not a Stash probe (no "kind": "{PROBE_KIND}")')
    version = doc.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(f"probe has schema_version {version!r}; this Stash reads up to {SCHEMA_VERSION}")
    probe_id = doc.get("probe_id")
    if not isinstance(probe_id, str) or not probe_id.strip():
        raise UsageError("probe has an empty or non-text probe_id")
    return probe_id, _probe_frame(probe_rows(doc), f"probe {probe_id}")


def _insert_probe(con: duckdb.DuckDBPyConnection, probe_id: str, frame: pd.DataFrame) -> bool:
    return _insert_once(con, "probes", "probe_id", probe_id, lambda: _insert_probe_frame(con, frame))


def _insert_probe_frame(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    if len(frame) == 0:
        return
    view = "_stash_ingest_probes"
    columns = list(frame.columns)
    select = ", ".join(
        f'CAST("{column}" AS TIMESTAMPTZ)' if column == "started_at" else f'"{column}"' for column in columns
    )
    con.register(view, frame)
    try:
        con.execute(f"INSERT INTO probes ({', '.join(columns)}) SELECT {select} FROM {view}")
    finally:
        con.unregister(view)


def _probe_frame(rows: list[dict[str, Any]], what: str) -> pd.DataFrame:
    """Checked, typed rows of the probes table."""
    clean = []
    for row in rows:
        entry = {}
        for column, dtype in _PROBE_COLUMNS.items():
            value = row.get(column)
            if column == "started_at":
                _check_time(value, what)
                entry[column] = _utc_text(value)
            elif dtype == "str":
                entry[column] = _text(value)
            elif dtype == "float64":
                entry[column] = _float(value, f"{what} {column}")
            else:
                entry[column] = _int(value, f"{what} {column}")
        clean.append(entry)
    return _typed_frame(clean, _PROBE_COLUMNS)


def _check_time(value: Any, what: str) -> None:
    if value is None:
        return
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise UsageError(f"result file: {what} started_at is not an ISO 8601 time ({value!r})") from None


def _insert(con: duckdb.DuckDBPyConnection, run: _PreparedRun) -> bool:
    def write() -> None:
        _insert_run(con, run.run_row)
        if run.model_row is not None:
            _upsert_model(con, run.model_row)
        _insert_frame(con, "phases", run.phases)
        _insert_frame(con, "stalls", run.stalls)
        for phase, frame in run.iterations:
            _insert_frame(con, "iterations", frame, constants={"run_id": run.run_id, "phase": phase})
        for phase, frame in run.telemetry:
            _insert_frame(con, "telemetry", frame, constants={"run_id": run.run_id, "phase": phase})
        if run.probes is not None:
            _insert_probe_frame(con, run.probes)

    return _insert_once(con, "runs", "run_id", run.run_id, write)


def _insert_once(
    con: duckdb.DuckDBPyConnection, table: str, key_column: str, key: str, write: Callable[[], None]
) -> bool:
    """Run `write` in one transaction unless `table` already holds `key`; False when it did (idempotent)."""
    what = {"runs": "run", "probes": "probe"}[table]
    con.execute("BEGIN TRANSACTION")
    try:
        if con.execute(f"SELECT count(*) FROM {table} WHERE {key_column} = ?", [key]).fetchall()[0][0]:
            con.execute("ROLLBACK")
            return False
        write()
        con.execute("COMMIT")
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot store {what} {key}: {message}") from None
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


def _insert_run(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    columns = list(row)  # the keys of the row built in _prepare are the runs columns it fills
    placeholders = []
    for column in columns:
        if column in _TIME_COLUMNS:
            placeholders.append("CAST(? AS TIMESTAMPTZ)")
        elif column in _JSON_COLUMNS:
            placeholders.append("CAST(? AS JSON)")
        else:
            placeholders.append("?")
    con.execute(
        f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join(placeholders)})",
        [row[column] for column in columns],
    )


def _upsert_model(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    # A later run fills in what an earlier (e.g. failed) run did not know, but never blanks a known value.
    columns = ("name", "kind", "param_count", "grad_tensor_count", "layer_count", "grad_bytes")
    updates = ", ".join(f"{column} = coalesce(excluded.{column}, {column})" for column in columns[1:])
    con.execute(
        f"INSERT INTO models ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
        f"ON CONFLICT (name) DO UPDATE SET {updates}",
        [row[column] for column in columns],
    )


def _insert_frame(
    con: duckdb.DuckDBPyConnection,
    table: str,
    frame: pd.DataFrame | pa.Table,
    constants: dict[str, str] | None = None,
) -> None:
    """Bulk insert: DuckDB scans the pandas frame or Arrow table directly; constants go in as parameters."""
    if len(frame) == 0:
        return
    constants = constants or {}
    names = list(frame.column_names if isinstance(frame, pa.Table) else frame.columns)
    columns = [*constants, *names]
    select = ", ".join(["?" for _ in constants] + [f'"{column}"' for column in names])
    view = f"_stash_ingest_{table}"
    con.register(view, frame)
    try:
        sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {view}"
        con.execute(sql, list(constants.values()))
    finally:
        con.unregister(view)


def _prepare(doc: dict[str, Any], source_file: str | None) -> _PreparedRun:
    run_id = doc["run_id"]
    spec = doc["spec"]
    model = doc.get("model") or {}
    fingerprint = doc.get("fingerprint") or {}
    breakdown = doc.get("breakdown") or {}
    model_name = _text(model.get("name")) or _text(spec.get("model"))
    run_row = {
        "run_id": run_id,
        "started_at": _utc_text(doc["started_at"]),
        "finished_at": _utc_text(doc.get("finished_at")),
        "status": doc["status"],
        "error": _text(doc.get("error")),
        "model": model_name,
        "model_kind": _text(model.get("kind")),
        "batch_size": _int(spec.get("batch_size"), "spec.batch_size"),
        "workers_per_node": _int(spec.get("workers_per_node"), "spec.workers_per_node"),
        "nodes": _int(spec.get("nodes"), "spec.nodes"),
        "instance": _text(spec.get("instance")) or _text(fingerprint.get("instance")),
        "device": _text(spec.get("device")),
        "backend": _text(spec.get("backend")),
        "dataset": _text(spec.get("dataset")),
        "dataset_images": _int(spec.get("dataset_images"), "spec.dataset_images"),
        "iterations_per_epoch": _int(breakdown.get("iterations_per_epoch"), "breakdown.iterations_per_epoch"),
        "loader_workers": _int(spec.get("loader_workers"), "spec.loader_workers"),
        "param_count": _int(model.get("param_count"), "model.param_count"),
        "grad_tensor_count": _int(model.get("grad_tensor_count"), "model.grad_tensor_count"),
        "layer_count": _int(model.get("layer_count"), "model.layer_count"),
        "grad_bytes": _int(model.get("grad_bytes"), "model.grad_bytes"),
        "iteration_s": _float(breakdown.get("iteration_s"), "breakdown.iteration_s"),
        "iteration_ci95_s": _float(breakdown.get("iteration_ci95_s"), "breakdown.iteration_ci95_s"),
        "epoch_s": _float(breakdown.get("epoch_s"), "breakdown.epoch_s"),
        "reference_phase": _text(breakdown.get("reference_phase")),
        "hostname": _text(fingerprint.get("hostname")),
        "stash_version": _text(doc.get("stash_version")),
        "schema_version": SCHEMA_VERSION,
        "spec": _json(spec),
        "fingerprint": _json(doc.get("fingerprint")),
        "warnings": _json(breakdown.get("warnings") or []),
        "unattributed_s": _float(breakdown.get("unattributed_s"), "breakdown.unattributed_s"),
        "network_reference": _text(breakdown.get("network_reference")),
        "communication": _json(breakdown["communication"]) if breakdown.get("communication") else None,
        "source_file": source_file,
        "ingested_at": datetime.now(UTC).isoformat(),
    }
    model_row = None
    if model_name:
        model_row = {
            "name": model_name,
            "kind": run_row["model_kind"],
            "param_count": run_row["param_count"],
            "grad_tensor_count": run_row["grad_tensor_count"],
            "layer_count": run_row["layer_count"],
            "grad_bytes": run_row["grad_bytes"],
        }
    phase_rows = []
    iterations = []
    telemetry = []
    for index, phase in enumerate(doc["phases"]):
        phase_rows.append(_phase_row(run_id, index, phase))
        frame = _iteration_frame(phase)
        if frame is not None:
            iterations.append((phase["name"], frame))
        frame = _telemetry_frame(phase)
        if frame is not None:
            telemetry.append((phase["name"], frame))
    stalls = breakdown.get("stalls") or {}
    stall_rows = [_stall_row(run_id, stall, entry) for stall, entry in stalls.items()]
    return _PreparedRun(
        probes=_run_probes(doc, run_row["instance"]),
        run_id=run_id,
        run_row=run_row,
        model_row=model_row,
        phases=_typed_frame(phase_rows, _PHASE_COLUMNS),
        stalls=_typed_frame(stall_rows, _STALL_COLUMNS),
        iterations=iterations,
        telemetry=telemetry,
    )


def _run_probes(doc: dict[str, Any], instance: str | None) -> pd.DataFrame | None:
    """The rows of the result's "probes" section (one probe set per multi-worker run), or None."""
    from stash_core.store.probe_rows import probe_rows

    probes = doc.get("probes")
    if not probes:
        return None
    if not isinstance(probes, list) or not all(isinstance(probe, dict) for probe in probes):
        raise UsageError("result file: probes must be a list of objects")
    rows = []
    for index, probe in enumerate(probes):
        probe = {"probe_id": f"{doc['run_id']}-{index}", **probe, "run_id": doc["run_id"]}
        for key in ("allreduce", "p2p"):
            if not isinstance(probe.get(key) or [], list):
                raise UsageError(f"result file: probes[{index}].{key} must be a list")
        rows += probe_rows(probe, instance=probe.get("instance") or instance)
    return _probe_frame(rows, "probes")


def _phase_row(run_id: str, index: int, phase: dict[str, Any]) -> dict[str, Any]:
    name = phase["name"]
    stats = phase.get("iteration_s") or {}
    parts = phase.get("parts_mean_s") or {}
    row: dict[str, Any] = {
        "run_id": run_id,
        "phase": name,
        "phase_index": index,
        "description": _text(phase.get("description")),
        "workers": _int(phase.get("workers"), f"phase {name} workers"),
        "nodes": _int(phase.get("nodes"), f"phase {name} nodes"),
        "data": _text(phase.get("data")),
        "status": _text(phase.get("status")),
        "error": _text(phase.get("error")),
        "warmup_iterations": _int(phase.get("warmup_iterations"), f"phase {name} warmup_iterations"),
        "iterations": _int(phase.get("iterations"), f"phase {name} iterations"),
        "rank_skew_s": _float(phase.get("rank_skew_s"), f"phase {name} rank_skew_s"),
        "resident_fraction_start": _float(
            phase.get("resident_fraction_start"), f"phase {name} resident_fraction_start"
        ),
        "wall_s": _float(phase.get("wall_s"), f"phase {name} wall_s"),
        "telemetry_interval_s": _float(
            (phase.get("telemetry") or {}).get("interval_s"), f"phase {name} telemetry.interval_s"
        ),
    }
    for key in ("mean", "ci95", "std", "median", "p5", "p95"):
        row[f"{key}_s"] = _float(stats.get(key), f"phase {name} iteration_s.{key}")
    for key in ("data_s", "forward_s", "backward_s", "optimizer_s"):
        row[key] = _float(parts.get(key), f"phase {name} parts_mean_s.{key}")
    return row


def _stall_row(run_id: str, stall: str, entry: dict[str, Any]) -> dict[str, Any]:
    seconds = _float(entry.get("seconds"), f"stall {stall} seconds")
    status = _text(entry.get("status")) or ("measured" if seconds is not None else "not_measured")
    return {
        "run_id": run_id,
        "stall": stall,
        "seconds": seconds,
        "ci95_s": _float(entry.get("ci95_s"), f"stall {stall} ci95_s"),
        "share": _float(entry.get("share"), f"stall {stall} share"),
        "epoch_s": _float(entry.get("epoch_s"), f"stall {stall} epoch_s"),
        "status": status,
        "note": _text(entry.get("note")),
    }


# Sample and telemetry tables go in as Arrow tables: DuckDB scans them faster than pandas frames, and NaN
# (a None in the document) is marked as null explicitly.


def _iteration_frame(phase: dict[str, Any]) -> pa.Table | None:
    samples = phase.get("samples") or {}
    present = {key: values for key, values in samples.items() if key in SAMPLE_KEYS and values}
    if not present:
        return None
    count = len(next(iter(present.values())))  # validate_result checked that the lists agree in length
    name = phase["name"]
    columns: dict[str, pa.Array] = {"iteration": pa.array(np.arange(count, dtype=np.int32))}
    for key in _SAMPLE_FLOAT_KEYS:
        columns[key] = _nullable(_float_array(present.get(key), count, f"phase {name} samples.{key}"))
    columns["slowest_rank"] = _rank_array(present.get("slowest_rank"), count, name)
    return pa.table(columns)


def _rank_array(ranks: list[Any] | None, count: int, phase: str) -> pa.Array:
    if not ranks:
        return pa.nulls(count, type=pa.int32())
    try:
        values = np.asarray(ranks, dtype=np.float64)  # None becomes NaN (null)
    except (TypeError, ValueError):
        values = None
    known = None if values is None else values[~np.isnan(values)]
    if known is None or np.any(known != np.floor(known)) or np.any(known < 0) or np.any(known > 2**31 - 1):
        raise UsageError(f"result file: phase {phase} samples.slowest_rank holds non-integers")
    return _nullable(values).cast(pa.int32())


def _nullable(values: np.ndarray) -> pa.Array:
    return pa.array(values, from_pandas=True)  # from_pandas: NaN becomes null


def _telemetry_frame(phase: dict[str, Any]) -> pa.Table | None:
    telemetry = phase.get("telemetry") or {}
    times = telemetry.get("t_s") or []
    metrics = telemetry.get("metrics") or {}
    if not times or not metrics:
        return None
    name = phase["name"]
    times_s = _float_array(times, len(times), f"phase {name} telemetry.t_s")
    values = [
        _float_array(series, len(times), f"phase {name} telemetry {metric}")
        for metric, series in metrics.items()
    ]
    metric_index = np.repeat(np.arange(len(metrics), dtype=np.int32), len(times))
    return pa.table(
        {
            "t_s": _nullable(np.tile(times_s, len(metrics))),
            "metric": pa.DictionaryArray.from_arrays(pa.array(metric_index), pa.array(list(metrics))),
            "value": _nullable(np.concatenate(values)),
        }
    )


def _float_array(values: list[Any] | None, count: int, what: str) -> np.ndarray:
    if not values:
        return np.full(count, np.nan)
    try:
        return np.asarray(values, dtype=np.float64)  # None becomes NaN, stored as NULL
    except (TypeError, ValueError):
        raise UsageError(f"result file: {what} holds non-numeric values") from None


def _typed_frame(rows: list[dict[str, Any]], dtypes: dict[str, str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(dtypes))
    if not rows:
        return frame
    return frame.astype({column: dtype for column, dtype in dtypes.items() if dtype != "str"})


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(json_safe(value))


def _int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"result file: {what} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, float) and value != value:  # NaN stands for "unknown"
        return None
    raise UsageError(f"result file: {what} must be an integer, got {value!r}")


def _float(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"result file: {what} must be a number, got {value!r}")
    number = float(value)
    return number if np.isfinite(number) else None


def _utc_text(value: str | None) -> str | None:
    """ISO time in UTC; a time without offset is taken as UTC. (validate_result checked it parses.)"""
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(json_safe(value), allow_nan=False)
