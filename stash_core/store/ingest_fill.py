"""Fill in what a migration could not: the columns schema versions 2, 3, 6 and 8 added to what was stored
before them are NULL there (the figures were in the result files, not in the database). Ingesting such a run's
file again is the same run (store/ingest_conflicts.py leaves a stored NULL of these columns out of the
comparison) and gives them their values; a value stored already is never changed.
"""

from __future__ import annotations

from typing import Any

import duckdb

from stash_core.store.ingest_rows import PreparedRun
from stash_core.store.migrations import LATER_COLUMNS, LATER_RUN_COLUMNS
from stash_core.store.rollback import rollback_if_open

# {runs column: its SQL type}: the ones versions 2, 3 and 8 added, NULL for the runs stored before, less the
# remainder, which version 3 computed for every stored run.
FILLED_LATER_RUN_COLUMNS = {
    column: kind for column, kind in LATER_RUN_COLUMNS.items() if column != "unattributed_s"
}
# The stalls column version 6 added, NULL for the stalls stored before.
(FILLED_LATER_STALL_COLUMN,) = LATER_COLUMNS["stalls"]


def fill_migrated_gaps(con: duckdb.DuckDBPyConnection, run: PreparedRun) -> bool:
    """Store the run's values of the FILLED_LATER columns where its stored row holds NULL; True when any."""
    run_values = {
        column: run.run_row.get(column) for column in FILLED_LATER_RUN_COLUMNS
        if run.run_row.get(column) is not None
    }  # fmt: skip
    stall_values = [
        (row["stall"], row[FILLED_LATER_STALL_COLUMN]) for row in run.stalls.to_dict("records")
        if _known(row.get(FILLED_LATER_STALL_COLUMN))
    ]  # fmt: skip
    if not _has_gaps(con, run.run_id, list(run_values), bool(stall_values)):
        return False  # the common case (a run stored by this version): one read, no transaction
    filled = 0
    con.execute("BEGIN TRANSACTION")
    try:
        for column, value in run_values.items():
            filled += _count(con.execute(
                f"UPDATE runs SET {column} = CAST(? AS {FILLED_LATER_RUN_COLUMNS[column]}) "
                f"WHERE run_id = ? AND {column} IS NULL",
                [value, run.run_id],
            ))  # fmt: skip
        for stall, value in stall_values:
            filled += _count(con.execute(
                f"UPDATE stalls SET {FILLED_LATER_STALL_COLUMN} = ? "
                f"WHERE run_id = ? AND stall = ? AND {FILLED_LATER_STALL_COLUMN} IS NULL",
                [float(value), run.run_id, stall],
            ))  # fmt: skip
        con.execute("COMMIT")
    except BaseException:
        rollback_if_open(con)
        raise
    return filled > 0


def _has_gaps(con: duckdb.DuckDBPyConnection, run_id: str, run_columns: list[str], stalls: bool) -> bool:
    parts = []
    if run_columns:
        nulls = " OR ".join(f"{column} IS NULL" for column in run_columns)
        parts.append(f"(SELECT count(*) FROM runs WHERE run_id = $run AND ({nulls}))")
    if stalls:
        column = FILLED_LATER_STALL_COLUMN
        parts.append(f"(SELECT count(*) FROM stalls WHERE run_id = $run AND {column} IS NULL)")
    return bool(parts) and con.execute(f"SELECT {' + '.join(parts)}", {"run": run_id}).fetchall()[0][0] > 0


def _count(cursor: duckdb.DuckDBPyConnection) -> int:
    return int(cursor.fetchall()[0][0])  # DuckDB answers an UPDATE with the number of rows it changed


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)
