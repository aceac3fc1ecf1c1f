"""Importing an export: the tables of `stash export` turned back into result documents.

The inverse of store/export.py for runs: a runs table with its phases, stalls, iterations and telemetry
tables gives one version-1 result document per run, ready for ingest_result (after
results.file.upgrade_result). Exports made before the later runs columns existed read back without them.

A completed run is its phases and stalls as much as its runs row: without them it would be stored as a run
whose whole iteration time is "not separated", and its own result file would then be refused as other
content. So completed runs need the phases and stalls tables (every export since the first schema version has
them). Iterations and telemetry hold samples only, which the figures do not depend on: they may be left out.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from stash_core.cells import is_missing, plain, plain_records
from stash_core.errors import UsageError
from stash_core.results import RESULT_KIND, SCHEMA_VERSION
from stash_core.results.values import check_identifier
from stash_core.store.probe_rows import probe_sets
from stash_core.units import finite_float
from stash_core.zoo_names import SCRIPT_PREFIX

COMPANION_TABLES = ("phases", "stalls", "iterations", "telemetry")
# The probes a multi-worker profile measured are rows of the probes table with its run_id: they go back into
# the run's document (a `stash probe` set, with no run, is not a run's).
PROBES_TABLE = "probes"
# The companion tables a completed run cannot be read back without (its breakdown, its identity at ingest).
BREAKDOWN_TABLES = ("phases", "stalls")
SAMPLE_COLUMNS = ("iteration_s", "data_s", "forward_s", "backward_s", "optimizer_s", "slowest_rank")
ITERATION_STATS = ("mean", "ci95", "std", "median", "p5", "p95")
PART_COLUMNS = ("data_s", "forward_s", "backward_s", "optimizer_s")
STALL_FIELDS = ("seconds", "ci95_s", "share", "epoch_s", "status", "raw_s")


def docs_from_export(tables: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Result documents rebuilt from exported tables (runs required; phases and stalls too when a run is
    completed; iterations and telemetry optional). UsageError when a row cannot be read back, or when a
    completed run's phases and stalls are not there."""
    runs = tables["runs"]
    rows_by_table = {name: _rows_by_run(tables.get(name)) for name in (*COMPANION_TABLES, PROBES_TABLE)}
    docs = []
    for row in _rows(runs):
        run_id = row.get("run_id")
        if not run_id:
            raise UsageError("a row has no run_id")
        check_identifier("run_id", str(run_id), "export")  # before any message names it (no terminal escape)
        parts = {name: by_run.get(str(run_id)) for name, by_run in rows_by_table.items()}
        # a completed run stored without a breakdown (its file had none) has no stall row to bring back
        if row.get("status") == "completed" and not is_missing(row.get("iteration_s")):
            _require_breakdown(str(run_id), row, tables, parts)
        _require_phases_of_samples(str(run_id), parts)
        docs.append(doc_from_rows(str(run_id), row, parts))
    return docs


def _require_phases_of_samples(run_id: str, parts: dict[str, Any]) -> None:
    """UsageError where the run's iterations or telemetry rows name a phase it has no phases row of: the
    samples hang on their phases and would be lost."""
    held = set() if parts["phases"] is None else {str(name) for name in parts["phases"]["phase"]}
    for table in ("iterations", "telemetry"):
        rows = parts[table]
        missing = sorted({str(name) for name in rows["phase"]} - held) if rows is not None else []
        if missing:
            raise UsageError(
                f"run {run_id} has {table} rows of {', '.join(missing)} but no phases row of "
                f"{'it' if len(missing) == 1 else 'them'} to hold them; upload the phases table of the same "
                "export with them"
            )


