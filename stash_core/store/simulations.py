"""Cluster-scheduling simulations in the store: one row per policy of a simulation (table `simulations`).

The document is a plain dict (what `stash schedule` writes to results/sim-*.json): simulation_id,
created_at, stash_version, trace, trace_format, jobs, cluster {switches, nodes_per_switch, gpus_per_node,
gpus}, fabric, tuning and policies[] of {policy, settings, metrics {...}, jct_cdf, timeline}. Ingesting the
same simulation again inserts nothing, one with other figures under its simulation_id is refused; one
transaction per simulation. `stash ingest` stores such a file too
(store/ingest.py reads it with results.file.load_document, then prepare_simulation).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.errors import NewerThanStash, UsageError
from stash_core.results.values import (
    check_identifier,
    check_not_a_path,
    check_timestamp,
    in_the_future,
    stored_moment,
)
from stash_core.sched_names import POLICIES, SYNTHETIC_TRACE, TRACE_FORMATS
from stash_core.store.connection import STORING, connect
from stash_core.store.rollback import rollback_if_open
from stash_core.terminal import unsafe_character

SIMULATION_KIND = "stash-simulation"
SIMULATION_SCHEMA_VERSION = 1  # what sched/report.py writes; a newer file holds what this Stash cannot read
_CLUSTER_SIZES = ("switches", "nodes_per_switch", "gpus_per_node", "gpus")  # the rows' order
_METRICS = ("makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "comm_overhead_s", "preemptions",
            "spread_jobs", "gpu_busy_share")  # fmt: skip
_COLUMNS = ("simulation_id", "policy", "created_at", "trace", "trace_format", "jobs", "switches",
            "nodes_per_switch", "gpus_per_node", "cluster_gpus", "fabric", "settings", "tuning", *_METRICS,
            "jct_cdf", "timeline", "stash_version", "source_file", "ingested_at")  # fmt: skip


DOCUMENT = "simulation document"


def simulation_rows(doc: dict[str, Any], source_file: str | None = None) -> list[tuple]:
    """The rows of one simulation document; UsageError naming what is missing or wrong (one line, the field
    by its place: `policies[0].metrics.makespan_s`)."""
    if not isinstance(doc, dict) or doc.get("kind") != SIMULATION_KIND:
        raise UsageError("not a simulation document (kind stash-simulation)")
    version = doc.get("schema_version")
    whole = isinstance(version, int) and not isinstance(version, bool)
    if not whole or not 1 <= version <= SIMULATION_SCHEMA_VERSION:
        newer = " - upgrade Stash" if whole and version > SIMULATION_SCHEMA_VERSION else ""
        most = SIMULATION_SCHEMA_VERSION
        refusal = NewerThanStash if newer else UsageError
        raise refusal(f"simulation has schema_version {version!r}; this Stash reads up to {most}{newer}")
    simulation_id = doc.get("simulation_id")
    if not isinstance(simulation_id, str) or not simulation_id.strip():
        raise UsageError("simulation document has an empty or non-text simulation_id")
    _check_name(simulation_id)
    cluster, policies = _object(_field(doc, "cluster"), "cluster"), _field(doc, "policies")
    if not isinstance(policies, list):
        raise UsageError(f"{DOCUMENT}: policies must be a list")
    created = _created_at(_field(doc, "created_at"))
    texts = [_text(_field(doc, key), key) for key in ("trace", "trace_format")]
    _one_of(texts[1], "trace_format", (*TRACE_FORMATS, SYNTHETIC_TRACE))
    tuning, version_text = (_text(doc.get(key), key, optional=True) for key in ("tuning", "stash_version"))
    sizes = {"jobs": _field(doc, "jobs"), **{f"cluster.{name}": _field(cluster, name, "cluster") for name in
                                          _CLUSTER_SIZES}}  # fmt: skip
    counts = [_count(value, name, least=1) for name, value in sizes.items()]
    base = (simulation_id, created, *texts, *counts, json.dumps(doc.get("fabric")))
    _check_policy_names(policies)
    rows, now = [], datetime.now(UTC)
    for index, entry in enumerate(policies):
        where = f"policies[{index}]"
        given = _object(_field(entry, "metrics", where), f"{where}.metrics")
        metrics = [_metric(_field(given, name, f"{where}.metrics"), f"{where}.metrics.{name}")
                   for name in _METRICS]  # fmt: skip
        settings = entry.get("settings")
        if settings is not None:  # its label is the policy's name on the page and in the table
            label = _object(settings, f"{where}.settings").get("label")
            _text(label, f"{where}.settings.label", optional=True)
        _check_series(entry.get("jct_cdf"), f"{where}.jct_cdf", width=2)
        _check_series(entry.get("timeline"), f"{where}.timeline", width=3)
        series = (json.dumps(entry.get("jct_cdf")), json.dumps(entry.get("timeline")))
        rows.append((*base[:1], entry["policy"], *base[1:], json.dumps(entry.get("settings")), tuning,
                     *metrics, *series, version_text, source_file, now))  # fmt: skip
    if not rows:
        raise UsageError("simulation document has no policies")
    return rows


def _check_name(simulation_id: str) -> None:
    """A simulation is found and shown by its id, as a run by its run_id: the same rules."""
    check_identifier("simulation_id", simulation_id, DOCUMENT)
    check_not_a_path("simulation_id", simulation_id, DOCUMENT)


def _field(container: dict[str, Any], key: str, where: str = "") -> Any:
    if key not in container:
        raise UsageError(f"{DOCUMENT}: missing field {f'{where}.{key}' if where else key}")
    return container[key]


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{DOCUMENT}: {where} must be an object, got {_shown(value)}")
    return value


def _text(value: Any, where: str, optional: bool = False) -> str | None:
    """Text that is shown (a trace's name, the tuning): no control or bidi characters."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{DOCUMENT}: {where} must be text, got {_shown(value)}")
    character = unsafe_character(value)
    if character:
        raise UsageError(f"{DOCUMENT}: {where} holds the control character {character}")
    return value


def _one_of(value: str, where: str, names: tuple[str, ...]) -> None:
    """A name the simulator gives (a policy, a trace format): another was stored and shown as its own."""
    if value not in names:
        raise UsageError(f"{DOCUMENT}: {where} is {_shown(value)}; expected one of {', '.join(names)}")


def _check_series(value: Any, where: str, width: int) -> None:
    """A curve the Schedule page draws: null, or a list of [number, ...] rows of `width` numbers."""
    if value is None:
        return
    rows = value if isinstance(value, list) else None
    if rows is None or not all(
        isinstance(row, list) and len(row) == width and all(_is_number(v) for v in row) for row in rows
    ):
        raise UsageError(f"{DOCUMENT}: {where} must be a list of rows of {width} numbers")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    return f"{value!r:.40}"


def _created_at(text: Any) -> datetime:
    """A simulation's creation time, checked as a run's start is: within what the store and the pages hold,
    and not in the future (a day's leeway for another machine's clock); one dated 9999 was listed as the
    newest for good."""
    check_timestamp("created_at", text, required=True, document="simulation document")
    if in_the_future(stored_moment(text)):
        raise UsageError(f"simulation document: created_at {text!r} is in the future")
    return datetime.fromisoformat(text)


@dataclass(frozen=True)
class PreparedSimulation:
    """A simulation's rows, checked, ready to insert (as ingest_rows.PreparedRun is a run's)."""

    simulation_id: str
    rows: list[tuple]


def prepare_simulation(doc: Any, source_file: str | None = None) -> PreparedSimulation:
    """The checked rows of a simulation document; UsageError naming what is missing or wrong."""
    rows = simulation_rows(doc, source_file)
    return PreparedSimulation(doc["simulation_id"], rows)


def ingest_simulation(db_path: Path | str, doc: dict[str, Any], source_file: str | None = None) -> bool:
    """Store a simulation; True when inserted, False when it was stored already."""
    prepared = prepare_simulation(doc, source_file)
    with connect(db_path) as con:
        return insert_simulation(con, prepared)


# What a simulation is and what it found, compared when its simulation_id is given again (its curves and
# timeline follow from them; where the file came from and when it was stored are not content).
_COMPARED = ("policy", "trace", "trace_format", "jobs", "switches", "nodes_per_switch", "gpus_per_node",
             "cluster_gpus", "fabric", "settings", "tuning", *_METRICS)  # fmt: skip
_COMPARED_JSON = ("fabric", "settings")


def insert_simulation(con: Any, prepared: PreparedSimulation) -> bool:
    """Insert a simulation's rows in one transaction on an open connection; False when its simulation_id is
    stored already with the same figures (idempotent), UsageError when with others (nothing overwritten)."""
    with STORING:  # the check and the insert, one thread of this process at a time
        return _insert_simulation(con, prepared)


def simulation_conflict(con: Any, prepared: PreparedSimulation) -> str | None:
    """Why a simulation is refused where its simulation_id is stored with other figures; None when it is not
    stored or stored with the same."""
    return _conflict_with(_stored_figures(con, prepared.simulation_id), prepared)


def _stored_figures(con: Any, simulation_id: str) -> list[tuple]:
    """The compared columns of a stored simulation's rows; none when it is not stored."""
    picked = ", ".join(f"CAST({c} AS VARCHAR)" if c in _COMPARED_JSON else c for c in _COMPARED)
    query = f"SELECT {picked} FROM simulations WHERE simulation_id = ?"
    return con.execute(query, [simulation_id]).fetchall()


def _conflict_with(stored: list[tuple], prepared: PreparedSimulation) -> str | None:
    differ = _differences(stored, _compared(prepared)) if stored else []
    if not differ:
        return None
    return (
        f"simulation {prepared.simulation_id} is already stored with other {', '.join(differ)}; refused, "
        "nothing was overwritten (give it another simulation_id to keep both)"
    )


def _insert_simulation(con: Any, prepared: PreparedSimulation) -> bool:
    stored = _stored_figures(con, prepared.simulation_id)  # read once: the check and whether to insert
    if conflict := _conflict_with(stored, prepared):
        raise UsageError(conflict)
    if stored:
        return False
    marks = ", ".join("?" for _ in _COLUMNS)
    con.execute("BEGIN TRANSACTION")
    try:
        con.executemany(f"INSERT INTO simulations ({', '.join(_COLUMNS)}) VALUES ({marks})", prepared.rows)
        con.execute("COMMIT")
    except Exception:
        rollback_if_open(con)  # a failed COMMIT (a full disk) says why, not "no transaction is active"
        raise
    return True


def simulation_differences(first: PreparedSimulation, second: PreparedSimulation) -> list[str]:
    """The compared columns in which two files' rows of one simulation_id differ."""
    return _differences(_compared(first), _compared(second))


def _compared(prepared: PreparedSimulation) -> list[tuple]:
    at = [_COLUMNS.index(column) for column in _COMPARED]
    return [tuple(row[index] for index in at) for row in prepared.rows]


def _differences(stored: list[tuple], given: list[tuple]) -> list[str]:
    """The compared columns in which two sets of a simulation's rows differ (policies matched by name)."""

    def plain(row: tuple) -> dict[str, Any]:
        values = dict(zip(_COMPARED, row, strict=True))
        for column in _COMPARED_JSON:
            text = values[column]
            values[column] = json.loads(text) if isinstance(text, str) else text
        return values

    old = {row[0]: plain(row) for row in stored}
    new = {row[0]: plain(row) for row in given}
    if set(old) != set(new):
        return ["policies"]
    return [column for column in _COMPARED if any(old[p][column] != new[p][column] for p in old)]


def simulations_frame(db_path: Path | str, limit: int = 500) -> pd.DataFrame:
    """The newest `limit` stored simulations, newest first, each with all its policies (one row per policy,
    JSON columns as text); no rows for a database written before the simulations table existed (schema
    version 4). `frame.attrs["simulations_stored"]` counts every stored simulation."""
    with connect(db_path, read_only=True) as con:
        present = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = 'simulations'"
        ).fetchall()[0][0]
        if not present:
            frame = pd.DataFrame(columns=list(_COLUMNS))
            frame.attrs["simulations_stored"] = 0
            return frame
        picked = [f"CAST({c} AS VARCHAR) AS {c}" if c.endswith("_at") else c for c in _COLUMNS]
        # The limit counts simulations, not rows: counted in rows, the oldest simulation listed lost some of
        # its policies, and the page then named the best of those left.
        cursor = con.execute(
            "WITH newest AS (SELECT simulation_id FROM simulations GROUP BY simulation_id "
            "ORDER BY max(created_at) DESC, simulation_id LIMIT ?) "
            f"SELECT {', '.join(picked)} FROM simulations WHERE simulation_id IN (SELECT * FROM newest) "
            "ORDER BY created_at DESC, simulation_id, policy",
            [int(limit)],
        )
        names = [d[0] for d in cursor.description]
        frame = pd.DataFrame(cursor.fetchall(), columns=names)
        stored = con.execute("SELECT count(DISTINCT simulation_id) FROM simulations").fetchall()[0][0]
        frame.attrs["simulations_stored"] = int(stored)
        return frame


