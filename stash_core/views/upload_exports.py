"""An upload's export tables (`stash export`'s runs, phases, stalls, iterations, telemetry) read together into
result documents: the runs table's check holds them, its companions' checks say what they add."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pandas as pd

from stash_core.cells import is_missing
from stash_core.errors import UsageError, first_line
from stash_core.results.file import upgrade_result
from stash_core.store.import_export import COMPANION_TABLES, docs_from_export


def reason(exc: BaseException) -> str:
    """One line on why: a UsageError's message, otherwise the exception's kind and first line."""
    if isinstance(exc, UsageError):
        return first_line(exc)
    text = first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def assemble_exports(checks: list[Any]) -> None:
    """Turn uploaded export tables into result documents: runs rows plus their phases, stalls, samples (the
    checks are upload.UploadCheck's, changed in place)."""
    tables: dict[str, pd.DataFrame] = {}
    for check in checks:
        if check.ok and check.kind.startswith("export:") and check.frame is not None:
            table = check.kind.split(":", 1)[1]
            tables[table] = pd.concat([tables[table], check.frame]) if table in tables else check.frame
    try:
        tables = {name: _once(name, frame) for name, frame in tables.items()}
    except UsageError as exc:  # two uploads disagree on a row: neither is taken
        for check in checks:
            if check.ok and check.kind.startswith("export:"):
                check.ok, check.reason = False, str(exc)
        return
    first_runs = next((c for c in checks if c.ok and c.kind == "export:runs" and c.frame is not None), None)
    companions = COMPANION_TABLES
    for check in checks:
        if not (check.ok and check.kind.startswith("export:")):
            continue
        table = check.kind.split(":", 1)[1]
        if table in companions and "runs" not in tables:
            check.ok = False
            check.reason = f"a {table} table adds nothing alone; upload it together with the runs table"
        elif table == "runs" and check is not first_runs:  # its rows are read with the first's
            check.reason = f"runs table, read together with {first_runs.name}"
        elif table == "runs":
            try:
                check.docs = [upgrade_result(doc) for doc in docs_from_export(tables)]
            except Exception as exc:  # a bad export refuses its runs table, nothing else
                check.ok, check.reason = False, f"runs table: {reason(exc)}"
                continue
            check.run_ids = [doc["run_id"] for doc in check.docs]
            check.reason = f"runs table with {len(check.docs)} run(s)" + (
                f", with {', '.join(t for t in companions if t in tables)}"
                if any(t in tables for t in companions)
                else ""
            )
            samples = [t for t in ("iterations", "telemetry") if t not in tables]
            if samples and check.docs:  # the figures stand without them; the samples are not stored
                check.reason += f" (no {' or '.join(samples)}: stored without those samples)"


# A row of each table by its key: one export dropped twice, or a CSV and a JSON export of one database
_ROW_KEYS = {
    "runs": ["run_id"], "phases": ["run_id", "phase"], "stalls": ["run_id", "stall"],
    "iterations": ["run_id", "phase", "iteration"], "telemetry": ["run_id", "phase", "metric", "t_s"],
}  # fmt: skip


def _once(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with a row given again (by its key, else by all its cells as text) read once, the first; a key
    given again with other content is refused (UsageError), as `stash ingest` refuses a run given twice."""
    key = [column for column in _ROW_KEYS.get(table, []) if column in frame.columns] or list(frame.columns)
    # each cell as text (astype(str) keeps a missing cell missing), a row's key cells joined
    keys = frame[key].map(str).agg("|".join, axis=1) if len(frame) else pd.Series(dtype=str)
    repeated = keys.duplicated(keep=False)
    for _, rows in frame[repeated].groupby(keys[repeated]):
        first = rows.iloc[0]
        for _, row in rows.iloc[1:].iterrows():
            other = next(
                (column for column in frame.columns if not _same_cell(first[column], row[column])), None
            )
            if other is not None:
                given = ", ".join(f"{column} {first[column]}" for column in key)
                raise UsageError(f"{table} tables give {given} twice, with other {other}: upload one of them")
    return frame[~keys.duplicated()]


def _same_cell(a: Any, b: Any) -> bool:
    """Whether two cells of one column hold the same value as a CSV, a JSON and a Parquet export write it (a
    number as text or as a number, a time in two spellings, a JSON column as text or as an object)."""
    missing_a, missing_b = _missing(a), _missing(b)
    if missing_a or missing_b:
        return missing_a and missing_b
    if isinstance(a, str) != isinstance(b, str):  # a JSON column: its text beside its object
        text, value = (a, b) if isinstance(a, str) else (b, a)
        with contextlib.suppress(ValueError, TypeError):
            if json.loads(text) == value:
                return True
    for read in (float, pd.Timestamp):
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            return read(a) == read(b)
    return str(a) == str(b)


def _missing(value: Any) -> bool:
    """No value: a CSV's empty cell reads as missing, whether the export wrote NULL or an empty text."""
    return value == "" if isinstance(value, str) else is_missing(value) or value is pd.NaT
