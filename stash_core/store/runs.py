"""Stored runs, one by one or listed: a run id from any unique part of it, the runs with their breakdown
(stall_breakdown), one run with its phases and stalls, its iterations and its telemetry. Each function opens
the database read-only, reads and closes it again.

Every function tolerates a database file that does not exist yet (it reads as empty). Times come back as
timezone-aware UTC values.

The frames (pandas) serve the pages and the Python API; `run_rows` and `run_record` give the same rows as
plain Python values for the CLI, whose `stash runs` and `stash show` then start without pandas: pandas is
imported only by the functions that build frames (imports inside functions, to keep the CLI's start-up
short). What the decisions read across runs (measured stalls, probes, compute times) is store/reads.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store.connection import connect
from stash_core.store.probe_rows import probe_sets
from stash_core.store.relations import relation_frame, relation_rows, row_limit

if TYPE_CHECKING:
    import pandas as pd

_JSON_RUN_COLUMNS = ("spec", "fingerprint", "warnings", "communication", "hosts")
_STALLS_SQL = (
    f"SELECT * FROM stalls WHERE run_id = ? ORDER BY list_position({list(STALL_NAMES)}, stall)"
    " NULLS LAST, stall"
)


def resolve_run_id(db_path: Path | str, run_id: str) -> str | None:
    """The stored run id equal to `run_id`, else the only one starting with it, else the only one holding it
    anywhere (e.g. the short suffix "a1b2c3d4" that the pages show); None when none matches.

    UsageError when the text matches several runs (and is none's full id).
    """
    with connect(db_path, read_only=True) as con:
        return _resolve(con, run_id)


def resolve_run_id_in(con: duckdb.DuckDBPyConnection, run_id: str) -> str | None:
    """resolve_run_id over an open connection."""
    return _resolve(con, run_id)


def list_runs(db_path: Path | str, limit: int | None = None) -> pd.DataFrame:
    """One row per run from the stall_breakdown view, newest first."""
    sql = "SELECT * FROM stall_breakdown ORDER BY started_at DESC NULLS LAST, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {row_limit(limit, 'limit')}"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql))


RUN_FILTERS = ("model", "instance", "status")  # the columns `stash runs` lists runs by


def run_rows(
    db_path: Path | str, limit: int | None = None, matching: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """list_runs as plain rows (dicts of Python values, None for missing), newest first; with `matching`,
    only the runs whose RUN_FILTERS columns hold those values."""
    where, params = _where(matching)
    sql = f"SELECT * FROM stall_breakdown{where} ORDER BY started_at DESC NULLS LAST, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {row_limit(limit, 'limit')}"
    with connect(db_path, read_only=True) as con:
        return relation_rows(con.sql(sql, params=params))


def matching_count(db_path: Path | str, matching: dict[str, str]) -> int:
    """How many stored runs hold the `matching` values."""
    where, params = _where(matching)
    with connect(db_path, read_only=True) as con:
        return int(con.execute(f"SELECT count(*) FROM runs{where}", params).fetchall()[0][0])


def _where(matching: dict[str, str] | None) -> tuple[str, list[str]]:
    """The WHERE clause of `matching` (column -> value; the columns RUN_FILTERS), and its parameters."""
    pairs = sorted((matching or {}).items())
    if unknown := [column for column, _ in pairs if column not in RUN_FILTERS]:
        raise UsageError(f"runs are listed by {', '.join(RUN_FILTERS)}, not by {unknown[0]!r}")
    if not pairs:
        return "", []
    return " WHERE " + " AND ".join(f"{column} = ?" for column, _ in pairs), [value for _, value in pairs]


def run_record(db_path: Path | str, run_id: str) -> dict[str, Any] | None:
    """get_run as plain rows: the same dict, read without pandas (for the CLI)."""
    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, run_id)
        if full_id is None:
            return None
        run = relation_rows(con.sql("SELECT * FROM runs WHERE run_id = ?", params=[full_id]))[0]
        phases = relation_rows(
            con.sql("SELECT * FROM phases WHERE run_id = ? ORDER BY phase_index, phase", params=[full_id])
        )
        stalls = relation_rows(con.sql(_STALLS_SQL, params=[full_id]))
    for column in _JSON_RUN_COLUMNS:
        if run.get(column) is not None:
            run[column] = json.loads(run[column])
    run["phases"] = phases
    run["stalls"] = stalls
    return run


def breakdown_frame(db_path: Path | str, run_ids: list[str] | None = None) -> pd.DataFrame:
    """stall_breakdown rows of the given run ids (all runs when None), newest first."""
    sql = "SELECT * FROM stall_breakdown"
    params: list[Any] = []
    if run_ids is not None:
        sql += " WHERE list_contains(CAST(? AS VARCHAR[]), run_id)"
        params.append(list(run_ids))
    sql += " ORDER BY started_at DESC NULLS LAST, run_id DESC"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql, params=params or None))


def get_run(db_path: Path | str, run_id: str) -> dict[str, Any] | None:
    """One run: its runs row as a dict (spec, fingerprint, warnings parsed) plus "phases" and "stalls" lists.

    `run_id` may be any unique part of a run id (see resolve_run_id). None when no run matches; UsageError
    when the part is ambiguous.
    """
    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, run_id)
        if full_id is None:
            return None
        run = _records(relation_frame(con.sql("SELECT * FROM runs WHERE run_id = ?", params=[full_id])))[0]
        phases = relation_frame(
            con.sql("SELECT * FROM phases WHERE run_id = ? ORDER BY phase_index, phase", params=[full_id])
        )
        stalls = relation_frame(con.sql(_STALLS_SQL, params=[full_id]))
    for column in _JSON_RUN_COLUMNS:
        if run.get(column) is not None:
            run[column] = json.loads(run[column])
    run["phases"] = _records(phases)
    run["stalls"] = _records(stalls)
    return run


def stalls_frame(db_path: Path | str, run_id: str) -> pd.DataFrame | None:
    """The stalls rows of one run (`run_id` any unique part of its id, see resolve_run_id) in stall order,
    with the table's columns and types even when the run has none; None when no run matches."""
    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, run_id)
        if full_id is None:
            return None
        return relation_frame(con.sql(_STALLS_SQL, params=[full_id]))