def _require_breakdown(
    run_id: str, run: dict[str, Any], tables: dict[str, pd.DataFrame], parts: dict[str, Any]
) -> None:
    """UsageError when the completed run `run_id` would be stored without its breakdown: the phases or
    stalls table is missing, or neither holds a row of the run (the tables of another export)."""
    missing = [name for name in BREAKDOWN_TABLES if name not in tables]
    if missing:
        raise UsageError(
            f"completed run {run_id} needs its {' and '.join(missing)}, or it would be stored with no "
            f"breakdown; upload the {' and '.join(missing)} table{'s' if len(missing) > 1 else ''} of the "
            "same export with it"
        )
    without = [name for name in BREAKDOWN_TABLES if parts[name] is None]
    if without == ["stalls"] and _no_stall_named(run):
        return  # its phases are here, and its runs row says it had no stall to bring back
    if without:  # a completed run has phases and its five stalls: half of them would be a run no one measured
        raise UsageError(
            f"the {' and '.join(without)} {'tables hold' if len(without) > 1 else 'table holds'} no row of "
            f"completed run {run_id}; upload them from the same export as the runs table"
        )


def _no_stall_named(run: dict[str, Any]) -> bool:
    """Whether the runs row says its breakdown named no stall: all of its iteration is not separated."""
    iteration_s, unattributed_s = run.get("iteration_s"), run.get("unattributed_s")
    if is_missing(iteration_s) or is_missing(unattributed_s):
        return False
    return math.isclose(float(iteration_s), float(unattributed_s), rel_tol=1e-9, abs_tol=1e-12)


def doc_from_rows(run_id: str, run: dict[str, Any], parts: dict[str, pd.DataFrame | None]) -> dict[str, Any]:
    """One run's result document from its runs row and its rows of the companion tables (None: not there)."""
    spec = _json_value(run.get("spec"), f"run {run_id} spec") or {}
    if not isinstance(spec, dict):
        raise UsageError(f"run {run_id} spec is not a JSON object")
    _refuse_edited_layout(run_id, run, spec)
    phases = []
    if parts["phases"] is not None:
        for phase in sorted(_rows(parts["phases"]), key=lambda p: p.get("phase_index") or 0):
            phases.append(_phase_entry(phase, parts["iterations"], parts["telemetry"]))
    stalls = _stalls(parts["stalls"])
    breakdown = _breakdown(run_id, run, stalls)
    model = {key: run.get(column) for key, column in (("name", "model"), ("kind", "model_kind"),
             ("param_count", "param_count"), ("grad_tensor_count", "grad_tensor_count"),
             ("layer_count", "layer_count"), ("grad_bytes", "grad_bytes"))}  # fmt: skip
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULT_KIND,
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
    if parts.get(PROBES_TABLE) is not None:
        doc["probes"] = probe_sets(_rows(parts[PROBES_TABLE]))
    hosts = _json_value(run.get("hosts"), f"run {run_id} hosts")  # version 8's: older exports lack it
    if isinstance(hosts, list) and hosts and all(isinstance(host, dict) for host in hosts):
        doc["hosts"] = hosts  # a cell edited into anything else is left out, as stash show leaves it
    if _script_loader_unrecorded(spec, run):
        for phase in phases:  # as the result file said it: the script's runs recorded no DataLoader
            phase["script"] = {}
    return doc


# The runs columns that are copies of the spec's fields: the document is built from the spec, so an edit of
# one of them alone would be dropped without a word.
SPEC_COPIES = ("batch_size", "workers_per_node", "nodes", "dataset_images", "device", "backend")


def _refuse_edited_layout(run_id: str, run: dict[str, Any], spec: dict[str, Any]) -> None:
    """UsageError when a runs row's copy of a spec field differs from the spec (an export edited in one
    place)."""
    for column in SPEC_COPIES:
        value, given = plain(run.get(column)), spec.get(column)
        if is_missing(value) or given is None:
            continue
        same = str(value) == str(given)
        if isinstance(given, int | float) and not isinstance(given, bool):  # 8 and 8.0 are one batch
            number = finite_float(value)
            same = number is not None and number == given
        if not same:
            said = f"its {column} column ({str(value)[:40]}) differs from its spec's ({str(given)[:40]})"
            raise UsageError(
                f"run {run_id}: {said}: the export was edited in one place; edit the column and the spec "
                "alike, or neither"
            )


