"""A run, probe or simulation id given again: the same content is stored once (idempotent), other content is
refused; so is a run whose probe set another run holds (a copy of its file under another run_id).

A run is compared on what it is and what it measured: the runs columns that come from the file as it is
(not the ones a label confirmation changes), every phase's statistics and status, every stall's figures and
status. A column a migration added is NULL for the runs stored before it: there it is not compared, and the
file fills it in (store/ingest_fill.py). A probe set is compared on every row it adds. The figures are
compared as they are stored, so a file and its stored run compare equal exactly when nothing in them differs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pandas as pd

from stash_core.errors import UsageError
from stash_core.store.ingest_fill import FILLED_LATER_RUN_COLUMNS
from stash_core.store.ingest_rows import PreparedRun
from stash_core.store.run_labels import CONFIRMED_KEY
from stash_core.store.simulations import PreparedSimulation, simulation_conflict, simulation_differences

# The runs columns a file gives as it is; the others are derived, or filled in by migrations for old runs.
# The model's counts feed the fits and the fingerprint the label check: a file that changes them is other
# content. A run's warnings and a stall's note are partly written by the Stash that stores it: not compared.
RUN_COLUMNS = (
    "status", "error", "started_at", "finished_at", "model", "batch_size", "workers_per_node", "nodes",
    "instance", "iteration_s", "iteration_ci95_s", "iterations_per_epoch", "epoch_s", "spec", "param_count",
    "grad_tensor_count", "layer_count", "grad_bytes", "fingerprint", "network_reference", "communication",
    "hosts",
)  # fmt: skip
_JSON = ("spec", "fingerprint", "communication", "hosts")
PHASE_COLUMNS = (
    "phase_index", "description", "workers", "nodes", "data", "status", "error", "warmup_iterations",
    "iterations", "mean_s", "ci95_s", "std_s", "median_s", "p5_s", "p95_s", "data_s", "forward_s",
    "backward_s", "optimizer_s", "rank_skew_s", "resident_fraction_start", "wall_s", "telemetry_interval_s",
)  # fmt: skip
# A stall's share is left out: it is recomputed from its seconds (older versions stored the file's).
STALL_COLUMNS = ("seconds", "ci95_s", "epoch_s", "status")
PROBE_COLUMNS = (
    "run_id", "phase", "started_at", "hostname", "instance", "backend", "device", "world_size", "nodes",
    "workers_per_node", "kind", "scope", "size_bytes", "repetitions", "time_s", "time_min_s", "algbw_gbps",
    "busbw_gbps", "link_gbps",
)  # fmt: skip
_TIMES = ("started_at", "finished_at")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHOWN = 6  # differences named in a refusal; the rest are counted


def run_figures(run: PreparedRun) -> dict[str, Any]:
    """{what: value} of a run about to be stored, as stored_run_figures reads them back."""
    figures = {column: _plain(column, run.run_row.get(column)) for column in RUN_COLUMNS}
    for row in run.phases.to_dict("records"):
        figures.update(_part(f"phase {row['phase']}", row, PHASE_COLUMNS))
    for row in run.stalls.to_dict("records"):
        figures.update(_part(f"stall {row['stall']}", row, STALL_COLUMNS))
    return figures


def stored_run_figures(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """The figures of the stored run `run_id` (None when it is not stored). A reader takes an older database
    as it is: a column a later version added (runs.hosts) reads as NULL where the file has none."""
    present = {row[0] for row in con.execute("DESCRIBE runs").fetchall()}
    columns = ", ".join(_read(column) if column in present else "NULL" for column in RUN_COLUMNS)
    row = con.execute(f"SELECT {columns} FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if row is None:
        return None
    figures = {column: _plain(column, value) for column, value in zip(RUN_COLUMNS, row, strict=True)}
    for table, key, columns in (("phases", "phase", PHASE_COLUMNS), ("stalls", "stall", STALL_COLUMNS)):
        rows = con.execute(
            f"SELECT {key}, {', '.join(columns)} FROM {table} WHERE run_id = ?", [run_id]
        ).fetchall()
        for values in rows:
            figures.update(_part(f"{key} {values[0]}", dict(zip(columns, values[1:], strict=True)), columns))
    return figures


def probe_figures(frame: pd.DataFrame) -> dict[str, Any]:
    """{column: its values in a canonical order} of a probe set's rows, and the rows themselves."""
    rows = [
        tuple(_plain(column, row.get(column)) for column in PROBE_COLUMNS) for row in frame.to_dict("records")
    ]
    return _probe_part(rows)


