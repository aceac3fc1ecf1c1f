"""Rolling a transaction back without hiding why it failed: a COMMIT that failed (a full disk, a read-only
folder) has ended the transaction already, and DuckDB then refuses the ROLLBACK ("no transaction is active"),
an error that would replace the COMMIT's own."""

from __future__ import annotations

import duckdb


def rollback_if_open(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, if one is still open."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass
