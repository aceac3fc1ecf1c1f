"""SQL console: the schema browser, column documentation, example queries and running a query."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stash_core import store
from stash_core.results.file import STALL_NAMES
from stash_core.store.console import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryResult, run_readonly_query

# ---------------------------------------------------------------------------------------------------------
# SQL console: schema browser and examples

EXAMPLE_QUERIES: list[tuple[str, str]] = [
    (
        "Newest runs and their breakdown",
        "SELECT run_id, model, batch_size, workers_per_node, instance, iteration_s,\n"
        "       compute_share, interconnect_share, cpu_share, disk_share\n"
        "FROM stall_breakdown\nORDER BY started_at DESC\nLIMIT 20",
    ),
    (
        "Largest stall of each run",
        "SELECT run_id, model, arg_max(stall, seconds) AS largest_stall, max(seconds) AS seconds\n"
        "FROM stalls JOIN runs USING (run_id)\nWHERE seconds IS NOT NULL\nGROUP BY ALL\n"
        "ORDER BY seconds DESC\nLIMIT 20",
    ),
    (
        "Mean iteration time per model and instance",
        "SELECT model, instance, count(*) AS runs, avg(iteration_s) AS iteration_s\n"
        "FROM runs\nWHERE status = 'completed'\nGROUP BY ALL\nORDER BY model, iteration_s",
    ),
    (
        "Iteration-time percentiles per phase",
        "SELECT run_id, phase, count(*) AS iterations,\n"
        "       quantile_cont(iteration_s, 0.5) AS median_s,\n"
        "       quantile_cont(iteration_s, 0.95) AS p95_s\n"
        "FROM iterations\nWHERE run_id = (SELECT max(run_id) FROM runs)\nGROUP BY ALL\nORDER BY phase",
    ),
    (
        "Peak CPU and disk use per run",
        "SELECT run_id, metric, max(value) AS peak\nFROM telemetry\n"
        "WHERE metric IN ('cpu_util_pct', 'disk_read_mbps')\nGROUP BY ALL\nORDER BY run_id DESC\nLIMIT 40",
    ),
]


def schema_browser(db_path: Path | str) -> dict[str, dict[str, Any]]:
    """Per table and view of the store: kind, row count (tables), what it holds ("about") and its columns
    with type and meaning, all read from the database itself (its COMMENT ON metadata)."""
    return store.describe_schema(db_path)


def run_query(
    db_path: Path | str, sql: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS
) -> QueryResult:
    """Run one read-only console statement in a process of its own (stash_core/store/console.py): refused
    statements, SQL errors and queries past the time or memory limit end in UsageError; nothing in this
    process (its other connections, their settings, its memory) is touched."""
    return run_readonly_query(db_path, sql, timeout_s=timeout_s, max_rows=max_rows)


def _column_names(cell: str) -> list[str]:
    names = re.findall(r"`([^`]+)`", cell) or [cell.strip("* ")]
    expanded = []
    for name in names:
        if "<stall>" in name:
            expanded += [name.replace("<stall>", stall) for stall in STALL_NAMES]
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            expanded.append(name)
    return expanded