INT32_MAX = 2**31 - 1  # the INTEGER columns' largest value


def _metric(value: object, where: str) -> float:
    """A policy's figure as stored: finite and not negative (times, counts); a count whole and an INTEGER;
    the GPU busy share at most 1."""
    name = where.rsplit(".", 1)[-1]
    if name in ("preemptions", "spread_jobs"):
        return _count(value, where, least=0)
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise UsageError(f"{DOCUMENT}: {where} is {_shown(value)}; expected a number of at least 0")
    if name == "gpu_busy_share" and value > 1 + 1e-9:
        raise UsageError(f"{DOCUMENT}: {where} is {_shown(value)}; expected a share from 0 to 1")
    return float(value)


def _count(value: object, where: str, least: int) -> int:
    """A whole number from `least` to INT32_MAX (an INTEGER column), else UsageError naming it."""
    whole = _is_number(value) and math.isfinite(value) and value == int(value)  # type: ignore[arg-type]
    if not whole or not least <= value <= INT32_MAX:  # type: ignore[operator]
        raise UsageError(
            f"{DOCUMENT}: {where} is {_shown(value)}; expected a whole number from {least} to {INT32_MAX}"
        )
    return int(value)  # type: ignore[call-overload]


def _check_policy_names(policies: list) -> None:
    """Each policy an object named once, by non-empty text: a row's key is (simulation_id, policy)."""
    names = []
    for index, entry in enumerate(policies):
        name = _object(entry, f"policies[{index}]").get("policy")
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"{DOCUMENT}: policies[{index}].policy is {_shown(name)}; expected a name")
        names.append(_text(name, f"policies[{index}].policy"))
        _one_of(name, f"policies[{index}].policy", POLICIES)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"{DOCUMENT}: policy {twice[0]!r} is given twice")