def stored_probe_figures(con: duckdb.DuckDBPyConnection, probe_id: str) -> dict[str, Any] | None:
    """The figures of the stored probe set `probe_id` (None when it is not stored)."""
    columns = ", ".join(_read(column) for column in PROBE_COLUMNS)
    try:
        rows = con.execute(f"SELECT {columns} FROM probes WHERE probe_id = ?", [probe_id]).fetchall()
    except duckdb.CatalogException:  # a database from before the probes table, read-only: none stored
        return None
    if not rows:
        return None
    return _probe_part([tuple(_plain(c, v) for c, v in zip(PROBE_COLUMNS, row, strict=True)) for row in rows])


# A run's samples are compared on their values that are not NULL (how many, and their sum), per phase (and
# metric): a file with other samples is other content; a moment with no value, which an earlier Upload page
# dropped, is none. A stored run without some, uploaded from an export without them, gets them from its
# result file (ingest._add_missing_samples).


# The iterations columns a run's samples are compared on, each by its count and sum
ITERATION_COLUMNS = ("iteration_s", "data_s", "forward_s", "backward_s", "optimizer_s", "slowest_rank")


def sample_figures(run: PreparedRun) -> dict[str, tuple[int, float]]:
    """{"iterations R0 iteration_s": (values, their sum), ... for each ITERATION_COLUMNS, "telemetry R0
    cpu_util_pct": (rows, sum of its values), ..., "probes": (rows, sum of time_s)} of a run to store
    (telemetry per metric: their scales differ)."""
    import pyarrow.compute as pc

    figures: dict[str, tuple[int, float]] = {}
    for phase, rows in run.iterations:
        for name in ITERATION_COLUMNS:
            if name in rows.column_names:
                column = rows.column(name)
                total = pc.sum(column).as_py() or 0.0
                figures[f"iterations {phase} {name}"] = (len(column) - column.null_count, float(total))
    for phase, rows in run.telemetry:
        frame = rows.select(["metric", "value"]).to_pandas()
        for metric, values in frame.groupby("metric", observed=True)["value"]:
            figures[f"telemetry {phase} {metric}"] = (int(values.count()), float(values.sum()))
    if run.probes is not None and len(run.probes):
        figures["probes"] = (len(run.probes), float(run.probes["time_s"].fillna(0.0).sum()))
    return figures


def stored_sample_figures(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, tuple[int, float]]:
    """sample_figures of the run stored under `run_id` (tables without its rows left out)."""
    figures: dict[str, tuple[int, float]] = {}
    # one scan of the run's iterations: every column's count and sum by phase
    sums = ", ".join(f"count({name}), coalesce(sum({name}), 0)" for name in ITERATION_COLUMNS)
    for phase, *values in con.execute(
        f"SELECT phase, {sums} FROM iterations WHERE run_id = ? GROUP BY phase", [run_id]
    ).fetchall():
        for index, name in enumerate(ITERATION_COLUMNS):
            figures[f"iterations {phase} {name}"] = (values[2 * index], float(values[2 * index + 1]))
    rows = con.execute(
        "SELECT 'telemetry ' || phase || ' ' || metric, count(value), coalesce(sum(value), 0) FROM telemetry "
        "WHERE run_id = ? GROUP BY phase, metric",
        [run_id],
    ).fetchall()
    figures.update({name: (count, float(total)) for name, count, total in rows})
    count, total = con.execute(
        "SELECT count(*), coalesce(sum(time_s), 0) FROM probes WHERE run_id = ?", [run_id]
    ).fetchall()[0]
    if count:
        figures["probes"] = (count, float(total))
    return figures


def missing_sample_parts(stored: dict[str, tuple[int, float]], new: dict[str, tuple[int, float]]) -> set[str]:
    """The parts ("iterations R0", "telemetry R1", "probes") `new` holds that `stored` has no row of."""
    held = {_sample_part(name) for name in stored}
    return {_sample_part(name) for name in new} - held


def _sample_part(name: str) -> str:
    return " ".join(name.split(" ", 2)[:2])  # "telemetry R1" of "telemetry R1 cpu_util_pct"


