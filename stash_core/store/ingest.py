"""Putting result documents into the store: idempotent, one transaction per run, bulk inserts for samples.

The rows are built and checked first (store/ingest_rows.py), then the database is opened for as short a time
as the inserts take.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from stash_core.errors import StashError, UsageError
from stash_core.pathargs import required_path
from stash_core.results.file import PROBE_KIND, ResultDocument, load_document, upgrade_result
from stash_core.store.connection import connect
from stash_core.store.ingest_rows import PreparedRun, prepare_probe, prepare_run
from stash_core.store.run_labels import CONFIRMED_KEY

# A batch of files holds the database for at most this long before readers get a turn.
READER_TURN_S = 0.5
_TIME_COLUMNS = ("started_at", "finished_at", "ingested_at")
_JSON_COLUMNS = ("spec", "fingerprint", "warnings", "communication")
_MODEL_COLUMNS = ("name", "kind", "param_count", "grad_tensor_count", "layer_count", "grad_bytes")


def ingest_result(db_path: Path | str, doc: ResultDocument, source_file: str | None = None) -> bool:
    """Store one result document; True when inserted, False when the same run was already stored (a run_id
    stored with different content is a UsageError: nothing is overwritten).

    The document is migrated and validated first (UsageError when it is not a valid result); the insert is one
    transaction, so a failure leaves nothing of the run behind.
    """
    prepared = prepare_run(upgrade_result(doc), source_file)
    with connect(db_path) as con:
        return _insert(con, prepared)


def ingest_files(db_path: Path | str, paths: list[Path] | list[str]) -> list[tuple[Path, str, bool]]:
    """Ingest result files and `stash probe` files; returns (path, run_id or probe_id, inserted) per file.

    Every file is loaded and validated, and checked against the runs already stored, before anything is
    written, so one bad file (named in the UsageError) leaves the database unchanged. Each run then goes in
    with its own short transaction; a connection takes the files that go in within READER_TURN_S and is then
    closed, so readers get a turn at least that often (opening DuckDB costs some 30 ms of CPU: a connection
    per file made a folder of runs slow to store); ingesting the same files again inserts nothing, and a
    run_id stored with different content is refused.
    """
    db_path = required_path("db_path", db_path)
    if isinstance(paths, str | Path) or not isinstance(paths, list | tuple):
        raise UsageError(f"paths: expected a list of result files, got {paths!r}"[:200])
    prepared: list[tuple[Path, PreparedRun | tuple[str, pd.DataFrame]]] = []
    for path in [required_path("paths", item) for item in paths]:
        doc = load_document(path)
        try:
            item = (
                prepare_probe(doc) if doc.get("kind") == PROBE_KIND else prepare_run(doc, str(path.resolve()))
            )
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None
        prepared.append((path, item))
    _refuse_conflicts(db_path, prepared)
    outcomes = []
    waiting = collections.deque(prepared)
    while waiting:
        with connect(db_path) as con:
            turn_ends = time.monotonic() + READER_TURN_S
            while waiting:  # at least one file a connection
                path, item = waiting.popleft()
                if isinstance(item, PreparedRun):
                    outcomes.append((path, item.run_id, _insert(con, item)))
                else:
                    probe_id, frame = item
                    outcomes.append((path, probe_id, _insert_probe(con, probe_id, frame)))
                if time.monotonic() >= turn_ends:
                    break  # readers' turn
    return outcomes


def ingest_probe(db_path: Path | str, doc: ResultDocument) -> bool:
    """Store a `stash probe` document (kind "stash-probe"); True when inserted, False when already stored."""
    probe_id, frame = prepare_probe(doc)
    with connect(db_path) as con:
        return _insert_probe(con, probe_id, frame)


# The runs columns that say what a run is; ingesting a run_id again must bring the same values.
_IDENTITY_COLUMNS = (
    "status", "started_at", "finished_at", "model", "batch_size", "workers_per_node", "nodes", "instance",
    "iteration_s", "spec",
)  # fmt: skip


_READ_AS = {"started_at": "epoch_us({})", "finished_at": "epoch_us({})", "spec": "CAST({} AS VARCHAR)"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _refuse_conflicts(db_path: Path | str, prepared: list[tuple[Path, Any]]) -> None:
    """UsageError naming the file when a run_id is stored, or given twice, with different content."""
    runs = [(path, item) for path, item in prepared if isinstance(item, PreparedRun)]
    seen: dict[str, tuple[Path, PreparedRun]] = {}
    for path, run in runs:
        if run.run_id in seen:
            first_path, first = seen[run.run_id]
            differ = [c for c in _IDENTITY_COLUMNS if first.run_row.get(c) != run.run_row.get(c)]
            if differ:
                raise UsageError(
                    f"{path}: run {run.run_id} is also in {first_path} with other {', '.join(differ)}"
                )
        seen[run.run_id] = (path, run)
    if not runs or not Path(db_path).exists():
        return
    with connect(db_path, read_only=True) as con:
        for path, run in runs:
            differ = _differences(con, run)
            if differ:
                raise UsageError(f"{path}: {_conflict_text(run.run_id, differ)}")


def _differences(con: duckdb.DuckDBPyConnection, run: PreparedRun) -> list[str]:
    """The identity columns whose stored value differs from the run's (none when it is not stored)."""
    columns = ", ".join(_READ_AS.get(c, "{}").format(c) for c in _IDENTITY_COLUMNS)
    row = con.execute(f"SELECT {columns} FROM runs WHERE run_id = ?", [run.run_id]).fetchone()
    if row is None:
        return []
    return [
        column
        for column, stored in zip(_IDENTITY_COLUMNS, row, strict=True)
        if not _same(column, stored, run.run_row.get(column))
    ]


