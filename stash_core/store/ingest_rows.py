"""A result or probe document as the rows it adds to the store, built and checked before the database is
opened (keeps the writer's lock short; a bad value is a UsageError before anything is written)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from stash_core.analysis.stalls import remainder_of, stall_resolved
from stash_core.errors import UsageError
from stash_core.results.file import SCHEMA_VERSION, ResultDocument, check_probe
from stash_core.store.ingest_values import (
    INT32_MAX,
    INT64_MAX,
    check_time,
    integer,
    iteration_table,
    json_text,
    number,
    telemetry_table,
    text,
    typed_frame,
    utc_text,
)
from stash_core.store.probe_rows import probe_rows
from stash_core.terminal import printable
from stash_core.units import UNRESOLVED_NOTE
from stash_core.zoo_names import canonical_model

_PHASE_COLUMNS = {
    "run_id": "str", "phase": "str", "phase_index": "Int32", "description": "str", "workers": "Int32",
    "nodes": "Int32", "data": "str", "status": "str", "error": "str", "warmup_iterations": "Int32",
    "iterations": "Int32", "mean_s": "float64", "ci95_s": "float64", "std_s": "float64",
    "median_s": "float64", "p5_s": "float64", "p95_s": "float64", "data_s": "float64", "forward_s": "float64",
    "backward_s": "float64", "optimizer_s": "float64", "rank_skew_s": "float64",
    "resident_fraction_start": "float64", "wall_s": "float64", "telemetry_interval_s": "float64",
}  # fmt: skip
_PROBE_COLUMNS = {
    "probe_id": "str", "run_id": "str", "phase": "str", "started_at": "str", "hostname": "str",
    "instance": "str", "backend": "str", "device": "str", "world_size": "Int32", "nodes": "Int32",
    "workers_per_node": "Int32", "kind": "str", "scope": "str", "size_bytes": "Int64", "repetitions": "Int32",
    "time_s": "float64", "time_min_s": "float64", "algbw_gbps": "float64", "busbw_gbps": "float64",
    "link_gbps": "float64",
}  # fmt: skip
_STALL_COLUMNS = {
    "run_id": "str", "stall": "str", "seconds": "float64", "ci95_s": "float64", "share": "float64",
    "epoch_s": "float64", "status": "str", "note": "str", "raw_s": "float64",
}  # fmt: skip
_MODEL_COLUMNS = ("name", "kind", "param_count", "grad_tensor_count", "layer_count", "grad_bytes")
_BIGINT = {"param_count": INT64_MAX, "grad_bytes": INT64_MAX}  # the other counts are INTEGER columns


@dataclass
class PreparedRun:
    """Everything one run adds to the store."""

    run_id: str
    run_row: dict[str, Any]
    model_row: dict[str, Any] | None
    phases: pd.DataFrame
    stalls: pd.DataFrame
    iterations: list[tuple[str, pa.Table]]  # (phase, table) per phase with samples
    telemetry: list[tuple[str, pa.Table]]
    probes: pd.DataFrame | None = None


def prepare_run(doc: ResultDocument, source_file: str | None) -> PreparedRun:
    """The rows of a migrated, validated result document (see stash_core.results.upgrade_result)."""
    run_id = doc["run_id"]
    breakdown = doc.get("breakdown") or {}
    iteration_s = number(breakdown.get("iteration_s"), "breakdown.iteration_s")
    # the stalls first: a bad stall is named as itself, not as the remainder their sum overflows
    stall_rows = [
        _stall_row(run_id, stall, entry, iteration_s)
        for stall, entry in (breakdown.get("stalls") or {}).items()
    ]
    run_row = _run_row(doc, source_file)
    model_row = None
    if run_row["model"]:
        model_row = {"name": run_row["model"], "kind": run_row["model_kind"]}
        model_row.update({column: run_row[column] for column in _MODEL_COLUMNS[2:]})
    phase_rows, iterations, telemetry = [], [], []
    for index, phase in enumerate(doc["phases"]):
        phase_rows.append(_phase_row(run_id, index, phase))
        samples = iteration_table(phase)
        if samples is not None:
            iterations.append((phase["name"], samples))
        series = telemetry_table(phase)
        if series is not None:
            telemetry.append((phase["name"], series))
    return PreparedRun(
        run_id=run_id,
        run_row=run_row,
        model_row=model_row,
        phases=typed_frame(phase_rows, _PHASE_COLUMNS),
        stalls=typed_frame(stall_rows, _STALL_COLUMNS),
        iterations=iterations,
        telemetry=telemetry,
        probes=_run_probes(doc, run_row["instance"]),
    )


def _run_row(doc: ResultDocument, source_file: str | None) -> dict[str, Any]:
    """The runs row; its keys are the runs columns it fills."""
    spec = doc["spec"]
    model = doc.get("model") or {}
    fingerprint = doc.get("fingerprint") or {}
    breakdown = doc.get("breakdown") or {}
    iteration_s = number(breakdown.get("iteration_s"), "breakdown.iteration_s")
    epoch_s = number(breakdown.get("epoch_s"), "breakdown.epoch_s")
    return {
        "run_id": doc["run_id"],
        "started_at": utc_text(doc["started_at"]),
        "finished_at": utc_text(doc.get("finished_at")),
        "status": doc["status"],
        "error": text(doc.get("error")),
        "model": canonical_model(text(model.get("name")) or text(spec.get("model"))),  # ./m.py is m.py
        "model_kind": text(model.get("kind")),
        "batch_size": integer(spec.get("batch_size"), "spec.batch_size"),
        "workers_per_node": integer(spec.get("workers_per_node"), "spec.workers_per_node"),
        "nodes": integer(spec.get("nodes"), "spec.nodes"),
        "instance": text(spec.get("instance")) or text(fingerprint.get("instance")),
        "device": text(spec.get("device")),
        "backend": text(spec.get("backend")),
        "dataset": text(spec.get("dataset")),
        "dataset_images": integer(spec.get("dataset_images"), "spec.dataset_images", INT64_MAX),
        "iterations_per_epoch": integer(
            breakdown.get("iterations_per_epoch"), "breakdown.iterations_per_epoch", INT64_MAX
        ),
        "loader_workers": _loader_workers(doc),
        **{
            column: integer(model.get(column), f"model.{column}", _BIGINT.get(column, INT32_MAX))
            for column in _MODEL_COLUMNS[2:]
        },
        "iteration_s": iteration_s,
        "iteration_ci95_s": number(breakdown.get("iteration_ci95_s"), "breakdown.iteration_ci95_s"),
        # an epoch of iterations of unknown time is unknown too (a file's NaN iteration time)
        "epoch_s": None if iteration_s is None else epoch_s,
        "reference_phase": text(breakdown.get("reference_phase")),
        "hostname": text(_rank0_hostname(doc, fingerprint)),
        "stash_version": text(doc.get("stash_version")),
        "schema_version": SCHEMA_VERSION,
        "spec": json_text(spec),
        "fingerprint": json_text(doc.get("fingerprint")),
        "warnings": json_text(breakdown.get("warnings") or []),
        **_remainder_columns(breakdown),
        "network_reference": text(breakdown.get("network_reference")),
        "communication": json_text(breakdown["communication"]) if breakdown.get("communication") else None,
        "hosts": json_text(doc["hosts"]) if isinstance(doc.get("hosts"), list) and doc["hosts"] else None,
        "source_file": source_file,
        "ingested_at": datetime.now(UTC).isoformat(),
    }


def _loader_workers(doc: ResultDocument) -> int | None:
    """spec.loader_workers; for a script's result, only where its runs recorded their own DataLoader's:
    results made before they did hold the --loader-workers default, which a script never sees."""
    phases = [phase for phase in doc.get("phases") or [] if isinstance(phase, dict)]
    found = [phase["script"] for phase in phases if isinstance(phase.get("script"), dict)]
    if found and not any("loader_workers" in info for info in found):
        return None
    return integer(doc["spec"].get("loader_workers"), "spec.loader_workers")


def _remainder_columns(breakdown: dict[str, Any]) -> dict[str, float | None]:
    """unattributed_s and unattributed_ci95_s: the breakdown's signed remainder, recomputed from its stalls
    (analysis.stalls.remainder_of), so that a file written before the remainder existed, or one whose
    figures no longer add up, is stored with the remainder that closes the breakdown. NULL without an
    iteration time."""
    remainder = remainder_of(breakdown) if breakdown else None
    if remainder is None:
        return {"unattributed_s": None, "unattributed_ci95_s": None}
    return {
        "unattributed_s": number(remainder["seconds"], "breakdown.unattributed_s"),
        "unattributed_ci95_s": number(remainder["ci95_s"], "breakdown.unattributed_ci95_s"),
    }


def _rank0_hostname(doc: ResultDocument, fingerprint: dict[str, Any]) -> Any:
    """The machine that ran rank 0: the first host of a run on remote hosts or the emulated cluster (its
    fingerprint is of the launching machine), else the fingerprint's; a host's name as text, escapes shown."""
    hosts = doc.get("hosts")
    first = hosts[0] if isinstance(hosts, list) and hosts and isinstance(hosts[0], dict) else {}
    reported = first.get("hostname")
    return printable(reported) if isinstance(reported, str) and reported else fingerprint.get("hostname")


def _phase_row(run_id: str, index: int, phase: dict[str, Any]) -> dict[str, Any]:
    name = phase["name"]
    stats = phase.get("iteration_s") or {}
    parts = phase.get("parts_mean_s") or {}
    row: dict[str, Any] = {
        "run_id": run_id,
        "phase": name,
        "phase_index": index,
        "description": text(phase.get("description")),
        "data": text(phase.get("data")),
        "status": text(phase.get("status")),
        "error": text(phase.get("error")),
    }
    for key in ("workers", "nodes", "warmup_iterations", "iterations"):
        row[key] = integer(phase.get(key), f"phase {name} {key}")
    for key in ("rank_skew_s", "resident_fraction_start", "wall_s"):
        row[key] = number(phase.get(key), f"phase {name} {key}")
    interval_s = (phase.get("telemetry") or {}).get("interval_s")
    row["telemetry_interval_s"] = number(interval_s, f"phase {name} telemetry.interval_s")
    for key in ("mean", "ci95", "std", "median", "p5", "p95"):
        row[f"{key}_s"] = number(stats.get(key), f"phase {name} iteration_s.{key}")
    for key in ("data_s", "forward_s", "backward_s", "optimizer_s"):
        row[key] = number(parts.get(key), f"phase {name} parts_mean_s.{key}")
    return row


def _stall_row(run_id: str, stall: str, entry: dict[str, Any], iteration_s: float | None) -> dict[str, Any]:
    """A stall's row; its share is its seconds over the run's iteration time (None where either is not
    known), so that the stored shares and seconds never disagree."""
    seconds = number(entry.get("seconds"), f"stall {stall} seconds")
    status = text(entry.get("status")) or ("measured" if seconds is not None else "not_measured")
    number(entry.get("share"), f"stall {stall} share")  # checked as every number is, then recomputed
    share = seconds / iteration_s if seconds is not None and iteration_s else None
    note = text(entry.get("note"))
    if not note and status == "measured" and stall_resolved({**entry, "seconds": seconds}) is False:
        note = UNRESOLVED_NOTE  # said where the row is read (the API, SQL), as `stash show` says it
    return {
        "run_id": run_id,
        "stall": stall,
        "seconds": seconds,
        "ci95_s": number(entry.get("ci95_s"), f"stall {stall} ci95_s"),
        "share": share,
        "epoch_s": number(entry.get("epoch_s"), f"stall {stall} epoch_s"),
        "status": status,
        "note": note,
        "raw_s": number(entry.get("raw_s"), f"stall {stall} raw_s"),
    }


def _run_probes(doc: ResultDocument, instance: str | None) -> pd.DataFrame | None:
    """The rows of the result's "probes" section (one probe set per multi-worker run), or None."""
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
    return probe_frame(rows, "probes")


def prepare_probe(doc: ResultDocument) -> tuple[str, pd.DataFrame]:
    """(probe_id, rows of the probes table) of a `stash probe` document (kind "stash-probe")."""
    check_probe(doc)
    probe_id = doc["probe_id"]
    return probe_id, probe_frame(probe_rows(doc), f"probe {probe_id}")


def probe_frame(rows: list[dict[str, Any]], what: str) -> pd.DataFrame:
    """Checked, typed rows of the probes table."""
    clean = []
    for row in rows:
        entry = {}
        for column, dtype in _PROBE_COLUMNS.items():
            value = row.get(column)
            if column == "started_at":
                check_time(value, what)
                entry[column] = utc_text(value)
            elif dtype == "str":
                entry[column] = text(value)
            elif dtype == "float64":
                entry[column] = number(value, f"{what} {column}")
            else:
                entry[column] = integer(
                    value, f"{what} {column}", INT64_MAX if dtype == "Int64" else INT32_MAX
                )
        clean.append(entry)
    return typed_frame(clean, _PROBE_COLUMNS)
