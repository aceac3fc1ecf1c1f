"""The process that runs one SQL console query (`python -m stash_core.store.console_worker`).

Started by stash_core/store/console.py for each query, so that nothing the query does can reach the process
that asked for it: the sandboxing settings (no external access, locked configuration) stay in this process,
and when the query runs past its time or memory limit the whole process is killed, which returns every byte
it held.

The request comes as one JSON object on stdin: db, sql (already checked by sqlguard.check_sql), max_rows,
result (the Arrow IPC file to write), memory_limit_bytes, max_result_bytes, limit_s. Protocol lines go to
stdout (anything else printed goes to stderr): `started` when the database is open and sandboxed and the
query begins, then one JSON object: {"rows", "truncated", "elapsed_s"} or {"error", "kind"}.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, TextIO

# The backstop: however the parent fares, this process ends this long after its time limit.
BACKSTOP_GRACE_S = 10.0
_PARENT_POLL_S = 0.5
EXIT_BACKSTOP = 124


def main() -> int:
    protocol = _protocol_stream()
    try:
        request = json.loads(sys.stdin.read())
    except (ValueError, OSError) as exc:
        _say(protocol, {"error": f"bad request: {exc}", "kind": "internal"})
        return 2
    _start_backstop(float(request["limit_s"]))
    _say(protocol, _run(request, protocol))
    return 0


def _run(request: dict[str, Any], protocol: TextIO) -> dict[str, Any]:
    # Imported here: the request is read and the backstop armed before the slow imports.
    import duckdb
    import pyarrow as pa

    from stash_core.errors import UsageError, first_line
    from stash_core.store.connection import connect

    try:
        with connect(request["db"], read_only=True) as con:
            _sandbox(con, int(request["memory_limit_bytes"]))
            protocol.write("started\n")
            protocol.flush()
            started = time.monotonic()
            table = _query(con, request["sql"], int(request["max_rows"]) + 1)
            elapsed_s = time.monotonic() - started
    except UsageError as exc:
        return {"error": str(exc), "kind": "usage"}
    except duckdb.OutOfMemoryException as exc:
        return {"error": first_line(exc), "kind": "memory"}
    except duckdb.Error as exc:
        return {"error": first_line(exc), "kind": "sql"}
    except MemoryError:
        return {"error": "out of memory", "kind": "memory"}
    truncated = table.num_rows > int(request["max_rows"])
    if truncated:
        table = table.slice(0, int(request["max_rows"]))
    size_bytes = table.nbytes
    if size_bytes > int(request["max_result_bytes"]):
        return {"error": f"{size_bytes}", "kind": "too_large"}
    with pa.OSFile(request["result"], "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return {"rows": table.num_rows, "truncated": truncated, "elapsed_s": elapsed_s}


def _sandbox(con: Any, memory_limit_bytes: int) -> None:
    """From here on nothing on disk (but the open database) or the network can be reached, nothing spills to
    disk (a query that needs more memory than the limit fails instead), and the user's statement cannot undo
    these settings. They hold for this process only, which ends with the query."""
    con.execute(f"SET memory_limit = '{int(memory_limit_bytes)}B'")
    con.execute("SET temp_directory = ''")
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


def _query(con: Any, sql: str, row_cap: int) -> Any:
    """The statement's first row_cap rows as an Arrow table whose every column pandas can take."""
    import pyarrow as pa

    relation = con.sql(sql)
    if relation is None:
        return pa.table({})
    table = _types_as_text(relation.limit(row_cap)).to_arrow_table()
    for index in range(table.num_columns):
        column = table.column(index)
        if _shown_wrong(column) or not _pandas_takes(column):
            table = table.set_column(index, table.field(index).name, _as_text(column))
    return table


# DuckDB types whose Arrow form loses what they hold: a TIMETZ its offset (12:34:56+02 came back as
# 12:34:56), a BIT string its bits (its stored bytes, '\x05\xFD' for '101'), a BIGNUM its digits.
_TEXT_TYPES = {"time with time zone", "bit", "bignum"}


def _types_as_text(relation: Any) -> Any:
    """The relation with the columns of _TEXT_TYPES as DuckDB writes them (by position: a name may hold any
    character), the others and every name as they were (a limit's: a repeated name numbered, t and t_1)."""
    from stash_core.store.sql_names import quoted_name

    kinds = [kind.id for kind in relation.types]
    if not _TEXT_TYPES.intersection(kinds):
        return relation
    columns = []
    for position, (name, kind) in enumerate(zip(relation.columns, kinds, strict=True), start=1):
        value = f"CAST(#{position} AS VARCHAR)" if kind in _TEXT_TYPES else f"#{position}"
        columns.append(f"{value} AS {quoted_name(name)}")
    return relation.project(", ".join(columns))


def _shown_wrong(column: Any) -> bool:
    """Columns pandas takes but a page would show as something else: an interval as a DateOffset's fields,
    bytes as a list of numbers, NaN as a missing value ("—", which is NULL), a list or struct as its values'
    raw parts ([1.5, 2.25] as 150 and 225), a time or timestamp that holds a fraction of a second as whole
    seconds (12:00:00.123456 as 12:00:00)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_interval(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return True
    if pa.types.is_nested(kind):  # a list or struct of floats, dates or intervals: shown as raw parts
        return True
    if pa.types.is_fixed_size_binary(kind):
        return True
    if pa.types.is_timestamp(kind) or pa.types.is_time(kind):  # a table cell shows whole seconds only
        return bool(pc.any(pc.not_equal(pc.subsecond(column), 0)).as_py())
    return pa.types.is_floating(kind) and bool(pc.any(pc.is_nan(column)).as_py())


def _pandas_takes(column: Any) -> bool:
    try:
        column.to_pandas()
    except Exception:  # pyarrow raises several kinds (a UNION, a date outside pandas' and Python's range)
        return False
    return True


def _as_text(column: Any) -> Any:
    """The column as DuckDB writes its values as text (in a scratch connection: the sandboxed one reads only
    its database)."""
    import duckdb
    import pyarrow as pa

    with duckdb.connect() as scratch:
        scratch.execute("SET TimeZone = 'UTC'")  # as Stash's own connections write a TIMESTAMPTZ
        scratch.register("awkward", pa.table({"value": column}))
        return scratch.sql("SELECT CAST(value AS VARCHAR) AS value FROM awkward").to_arrow_table().column(0)


def _protocol_stream() -> TextIO:
    """stdout for protocol lines only: whatever else writes to file descriptor 1 lands on stderr."""
    stream = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def _say(protocol: TextIO, message: dict[str, Any]) -> None:
    protocol.write(json.dumps(message) + "\n")
    protocol.flush()


def _start_backstop(limit_s: float) -> None:
    """End this process when its parent is gone, or long after the time limit (the parent kills it first)."""
    parent = os.getppid()
    give_up_at = time.monotonic() + limit_s + BACKSTOP_GRACE_S

    def watch() -> None:
        while os.getppid() == parent and time.monotonic() < give_up_at:
            time.sleep(_PARENT_POLL_S)
        os._exit(EXIT_BACKSTOP)

    threading.Thread(target=watch, name="stash-console-backstop", daemon=True).start()


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip the interpreter's teardown: the answer is out, the connection closed