def iterations_frame(db_path: Path | str, run_id: str, phase: str | None = None) -> pd.DataFrame:
    """Per-iteration samples (means over the ranks) of one run, optionally one phase, in phase and iteration
    order."""
    return _per_phase_rows(db_path, "iterations", "i.iteration", run_id, phase)


def telemetry_frame(db_path: Path | str, run_id: str, phase: str | None = None) -> pd.DataFrame:
    """Telemetry of one run in long format (run_id, phase, t_s, metric, value), optionally one phase."""
    return _per_phase_rows(db_path, "telemetry", "i.metric, i.t_s", run_id, phase)


def _per_phase_rows(
    db_path: Path | str, table: str, order: str, run_id: str, phase: str | None
) -> pd.DataFrame:
    """The rows of a per-phase table (a constant name, never user text) of one run, optionally one phase, in
    the phases' order, then `order`."""
    sql = (
        f"SELECT i.* FROM {table} AS i LEFT JOIN phases AS p ON p.run_id = i.run_id AND p.phase = i.phase "
        "WHERE i.run_id = ?"
    )
    params: list[Any] = [run_id]
    if phase is not None:
        sql += " AND i.phase = ?"
        params.append(phase)
    sql += f" ORDER BY p.phase_index, i.phase, {order}"
    with connect(db_path, read_only=True) as con:
        return relation_frame(con.sql(sql, params=params))


def _resolve(con: duckdb.DuckDBPyConnection, run_id: str, column: str = "run_id") -> str | None:
    """The one id of `column` ("run_id" of runs, "probe_id" of probes) that `run_id` is, or is a unique part
    of; None when none is; UsageError when several are."""
    table, what = ("runs", "run") if column == "run_id" else ("probes", "probe set")
    if not run_id:
        raise UsageError(f"{what} id must not be empty")
    if con.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?", [run_id]).fetchall()[0][0]:
        return run_id
    # A prefix first (it may be unique where the same text also occurs inside other ids), then any part.
    for condition in (f"starts_with({column}, ?)", f"contains({column}, ?)"):
        matches = [
            row[0]
            for row in con.execute(
                f"SELECT DISTINCT {column} FROM {table} WHERE {condition} ORDER BY 1 LIMIT 6", [run_id]
            ).fetchall()
        ]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
            raise UsageError(f"{what} id {run_id!r} matches several {what}s ({shown}); give more characters")
    return None


def probe_set_record(db_path: Path | str, probe_id: str) -> dict[str, Any] | None:
    """The stored probe set `probe_id` (any unique part of it) as `stash probe` made it
    (probe_rows.probe_sets), None when no probe set matches."""

    with connect(db_path, read_only=True) as con:
        full_id = _resolve(con, probe_id, column="probe_id")
        if full_id is None:
            return None
        rows = relation_rows(con.sql("SELECT * FROM probes WHERE probe_id = ?", params=[full_id]))
    return probe_sets(rows)[0]


def other_probe_sets(db_path: Path | str, text: str, run_id: str) -> list[str]:
    """The probe sets whose id holds `text`, but for `run_id`'s own (`<run_id>-R1`: a part of the run's id is
    a part of theirs), at most six."""
    with connect(db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT probe_id FROM probes WHERE contains(probe_id, ?) AND run_id IS DISTINCT FROM ? "
            "ORDER BY 1 LIMIT 6", [text, run_id],
        ).fetchall()  # fmt: skip
    return [row[0] for row in rows]


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain Python values: None for missing, datetime for timestamps."""
    from stash_core.cells import plain_records  # pandas: only where a frame is read

    return plain_records(frame, times="datetime")