def _same(column: str, stored: Any, new: Any) -> bool:
    if stored is None or new is None:
        return stored is None and new is None
    if column in _TIME_COLUMNS:  # microseconds since the epoch, as DuckDB keeps them
        moment = datetime.fromisoformat(new)
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return stored == (moment - _EPOCH) // timedelta(microseconds=1)
    if column == "spec":  # a label the user confirmed after storing the run (stash instances confirm)
        return _without_confirmation(json.loads(stored)) == _without_confirmation(json.loads(new))
    if column in _JSON_COLUMNS:
        return json.loads(stored) == json.loads(new)
    return stored == new


def _without_confirmation(spec: Any) -> Any:
    return {k: v for k, v in spec.items() if k != CONFIRMED_KEY} if isinstance(spec, dict) else spec


def _conflict_text(run_id: str, differ: list[str]) -> str:
    return (
        f"run {run_id} is already stored with other {', '.join(differ)}; refused, nothing was overwritten "
        "(give this run another run_id to keep both)"
    )


def _insert(con: duckdb.DuckDBPyConnection, run: PreparedRun) -> bool:
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

    def refuse_other_content() -> None:
        differ = _differences(con, run)
        if differ:
            raise UsageError(_conflict_text(run.run_id, differ))

    return _insert_once(con, "runs", "run_id", run.run_id, write, refuse_other_content)


def _insert_probe(con: duckdb.DuckDBPyConnection, probe_id: str, frame: pd.DataFrame) -> bool:
    return _insert_once(con, "probes", "probe_id", probe_id, lambda: _insert_probe_frame(con, frame))


NO_SPACE = "No space left on device"  # the OS's words (ENOSPC), as DuckDB passes them on


def _insert_once(
    con: duckdb.DuckDBPyConnection,
    table: str,
    key_column: str,
    key: str,
    write: Callable[[], None],
    when_stored: Callable[[], None] | None = None,
) -> bool:
    """Run `write` in one transaction unless `table` already holds `key`; False when it did (idempotent),
    after `when_stored` (which raises to refuse a stored key with other content)."""
    what = {"runs": "run", "probes": "probe"}[table]
    con.execute("BEGIN TRANSACTION")
    try:
        if con.execute(f"SELECT count(*) FROM {table} WHERE {key_column} = ?", [key]).fetchall()[0][0]:
            if when_stored is not None:
                when_stored()
            con.execute("ROLLBACK")
            return False
        write()
        con.execute("COMMIT")
    except duckdb.Error as exc:
        _rollback(con)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if NO_SPACE in message:  # the machine's fault, not the input's: not a usage error
            raise StashError(
                f"cannot store {what} {key}: the disk holding the database is full ({NO_SPACE}); the database "
                "is as it was before this one; free some space and run the same command again"
            ) from None
        raise UsageError(f"cannot store {what} {key}: {message}") from None
    except BaseException:
        _rollback(con)
        raise
    return True


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back, if a transaction is still open: a COMMIT that failed (a full disk) has ended it already."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def _insert_run(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    columns = list(row)  # the keys of the row built by prepare_run are the runs columns it fills
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
    updates = ", ".join(f"{column} = coalesce(excluded.{column}, {column})" for column in _MODEL_COLUMNS[1:])
    con.execute(
        f"INSERT INTO models ({', '.join(_MODEL_COLUMNS)}) VALUES ({', '.join('?' for _ in _MODEL_COLUMNS)}) "
        f"ON CONFLICT (name) DO UPDATE SET {updates}",
        [row[column] for column in _MODEL_COLUMNS],
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