def sample_differences(old: dict[str, tuple[int, float]], new: dict[str, tuple[int, float]]) -> list[str]:
    """The sample parts both hold that differ (rows, or their sum beyond float rounding); a part stored
    without a value (an export that held the iteration times alone) differs from none."""
    return [
        name for name in new
        if name in old and old[name][0] > 0 and (
            old[name][0] != new[name][0]
            or not math.isclose(old[name][1], new[name][1], rel_tol=1e-12, abs_tol=1e-15))
    ]  # fmt: skip


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two sets of figures, in the order of `new` (then what only `old` has); a runs
    column a migration added does not differ where one side lacks it: stored as NULL (the file fills it in),
    or absent from what is given (an export made before the column existed), whichever comes first."""
    names = [
        name for name in new
        if name not in old or (old[name] != new[name] and not _filled_later(name, old[name], new[name]))
    ]  # fmt: skip
    names += [name for name in old if name not in new]
    if "rows" in names:  # a probe set: name the columns that differ, or say only that the rows do
        names = [name for name in names if name != "rows"] or ["rows"]
    return names


def _filled_later(name: str, stored: Any, given: Any) -> bool:
    return name in FILLED_LATER_RUN_COLUMNS and (stored is None or given is None)


def difference_text(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown if len(names) <= _SHOWN else f"{shown} and {len(names) - _SHOWN} more"


def _part(prefix: str, row: dict[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    return {f"{prefix} {column}": _plain(column, row.get(column)) for column in columns}


def _probe_part(rows: list[tuple]) -> dict[str, Any]:
    figures = {
        column: sorted((row[index] for row in rows), key=_order) for index, column in enumerate(PROBE_COLUMNS)
    }
    figures["rows"] = sorted(rows, key=_order)  # the same values in other rows still differ
    return figures


def _order(value: Any) -> str:
    return json.dumps(value, default=str)


def _read(column: str) -> str:
    if column in _TIMES:
        return f"epoch_us({column})"  # microseconds since the epoch, as DuckDB keeps a time
    return f"CAST({column} AS VARCHAR)" if column in _JSON else column


def _plain(column: str, value: Any) -> Any:
    """A value as plain Python, the same whether it comes from a prepared row or the database."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
        if isinstance(value, float) and math.isnan(value):
            return None
    if column in _TIMES and isinstance(value, str):
        moment = datetime.fromisoformat(value)
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return (moment - _EPOCH) // timedelta(microseconds=1)
    if column in ("fingerprint", "communication", "hosts") and isinstance(value, str):
        return json.loads(value)
    if column == "spec" and isinstance(value, str):
        spec = json.loads(value)
        # a label the user confirmed after storing the run (stash instances confirm) is not new content
        return {k: v for k, v in spec.items() if k != CONFIRMED_KEY} if isinstance(spec, dict) else spec
    return value


def refuse_given_twice(prepared: list[tuple[Any, Any]]) -> None:
    """UsageError naming the file when a run_id, probe_id or simulation_id is given twice with other
    content."""
    if shared := shared_probe_sets(prepared):
        raise UsageError(shared)
    seen: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {}
    simulations: dict[str, tuple[Any, PreparedSimulation]] = {}
    for path, item in prepared:
        if isinstance(item, PreparedSimulation):
            first_path, first = simulations.setdefault(item.simulation_id, (path, item))
            if differ := simulation_differences(first, item):
                key = f"simulation {item.simulation_id}"
                raise UsageError(f"{path}: {key} is also in {first_path} with other {', '.join(differ)}")
            continue
        key, figures = _figures_of(item)
        samples = sample_figures(item) if isinstance(item, PreparedRun) else {}
        if key in seen:
            first_path, first, first_samples = seen[key]
            if differ := differences(first, figures) + sample_differences(first_samples, samples):
                other = difference_text(differ)
                raise UsageError(f"{path}: {key} is also in {first_path} with other {other}")
        seen[key] = (path, figures, samples)


def conflict_free(
    con: duckdb.DuckDBPyConnection,
    prepared: list[tuple[Any, Any]],
    skip_bad: Callable[[Any, str], None] | None = None,
) -> list[tuple[Any, Any]]:
    """The prepared files that can be stored beside what is: a run_id, probe_id or simulation_id stored with
    other content, or a run's probe set stored with another run, is a UsageError naming the file, or with
    `skip_bad` handed to it ("PATH: why") and left out (checked as the writer, whose connection has made any
    schema part dropped by hand again)."""
    kept = []
    for path, item in prepared:
        if isinstance(item, PreparedSimulation):
            conflict = simulation_conflict(con, item)
        else:
            conflict = stored_conflict(con, item) or probes_of_another_run(con, item)
        if not conflict:
            kept.append((path, item))
        elif skip_bad is None:
            raise UsageError(f"{path}: {conflict}")
        else:
            skip_bad(path, f"{path}: {conflict}")
    return kept


