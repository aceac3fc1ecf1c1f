"""Putting result documents into the store: idempotent, one transaction per run, bulk inserts for samples.

The rows are built and checked first (store/ingest_rows.py), then the database is opened for as short a time
as the inserts take.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from stash_core.errors import NO_SPACE, StashError, UsageError, first_line
from stash_core.exits import is_database_io_error
from stash_core.interrupts import Stopped, received_stop
from stash_core.pathargs import required_path
from stash_core.results.file import (
    EXPORT_TABLE,
    MAX_RESULT_BYTES,
    PROBE_KIND,
    RESULT_KIND,
    ResultDocument,
    load_document,
    upgrade_result,
)
from stash_core.store.connection import STORING, connect
from stash_core.store.export import table_of_row
from stash_core.store.ingest_conflicts import (
    conflict_free,
    missing_sample_parts,
    probes_of_another_run,
    refuse_given_twice,
    sample_figures,
    stored_conflict,
    stored_sample_figures,
)
from stash_core.store.ingest_fill import fill_migrated_gaps
from stash_core.store.ingest_rows import PreparedRun, prepare_probe, prepare_run
from stash_core.store.ingest_said import (
    ALREADY_STORED,
    COMPLETED,
    STORED,
    each_prepared,
    nothing_stored,
    stored_before,
)
from stash_core.store.rollback import rollback_if_open
from stash_core.store.simulations import (
    SIMULATION_KIND,
    PreparedSimulation,
    insert_simulation,
    prepare_simulation,
)
from stash_core.store.writer_turn import give_way
from stash_core.userfiles import read_user_json

# A batch of files holds the database for at most this long before readers get a turn.
READER_TURN_S = 0.5
_TIME_COLUMNS = ("started_at", "finished_at", "ingested_at")
_JSON_COLUMNS = ("spec", "fingerprint", "warnings", "communication", "hosts")
_MODEL_COLUMNS = ("name", "kind", "param_count", "grad_tensor_count", "layer_count", "grad_bytes")


def ingest_result(db_path: Path | str, doc: ResultDocument, source_file: str | None = None) -> bool:
    """Store one result document; True when inserted, False when the same run was already stored (a run_id
    stored with different content is a UsageError: nothing is overwritten).

    The document is migrated and validated first (UsageError when it is not a valid result); the insert is one
    transaction, so a failure leaves nothing of the run behind.
    """
    prepared = prepare_run(upgrade_result(doc), source_file)
    with connect(db_path) as con:
        return _insert(con, prepared) != ALREADY_STORED


def ingest_files(
    db_path: Path | str,
    paths: list[Path] | list[str],
    words: bool = False,
    skip_bad: Callable[[Path, str], None] | None = None,
    on_stored: Callable[[Path, str, str], None] | None = None,
) -> list[tuple[Path, str, Any]]:
    """Ingest result files, `stash probe` files and `stash schedule` simulation files; returns (path, run_id,
    probe_id or simulation_id, inserted) per file: whether anything was written, or with `words` what
    (STORED, COMPLETED or ALREADY_STORED).

    Every file is loaded and validated, and checked against the runs already stored, before anything is
    written, so one bad file (named in the UsageError) leaves the database's runs unchanged (its schema may
    have been brought up to date: the check is the writer's, as the writes would). Each run then goes in
    with its own short transaction; a connection takes the files that go in within READER_TURN_S and is then
    closed, so readers get a turn at least that often (opening DuckDB costs some 30 ms of CPU: a connection
    per file made a folder of runs slow to store); ingesting the same files again inserts nothing, and a
    run_id, probe_id or simulation_id stored with different content is refused.

    With `skip_bad`, a file that cannot be stored (unreadable, not valid, in conflict with a stored run) is
    handed to it with the reason, "PATH: why", and left out; the others are stored. `on_stored` hears each
    file's (path, id, words) as it is committed: a command stopped part of the way has said what went in.
    """
    db_path = required_path("db_path", db_path)
    if isinstance(paths, str | Path) or not isinstance(paths, list | tuple):
        raise UsageError(f"paths: expected a list of result files, got {paths!r}"[:200])
    given = [required_path("paths", item) for item in paths]
    prepared: list[tuple[Path, PreparedRun | tuple[str, pd.DataFrame] | PreparedSimulation]]
    prepared = each_prepared(given, _prepared_file, skip_bad)
    try:
        refuse_given_twice(prepared)
    except UsageError as error:
        if skip_bad is None:
            raise nothing_stored(str(error), len(given)) from None
        prepared = _first_of_each(prepared, skip_bad)
    outcomes: list[tuple[Path, str, str]] = []
    waiting = collections.deque(prepared)
    checked = False
    storing: Path | None = None  # the file being stored: an interrupt may come after its commit
    stopped_earlier = received_stop()  # a stop this process handled before: not this ingest's
    try:
        while waiting:
            with connect(db_path) as con:
                if not checked:  # in the first writer's connection, before anything is inserted
                    try:
                        waiting = collections.deque(conflict_free(con, prepared, skip_bad))
                    except UsageError as error:
                        raise nothing_stored(str(error), len(given)) from None
                    checked = True
                turn_ends = time.monotonic() + READER_TURN_S
                while waiting:  # at least one file a connection
                    path, item = waiting.popleft()
                    storing = path
                    if isinstance(item, PreparedRun):
                        outcomes.append((path, item.run_id, _insert(con, item)))
                    elif isinstance(item, PreparedSimulation):
                        outcomes.append((path, item.simulation_id, _said(insert_simulation(con, item))))
                    else:
                        probe_id, frame = item
                        outcomes.append((path, probe_id, _said(_insert_probe(con, probe_id, frame))))
                    storing = None
                    if on_stored is not None:
                        try:
                            on_stored(*outcomes[-1])
                        except OSError:  # its reader is gone (`| head -1`): the storing goes on unsaid
                            on_stored = None
                    if time.monotonic() >= turn_ends:
                        break  # readers' turn
            if waiting:
                give_way(Path(db_path))  # the connection is closed: those waiting get in before the next
    except (KeyboardInterrupt, Exception) as error:
        stopped_by = received_stop() if stopped_earlier is None else None
        if isinstance(error, KeyboardInterrupt) or stopped_by is not None:
            # Ctrl-C or a stop signal part of the way (inside a query DuckDB says "Interrupted", opening the
            # database a StashError): what is stored stays, and is said; the file being stored may be too
            if not (stored := stored_before(outcomes, len(prepared), storing)):
                raise
            stop = error if isinstance(error, KeyboardInterrupt) else Stopped(stopped_by)
            stop.add_note(stored)
            raise stop from None
        if not isinstance(error, StashError) or not (stored := stored_before(outcomes, len(prepared))):
            raise
        # the database changed before the failure (the failed file's transaction was rolled back): not
        # "nothing written" (exit 2), and it says what it holds
        raise StashError(f"{first_line(error)}; {stored}") from None
    return outcomes if words else [(path, key, said != ALREADY_STORED) for path, key, said in outcomes]


def _first_of_each(prepared: list, skip_bad: Callable[[Path, str], None]) -> list:
    """The files of a batch whose ids no earlier file gives with other content; each later one handed to
    `skip_bad` (checked file by file: only when refuse_given_twice found such a pair in the whole batch)."""
    kept: list = []
    for path, item in prepared:
        try:
            refuse_given_twice([*kept, (path, item)])
        except UsageError as error:
            skip_bad(path, str(error))
            continue
        kept.append((path, item))
    return kept


def _prepared_file(path: Path) -> PreparedRun | tuple[str, pd.DataFrame] | PreparedSimulation:
    """A result, probe or simulation file read and checked, ready to store; UsageError "PATH: why"."""
    try:
        doc = load_document(path, other_kinds=(SIMULATION_KIND,))  # or a `stash schedule` file
    except UsageError:
        _refuse_export_row(path)
        raise
    try:
        if doc.get("kind") == SIMULATION_KIND:
            return prepare_simulation(doc, str(path.resolve()))
        if doc.get("kind") == PROBE_KIND:
            return prepare_probe(doc)
        return prepare_run(doc, str(path.resolve()))
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _said(inserted: bool) -> str:
    return STORED if inserted else ALREADY_STORED


def ingest_probe(db_path: Path | str, doc: ResultDocument) -> bool:
    """Store a `stash probe` document (kind "stash-probe"); True when inserted, False when already stored."""
    probe_id, frame = prepare_probe(doc)
    with connect(db_path) as con:
        return _insert_probe(con, probe_id, frame)


def _insert(con: duckdb.DuckDBPyConnection, run: PreparedRun) -> str:
    """Store one prepared run: STORED, COMPLETED (a stored run given what it lacked) or ALREADY_STORED."""

    def write() -> None:
        if owned := probes_of_another_run(con, run):  # in the transaction: nothing of the run stays
            raise UsageError(owned)
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

    with STORING:  # what is stored already is read and added to by one thread of this process at a time
        inserted = _insert_once(con, "runs", "run_id", run.run_id, write, lambda: _refuse_stored(con, run))
        if inserted:
            return STORED
        samples_added = _add_missing_samples(con, run)
        return COMPLETED if fill_migrated_gaps(con, run) or samples_added else ALREADY_STORED


def _add_missing_samples(con: duckdb.DuckDBPyConnection, run: PreparedRun) -> bool:
    """Store the samples a stored run (with the same figures) lacks and its file holds: a run uploaded from an
    export without its iterations, telemetry or probes gets them from its result file. True when any."""
    missing = missing_sample_parts(stored_sample_figures(con, run.run_id), sample_figures(run))
    iterations = [(phase, rows) for phase, rows in run.iterations if f"iterations {phase}" in missing]
    telemetry = [(phase, rows) for phase, rows in run.telemetry if f"telemetry {phase}" in missing]
    probes = run.probes if "probes" in missing else None
    if not (iterations or telemetry or probes is not None):
        return False
    con.execute("BEGIN TRANSACTION")
    try:
        for table, parts in (("iterations", iterations), ("telemetry", telemetry)):
            for phase, rows in parts:
                _insert_frame(con, table, rows, constants={"run_id": run.run_id, "phase": phase})
        if probes is not None:
            _insert_probe_frame(con, probes)
        con.execute("COMMIT")
    except BaseException:
        rollback_if_open(con)
        raise
    return True


def _insert_probe(con: duckdb.DuckDBPyConnection, probe_id: str, frame: pd.DataFrame) -> bool:
    def write() -> None:
        _insert_probe_frame(con, frame)

    with STORING:
        return _insert_once(
            con, "probes", "probe_id", probe_id, write, lambda: _refuse_stored(con, (probe_id, frame))
        )


def _refuse_export_row(path: Path) -> None:
    """A JSON export's table of one row (one object whose keys are a table's columns; the models and probes
    tables have a "kind" column of their own) is said to be one: as a result file it read "not a Stash result
    file (no kind)"."""
    try:
        doc = read_user_json(path, "result file", MAX_RESULT_BYTES)
    except UsageError:
        return
    documents = (RESULT_KIND, PROBE_KIND, SIMULATION_KIND)  # a damaged one of these is said as what it is
    if isinstance(doc, dict) and doc.get("kind") not in documents and (table := table_of_row(set(doc))):
        raise UsageError(
            f"{path}: one row of the {table} table (as `stash export --format json` writes it), not a result "
            f"file: {EXPORT_TABLE}"
        )


