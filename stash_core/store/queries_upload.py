"""The reads of the Upload page (stash_core/views/upload.py) and of an output's check: which runs and probes
are stored already, the columns of every table, and the stall_breakdown rows of the scratch database an
upload is test-ingested into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.store.connection import connect
from stash_core.store.relations import relation_frame


def stored_run_ids(db_path: Path | str, run_ids: list[str]) -> set[str]:
    """The ones of `run_ids` that the database holds."""
    with connect(db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT run_id FROM runs WHERE list_contains(CAST(? AS VARCHAR[]), run_id)", [run_ids]
        ).fetchall()
    return {row[0] for row in rows}


def stored_probe_ids(db_path: Path | str, probe_ids: list[str]) -> set[str]:
    """The ones of `probe_ids` that the database holds (a `stash probe`'s own probes)."""
    with connect(db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT probe_id FROM probes WHERE list_contains(CAST(? AS VARCHAR[]), probe_id)",
            [probe_ids],
        ).fetchall()
    return {row[0] for row in rows}


def schema_columns(db_path: Path | str) -> list[tuple[str, str]]:
    """(table, column) of every table and view of the schema a new database at `db_path` is created with."""
    with connect(db_path) as con:
        return con.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'"
        ).fetchall()


def scratch_breakdown(con: Any, run_id: str | None = None) -> pd.DataFrame:
    """stall_breakdown rows of every run, newest first, or of the one run given."""
    sql = "SELECT * FROM stall_breakdown"
    if run_id is None:
        return relation_frame(con.sql(f"{sql} ORDER BY started_at DESC"))
    return relation_frame(con.sql(f"{sql} WHERE run_id = ?", params=[run_id]))
