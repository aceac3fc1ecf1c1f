"""Whether a command may measure now and store its run when it ends: the database's path, file, schema and
connections checked before anything is measured."""

from __future__ import annotations

from pathlib import Path

from stash_core.errors import UsageError
from stash_core.store.connection import DatabaseLocked, check_database_path, connect
from stash_core.store.open_here import held_by_caller


def check_storable(db_path: Path, named_by: str = "--db") -> str | None:
    """Before a command measures: refuse (UsageError naming where the path came from: --db, $STASH_DB) a
    database it could not store into - a directory, not a DuckDB file, corrupt, of a newer Stash, not
    writable, or open in a connection of the caller's own (a notebook's, which waiting never closes: the
    run would be measured and then not stored); a database busy in another process is fine (storing waits
    for its turn): then a note that says so, which the caller prints before it measures."""
    try:
        check_database_path(db_path)
        if db_path.exists():  # intact and of a schema this Stash can take
            if held_by_caller(db_path):
                raise UsageError(
                    f"database {db_path} is open in this process (a duckdb connection of your own?): close "
                    "that connection first (a run is stored when it ends, and could not be)"
                )
            with connect(db_path, read_only=True, lock_timeout_s=0.5):
                pass
    except DatabaseLocked as locked:  # held now: found out at the start, not only when the run is stored
        holder = str(locked).split(" - ")[0]
        return (f"note: {holder}; the run is stored when it ends if that has let go by then, else it is kept "
                "in its result file (`stash ingest` stores it later)")  # fmt: skip
    except UsageError as error:
        named = f"{named_by}:" if str(db_path) in str(error) else f"{named_by} {db_path}:"  # the path once
        raise UsageError(f"{named} {error}") from None
    return None