def _refuse_stored(con: duckdb.DuckDBPyConnection, item: PreparedRun | tuple[str, pd.DataFrame]) -> None:
    if conflict := stored_conflict(con, item):
        raise UsageError(conflict)


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
        rollback_if_open(con)
        message = first_line(exc)
        if NO_SPACE in message:  # the machine's fault, not the input's: not a usage error
            raise StashError(
                f"cannot store {what} {key}: the disk holding the database is full ({NO_SPACE}); the "
                "database is as it was before this one; free some space and run the same command again"
            ) from None
        if is_database_io_error(exc):  # a read-only folder, a failed write: the machine's, exit 1
            raise StashError(f"cannot store {what} {key}: {message}") from None
        raise UsageError(f"cannot store {what} {key}: {message}") from None
    except BaseException:
        rollback_if_open(con)
        raise
    return True


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
    with _registered(con, view, frame):
        sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {view}"
        con.execute(sql, list(constants.values()))


def _insert_probe_frame(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    if len(frame) == 0:
        return
    view = "_stash_ingest_probes"
    columns = list(frame.columns)
    select = ", ".join(
        f'CAST("{column}" AS TIMESTAMPTZ)' if column == "started_at" else f'"{column}"' for column in columns
    )
    with _registered(con, view, frame):
        con.execute(f"INSERT INTO probes ({', '.join(columns)}) SELECT {select} FROM {view}")


@contextlib.contextmanager
def _registered(con: duckdb.DuckDBPyConnection, view: str, frame: pd.DataFrame | pa.Table) -> Iterator[None]:
    """`frame` as the view `view` while the block runs. After a failed insert the transaction is aborted and
    unregistering fails too; that failure must not hide the insert's own error (the next register of the
    name replaces the view)."""
    con.register(view, frame)
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.unregister(view)
        raise
    con.unregister(view)