def stored_conflict(
    con: duckdb.DuckDBPyConnection, item: PreparedRun | tuple[str, pd.DataFrame]
) -> str | None:
    """Why a run or probe set is refused where its id is stored with other content; None when it is not."""
    differ = _stored_differences(con, item)
    return _conflict_text(_figures_of(item)[0], differ) if differ else None


def _figures_of(item: PreparedRun | tuple[str, pd.DataFrame]) -> tuple[str, dict[str, Any]]:
    """("run <id>" or "probe <id>", its figures)."""
    if isinstance(item, PreparedRun):
        return f"run {item.run_id}", run_figures(item)
    return f"probe {item[0]}", probe_figures(item[1])


def _stored_differences(
    con: duckdb.DuckDBPyConnection, item: PreparedRun | tuple[str, pd.DataFrame]
) -> list[str]:
    """What differs between the item and the one stored under its id (nothing when none is); a run's
    samples differ only where both hold some (a stored run without them gets them from its file:
    ingest._add_missing_samples)."""
    if isinstance(item, PreparedRun):
        stored = stored_run_figures(con, item.run_id)
        if stored is None:
            return []
        samples = sample_differences(stored_sample_figures(con, item.run_id), sample_figures(item))
        return differences(stored, _figures_of(item)[1]) + samples
    stored = stored_probe_figures(con, item[0])
    return [] if stored is None else differences(stored, _figures_of(item)[1])


def _conflict_text(key: str, differ: list[str]) -> str:
    return (
        f"{key} is already stored with other {difference_text(differ)}; refused, nothing was overwritten "
        f"(give it another {key.split()[0]}_id to keep both)"
    )


# A run's probe sets are its own (probe_id "<run_id>-<phase>"): a copy of a run's file under another run_id
# would store the same probe sets again under their ids, which then name two sets, and `stash fit` would
# count each twice.
def run_probe_ids(run: PreparedRun) -> list[str]:
    """The probe_ids of the probe sets a run's file holds."""
    if run.probes is None or "probe_id" not in run.probes:
        return []
    return sorted({str(probe_id) for probe_id in run.probes["probe_id"].dropna()})


def shared_probe_sets(prepared: list[tuple[Any, Any]]) -> str | None:
    """Why the files of one command are refused where two runs hold a probe set of one probe_id, naming the
    file; None when none do."""
    owners: dict[str, tuple[Any, str]] = {}
    for path, run in prepared:
        for probe_id in run_probe_ids(run) if isinstance(run, PreparedRun) else []:
            first_path, owner = owners.setdefault(probe_id, (path, run.run_id))
            if owner != run.run_id:
                return f"{path}: {_owned_text(probe_id, f'run {owner} in {first_path}')}"
    return None


def probes_of_another_run(con: duckdb.DuckDBPyConnection, run: Any) -> str | None:
    """Why a run is refused where one of its probe sets is stored with another run (or as a `stash probe`'s
    own); None when none is, or for a probe set or simulation."""
    probe_ids = run_probe_ids(run) if isinstance(run, PreparedRun) else []
    if not probe_ids:
        return None
    try:
        # a run stored already had its probe sets judged when it went in (or before this check existed)
        found = con.execute(
            "SELECT probe_id, min(run_id) FROM probes WHERE list_contains($1, probe_id) "
            "AND run_id IS DISTINCT FROM $2 AND NOT EXISTS (SELECT 1 FROM runs WHERE run_id = $2) "
            "GROUP BY probe_id ORDER BY probe_id LIMIT 1",
            [probe_ids, run.run_id],
        ).fetchall()
    except duckdb.CatalogException:  # a database from before the probes table, read-only: none stored
        return None
    if not found:
        return None
    return _owned_text(found[0][0], f"run {found[0][1]}" if found[0][1] else "a `stash probe` of its own")


def _owned_text(probe_id: str, owner: str) -> str:
    return (
        f"probe set {probe_id} belongs to {owner} already; refused, nothing was overwritten (a run's probe "
        "sets are its own: a copy of a run under another run_id needs other probe_ids too)"
    )
