"""The SQL console's runner: each query in a process of its own, killed at its time or memory limit.

`run_readonly_query` checks the statement (sqlguard.check_sql), then starts `console_worker` with
`python -m`, which opens the database read-only, sandboxes its connection and runs the statement. Why a
process and not a thread:

- DuckDB keeps one database instance per file and process, and settings such as `enable_external_access` and
  `lock_configuration` belong to that instance: set in the dashboard's process, they would hold for every
  other page's connection to the same file while the console query runs. In the worker they stay there.
- An interrupted DuckDB query may keep running (and holding memory) until it next checks for interruption;
  a killed process returns every byte at once. The worker is killed (stash_core.proc.end_tree) when the
  query runs past `timeout_s`, or when its resident memory passes the console's memory limit plus headroom.
  DuckDB's own memory_limit is set to the limit and nothing spills to disk, so most heavy queries fail
  cleanly with "out of memory" before that.

Results come back as an Arrow IPC file in a temporary folder, capped at `max_rows` rows and
`max_result_bytes` bytes.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd
import psutil

import stash_core
from stash_core.errors import UsageError, first_line
from stash_core.proc import end_tree
from stash_core.store.connection import LOCK_TIMEOUT_S
from stash_core.store.console_files import new_console_folder, snapshot_database
from stash_core.store.sqlguard import check_sql

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_RESULT_BYTES = 256 * 2**20
# Starting Python, importing DuckDB and opening the database (which may wait LOCK_TIMEOUT_S for a writer) is
# not the query's time; it has a bound of its own.
STARTUP_LIMIT_S = LOCK_TIMEOUT_S + 30.0
# Resident memory the worker may use beyond DuckDB's memory limit (Python, Arrow, the result) before it is
# killed.
RSS_HEADROOM_BYTES = 512 * 2**20
_POLL_S = 0.05
_KILL_GRACE_S = 0.5
_WORKER_MODULE = "stash_core.store.console_worker"


def default_memory_limit_bytes() -> int:
    """A quarter of this machine's memory, between 512 MiB and 4 GiB."""
    return int(min(4 * 2**30, max(512 * 2**20, psutil.virtual_memory().total // 4)))


@dataclass
class QueryResult:
    """Rows of one console query, whether rows were cut off at max_rows, and how long it ran."""

    frame: pd.DataFrame
    truncated: bool
    elapsed_s: float
    statement: str = ""
    notes: list[str] = field(default_factory=list)


def run_readonly_query(
    db_path: Path | str,
    sql: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    memory_limit_bytes: int | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> QueryResult:
    """Check `sql`, run it in a separate process on a read-only, sandboxed connection and return at most
    `max_rows` rows.

    UsageError (one line) for a refused statement, an SQL error, a query that ran longer than `timeout_s`
    seconds or needed more than `memory_limit_bytes` (default: default_memory_limit_bytes()), or a result
    larger than `max_result_bytes`. The database file is never changed, and no setting of this process or of
    its other connections is touched.
    """
    statement = check_sql(sql)
    if not timeout_s > 0 or max_rows < 1 or max_result_bytes < 1:
        raise UsageError("the time limit must be positive and the row limit at least 1")
    memory_bytes = default_memory_limit_bytes() if memory_limit_bytes is None else int(memory_limit_bytes)
    if memory_bytes < 16 * 2**20:
        raise UsageError("the console's memory limit must be at least 16 MiB")
    with new_console_folder() as folder:
        result_path = Path(folder) / "result.arrow"
        # The query reads a snapshot, so that writers never wait for it (console_files.py).
        snapshot = snapshot_database(Path(db_path).absolute(), Path(folder))
        request = {
            "db": str(snapshot),
            "sql": statement,
            "max_rows": int(max_rows),
            "result": str(result_path),
            "memory_limit_bytes": memory_bytes,
            "max_result_bytes": int(max_result_bytes),
            "limit_s": STARTUP_LIMIT_S + float(timeout_s),
        }
        answer = _run_worker(request, Path(folder), float(timeout_s), memory_bytes + RSS_HEADROOM_BYTES)
        _raise_for(answer, float(timeout_s), memory_bytes, int(max_result_bytes))
        frame = _read_frame(result_path)
    return QueryResult(
        frame=frame,
        truncated=bool(answer.get("truncated")),
        elapsed_s=float(answer.get("elapsed_s") or 0.0),
        statement=statement,
    )


def _run_worker(
    request: dict[str, Any], folder: Path, timeout_s: float, rss_cap_bytes: int
) -> dict[str, Any]:
    """Start the worker, follow it, kill it at a limit; its last protocol message, or why it was stopped."""
    env = dict(os.environ)
    package_root = str(Path(stash_core.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    with open(folder / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", _WORKER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=folder,
        )
    lines: queue.Queue[bytes | None] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        watched: psutil.Process | None = psutil.Process(process.pid)
    except psutil.Error:
        watched = None
    answer: dict[str, Any] | None = None
    try:
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request).encode())
            process.stdin.close()
        except OSError:
            pass  # the worker died at once; its exit says why
        started = False
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while answer is None:
            now = time.monotonic()
            if now >= deadline:
                answer = {"stopped": "time" if started else "startup"}
                break
            if _rss_bytes(watched) > rss_cap_bytes:
                answer = {"stopped": "memory"}
                break
            try:
                line = lines.get(timeout=min(_POLL_S, deadline - now))
            except queue.Empty:
                continue
            if line is None:  # the worker closed its output: it has ended
                answer = {"stopped": "crashed"}
                break
            text = line.decode("utf-8", "replace").strip()
            if text == "started":
                started = True
                deadline = time.monotonic() + timeout_s
            elif text:
                try:
                    answer = json.loads(text)
                except ValueError:
                    continue  # not a protocol line
    finally:
        end_tree(process.pid, grace_s=_KILL_GRACE_S, popen=process)
        reader.join(timeout=1.0)
    assert answer is not None
    if answer.get("stopped") == "crashed":
        answer["detail"] = _last_line(folder / "stderr.txt") or f"exit status {process.returncode}"
    return answer


def _read_lines(stream: IO[bytes] | None, lines: queue.Queue[bytes | None]) -> None:
    if stream is not None:
        for line in stream:
            lines.put(line)
        stream.close()
    lines.put(None)


def _rss_bytes(process: psutil.Process | None) -> int:
    """The worker's resident memory (it starts no processes of its own); 0 once it is gone."""
    if process is None:
        return 0
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return 0


def _raise_for(answer: dict[str, Any], timeout_s: float, memory_bytes: int, max_result_bytes: int) -> None:
    limit = _size_text(memory_bytes)
    stopped, kind = answer.get("stopped"), answer.get("kind")
    if stopped == "time":
        raise UsageError(f"query stopped after {timeout_s:g} s (time limit); narrow it or raise the limit")
    if stopped == "memory" or kind == "memory":
        raise UsageError(
            f"query stopped: it needs more than {limit} of memory (the console's limit); narrow it, "
            "e.g. aggregate or filter before joining"
        )
    if stopped == "startup":
        raise UsageError(f"the query could not start within {STARTUP_LIMIT_S:g} s; try again")
    if stopped == "crashed":
        raise UsageError(f"query failed: the console's process ended unexpectedly ({answer.get('detail')})")
    if kind == "too_large":
        raise UsageError(
            f"the result is {_size_text(int(answer['error']))}, more than the {_size_text(max_result_bytes)} "
            "the console returns; select fewer rows or columns"
        )
    if kind == "usage":
        raise UsageError(str(answer["error"]))
    if "error" in answer:
        raise UsageError(f"query failed: {answer['error']}")


def _read_frame(path: Path) -> pd.DataFrame:
    """The worker's result (it turned every column that pandas has no type for into text); a whole-number
    column with a NULL keeps Python ints (as float64 a BIGINT past 2^53 came back rounded, 2^53 + 1 as
    9007199254740992)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
    try:
        return table.to_pandas(integer_object_nulls=True)
    except (pa.ArrowException, ValueError, OverflowError) as exc:
        raise UsageError(f"query failed: its result cannot be shown ({first_line(exc)})") from None


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _size_text(size_bytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.3g} {unit}"
    return f"{size_bytes} B"