def _script_loader_unrecorded(spec: dict[str, Any], run: dict[str, Any]) -> bool:
    """A script's run stored without loader workers although its spec holds the --loader-workers default:
    its runs did not record their DataLoader's (ingest_rows._loader_workers), which the phases table keeps
    no trace of."""
    model = str(spec.get("model") or run.get("model") or "")
    return (
        model.startswith(SCRIPT_PREFIX)
        and "loader_workers" in run
        and is_missing(run.get("loader_workers"))
        and spec.get("loader_workers") is not None
    )


def _phase_entry(
    phase: dict[str, Any], iterations: pd.DataFrame | None, telemetry: pd.DataFrame | None
) -> dict[str, Any]:
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
        "iteration_s": {key: phase.get(f"{key}_s") for key in ITERATION_STATS}
        | {"n": phase.get("iterations")},
        "parts_mean_s": {key: phase.get(key) for key in PART_COLUMNS},
        "samples": {},
        "rank_skew_s": phase.get("rank_skew_s"),
        "wall_s": phase.get("wall_s"),
        "telemetry": {"interval_s": phase.get("telemetry_interval_s"), "t_s": [], "metrics": {}},
    }
    if iterations is not None:
        mine = iterations[iterations["phase"] == name].sort_values("iteration")
        for key in SAMPLE_COLUMNS:
            if key in mine.columns:
                entry["samples"][key] = [_cell(value) for value in mine[key].tolist()]
    if telemetry is not None:
        mine = telemetry[telemetry["phase"] == name]
        if not mine.empty:
            # dropna=False: a metric never sampled, or a moment when none was, is stored as NULL and kept
            wide = mine.pivot_table(
                index="t_s", columns="metric", values="value", aggfunc="first", dropna=False
            )
            entry["telemetry"]["t_s"] = [float(t) for t in wide.index]
            entry["telemetry"]["metrics"] = {
                str(metric): [_cell(v) for v in wide[metric].tolist()] for metric in wide.columns
            }
    return entry


def _stalls(stall_rows: pd.DataFrame | None) -> dict[str, dict[str, Any]]:
    stalls: dict[str, dict[str, Any]] = {}
    if stall_rows is not None:
        for stall in _rows(stall_rows):
            stalls[stall["stall"]] = {key: stall.get(key) for key in STALL_FIELDS}
            stalls[stall["stall"]]["note"] = stall.get("note") or ""
    return stalls


def _breakdown(run_id: str, run: dict[str, Any], stalls: dict[str, dict[str, Any]]) -> dict[str, Any]:
    breakdown = {
        "iteration_s": run.get("iteration_s"),
        "iteration_ci95_s": run.get("iteration_ci95_s"),
        "iterations_per_epoch": run.get("iterations_per_epoch"),
        "epoch_s": run.get("epoch_s"),
        "reference_phase": run.get("reference_phase"),
        "stalls": stalls,
        "warnings": _json_value(run.get("warnings"), f"run {run_id} warnings") or [],
    }
    # columns added by later schema versions: absent from older exports. The remainder's seconds are
    # recomputed from the stalls when the document is ingested (analysis.stalls.remainder_of); its interval
    # is kept.
    for column in ("unattributed_s", "unattributed_ci95_s"):
        value = finite_float(run.get(column))
        if value is not None:
            breakdown[column] = value
    if isinstance(run.get("network_reference"), str) and run["network_reference"]:
        breakdown["network_reference"] = run["network_reference"]
    communication = _json_value(run.get("communication"), f"run {run_id} communication")
    if communication:
        breakdown["communication"] = communication
    return breakdown


# ---------------------------------------------------------------------------------------------------------
# Values read back from a table cell


def _rows_by_run(frame: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    if frame is None or frame.empty or "run_id" not in frame.columns:
        return {}
    return {str(key): group for key, group in frame.groupby("run_id", sort=False)}


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as a result document holds them: times as ISO text, no NaN or infinities (None)."""
    return plain_records(frame, times="iso", finite=True)


def _cell(value: Any) -> Any:
    return plain(value, times="iso", finite=True)


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
