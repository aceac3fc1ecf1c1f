"""The reads of the Stall breakdown and Overview pages (stash_core/views/breakdown.py, overview.py), on an
open connection: the views open the store once per page and pass the connection, so one page reads one state.

A condition on runs travels as (SQL, parameters), made here (run_filter_sql, COMPLETED_RUNS, runs_among), so
the views hold no SQL of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from stash_core.store.relations import relation_frame

# Conditions on runs, each (SQL, parameters).
COMPLETED_RUNS: tuple[str, list[Any]] = ("status = 'completed'", [])


def runs_among(run_ids: Sequence[str]) -> tuple[str, list[Any]]:
    """The condition "one of these run ids"."""
    return "list_contains(CAST(? AS VARCHAR[]), run_id)", [list(run_ids)]


def model_names(con: Any) -> list[str]:
    """Models the database knows (the models table), sorted."""
    return [row[0] for row in con.execute("SELECT name FROM models ORDER BY name").fetchall()]


def filter_option_lists(con: Any, no_instance: str) -> tuple[Any, ...]:
    """Sorted distinct models, batch sizes, instances (`no_instance` for none), workers, nodes and statuses of
    the runs, then the first and the last run date."""
    return con.execute(
        "SELECT list_sort(list(DISTINCT model) FILTER (WHERE model IS NOT NULL)), "
        "list_sort(list(DISTINCT batch_size) FILTER (WHERE batch_size IS NOT NULL)), "
        "list_sort(list(DISTINCT coalesce(nullif(trim(instance), ''), ?))), "
        "list_sort(list(DISTINCT workers_per_node) FILTER (WHERE workers_per_node IS NOT NULL)), "
        "list_sort(list(DISTINCT nodes) FILTER (WHERE nodes IS NOT NULL)), "
        "list_sort(list(DISTINCT status) FILTER (WHERE status IS NOT NULL)), "
        "CAST(min(started_at) AS DATE), CAST(max(started_at) AS DATE) FROM runs",
        [no_instance],
    ).fetchone()


def run_filter_sql(run_filter: Any, no_instance: str) -> tuple[str, list[Any]]:
    """The condition (and its parameters) of a views.breakdown.RunFilter: models, batch_sizes, instances
    (`no_instance` matches a run without one), workers, nodes, statuses, date_from and date_to."""
    where: list[str] = []
    params: list[Any] = []

    def pick(column: str, values: list[Any], cast: str) -> None:
        if values:
            where.append(f"list_contains(CAST(? AS {cast}[]), {column})")
            params.append(list(values))

    pick("model", run_filter.models, "VARCHAR")
    pick("batch_size", [int(v) for v in run_filter.batch_sizes], "INTEGER")
    pick(f"coalesce(nullif(trim(instance), ''), '{no_instance}')", run_filter.instances, "VARCHAR")
    pick("workers_per_node", [int(v) for v in run_filter.workers], "INTEGER")
    pick("nodes", [int(v) for v in run_filter.nodes], "INTEGER")
    pick("status", run_filter.statuses, "VARCHAR")
    if run_filter.date_from is not None:
        where.append("started_at >= CAST(? AS TIMESTAMPTZ)")
        params.append(datetime.combine(run_filter.date_from, datetime.min.time(), UTC).isoformat())
    if run_filter.date_to is not None:
        where.append("started_at < CAST(? AS TIMESTAMPTZ)")
        end = datetime.combine(run_filter.date_to + timedelta(days=1), datetime.min.time(), UTC)
        params.append(end.isoformat())
    return (" AND ".join(where) if where else "true"), params


def count_runs(con: Any, condition: str, params: list[Any]) -> int:
    """How many runs meet `condition`."""
    return int(con.execute(f"SELECT count(*) FROM runs WHERE {condition}", params).fetchone()[0])


def run_frames(
    con: Any, run_id: str, stall_order: Sequence[str], max_iterations: int, max_points_per_metric: float
) -> dict[str, pd.DataFrame] | None:
    """One run's rows: "runs" (its one row), "phases", "stalls" (in `stall_order`), "samples" (per-iteration
    times, evenly thinned within each phase to about `max_iterations` in all; "samples_stored" counts them
    all) and "telemetry" (evenly thinned to about `max_points_per_metric` per metric over all phases). None
    when there is no such run."""
    runs = relation_frame(con.sql("SELECT * FROM runs WHERE run_id = ?", params=[run_id]))
    if runs.empty:
        return None
    phases = relation_frame(
        con.sql("SELECT * FROM phases WHERE run_id = ? ORDER BY phase_index, phase", params=[run_id])
    )
    stalls = relation_frame(
        con.sql(
            "SELECT * FROM stalls WHERE run_id = ? ORDER BY list_position(?, stall) NULLS LAST, stall",
            params=[run_id, list(stall_order)],
        )
    )
    # Thinned evenly within each phase (every k-th kept iteration), as telemetry is: cut at the limit in
    # phase order, a run of 5 phases x 36,890 iterations showed R0 alone, the others gone without a word.
    samples = relation_frame(
        con.sql(
            "WITH t AS (SELECT phase, iteration, iteration_s, data_s, forward_s, backward_s, optimizer_s, "
            "row_number() OVER (PARTITION BY phase ORDER BY iteration) AS n, "
            "count(*) OVER (PARTITION BY phase) AS total FROM iterations WHERE run_id = ?), "
            "s AS (SELECT count(DISTINCT phase) AS phases FROM t) "
            "SELECT phase, iteration, iteration_s, data_s, forward_s, backward_s, optimizer_s FROM t, s "
            "WHERE (n - 1) % greatest(1, CAST(ceil(total * phases / ?) AS BIGINT)) = 0 "
            "ORDER BY list_position(?, phase), phase, iteration",
            params=[run_id, float(max(1, max_iterations)), list(phases["phase"])],
        )
    )
    stored_samples = con.execute("SELECT count(*) FROM iterations WHERE run_id = ?", [run_id]).fetchall()
    stored_samples = stored_samples[0][0]
    telemetry = relation_frame(
        con.sql(
            "WITH t AS (SELECT phase, metric, t_s, value, "
            "row_number() OVER (PARTITION BY phase, metric ORDER BY t_s) AS n, "
            "count(*) OVER (PARTITION BY phase, metric) AS total FROM telemetry WHERE run_id = ?), "
            "s AS (SELECT count(DISTINCT phase) AS phases FROM t) "
            "SELECT phase, metric, t_s, value FROM t, s "
            "WHERE (n - 1) % greatest(1, CAST(ceil(total * phases / ?) AS BIGINT)) = 0 "
            "ORDER BY phase, metric, t_s",
            params=[run_id, float(max_points_per_metric)],
        )
    )
    return {"runs": runs, "phases": phases, "stalls": stalls, "samples": samples, "telemetry": telemetry,
            "samples_stored": int(stored_samples)}  # fmt: skip


def newest_breakdowns(con: Any, where: str, params: list[Any], limit: int) -> pd.DataFrame:
    """stall_breakdown rows of the newest `limit` runs matching `where` (on runs), newest first.

    The runs are picked on the runs table first and the view is read for those ids only: the view pivots the
    stalls of every run, which costs far more than finding a few ids.
    """
    ids = [
        row[0]
        for row in con.execute(
            f"SELECT run_id FROM runs WHERE {where or 'true'} "
            "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT ?",
            [*params, max(0, int(limit))],
        ).fetchall()
    ]
    if not ids:
        return relation_frame(con.sql("SELECT * FROM stall_breakdown LIMIT 0"))
    marks = ", ".join("?" for _ in ids)
    return relation_frame(
        con.sql(
            f"SELECT * FROM stall_breakdown WHERE run_id IN ({marks}) "
            "ORDER BY started_at DESC NULLS LAST, run_id DESC",
            params=ids,
        )
    )


def overview_counts(con: Any) -> tuple[Any, ...]:
    """(runs, completed runs, models, instances or hosts, the last start as a naive UTC timestamp,
    iterations)."""
    return con.execute(
        "SELECT count(*), count(*) FILTER (WHERE status = 'completed'), count(DISTINCT model), "
        "count(DISTINCT coalesce(instance, hostname)), CAST(max(started_at) AS TIMESTAMP), "
        "(SELECT count(*) FROM iterations) FROM runs"
    ).fetchone()


def recent_runs(con: Any, no_instance: str, limit: int) -> pd.DataFrame:
    """The newest `limit` runs of any status, `no_instance` for a run without an instance label."""
    return relation_frame(
        con.sql(
            "SELECT run_id, started_at, status, model, batch_size, workers_per_node, nodes, "
            "coalesce(nullif(trim(instance), ''), ?) AS instance, device, iteration_s, iteration_ci95_s, "
            "epoch_s, error "
            "FROM runs "
            "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT ?",
            params=[no_instance, int(limit)],
        )
    )
