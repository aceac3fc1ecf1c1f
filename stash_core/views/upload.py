"""Upload: check result files and exports before storing them, and store them."""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.errors import UsageError, first_line
from stash_core.results.file import upgrade_result
from stash_core.store.import_export import COMPANION_TABLES, docs_from_export
from stash_core.views.breakdown import add_run_labels

# ---------------------------------------------------------------------------------------------------------
# Upload


@dataclass
class UploadCheck:
    """The verdict on one uploaded file."""

    name: str
    ok: bool
    reason: str  # why it was refused, or what it holds
    kind: str = "result"  # result | export:<table> | unknown
    docs: list[dict[str, Any]] = field(default_factory=list)  # result documents it yields (validated)
    run_ids: list[str] = field(default_factory=list)
    frame: pd.DataFrame | None = None  # the table of an export file
    storable: bool = True


@dataclass
class UploadReport:
    """Checks of all uploaded files and a stall_breakdown preview of the runs they hold."""

    checks: list[UploadCheck]
    preview: pd.DataFrame
    already_stored: set[str]

    @property
    def good(self) -> list[UploadCheck]:
        return [check for check in self.checks if check.ok]

    @property
    def bad(self) -> list[UploadCheck]:
        return [check for check in self.checks if not check.ok]

    @property
    def storable_docs(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (check.name, doc) for check in self.checks if check.ok and check.storable for doc in check.docs
        ]


def check_uploads(db_path: Path | str | None, files: Sequence[tuple[str, bytes]]) -> UploadReport:
    """Validate uploaded files (name, content) without writing to the database (None: do not read it either).

    JSON result files, and exports of `stash export` (Parquet, CSV or JSON lines; runs plus optionally
    phases, stalls, iterations and telemetry uploaded together, or a stall_breakdown table for comparing
    only). Every run is test-ingested into a scratch database, so a file that passes here also stores.
    """
    checks = [_check_file(name, data) for name, data in files]
    _assemble_exports(checks)
    preview = _dry_run(checks)
    stored: set[str] = set()
    run_ids = [run_id for check in checks if check.ok for run_id in check.run_ids]
    if db_path is not None and run_ids:
        with store.connect(db_path, read_only=True) as con:
            rows = con.execute(
                "SELECT run_id FROM runs WHERE list_contains(CAST(? AS VARCHAR[]), run_id)", [run_ids]
            ).fetchall()
        stored = {row[0] for row in rows}
    return UploadReport(checks=checks, preview=preview, already_stored=stored)


def store_uploads(db_path: Path | str, report: UploadReport) -> list[tuple[str, str, bool]]:
    """Ingest the storable runs of a checked upload; (file name, run_id, inserted) per run."""
    outcomes = []
    for name, doc in report.storable_docs:
        inserted = store.ingest_result(db_path, doc, source_file=f"upload:{name}")
        outcomes.append((name, doc["run_id"], inserted))
    return outcomes


_EXPORT_TABLES = (
    "runs",
    "phases",
    "stalls",
    "iterations",
    "telemetry",
    "stall_breakdown",
    "models",
    "instances",
    "probes",
)


def _check_file(name: str, data: bytes) -> UploadCheck:
    suffix = Path(name).suffix.lower()
    if not data:
        stem = Path(name).stem.lower()
        if suffix == ".json" and stem in _table_columns():
            # `stash export --format json` writes a table with no rows as an empty JSON-lines file.
            return _check_table(name, pd.DataFrame(columns=sorted(_table_columns()[stem])))
        return UploadCheck(name, False, "the file is empty", kind="unknown")
    try:
        if suffix == ".json":
            return _check_json(name, data)
        if suffix in (".parquet", ".pq"):
            return _check_table(name, pd.read_parquet(io.BytesIO(data)))
        if suffix == ".csv":
            return _check_table(name, pd.read_csv(io.BytesIO(data)))
    except UsageError as exc:
        return UploadCheck(name, False, str(exc), kind="unknown")
    except Exception as exc:  # pandas/pyarrow raise many kinds for a corrupt file
        return UploadCheck(name, False, f"cannot read it as {suffix[1:]}: {first_line(exc)}", kind="unknown")
    reason = f"unsupported file type {suffix or '(none)'}; upload .json, .parquet or .csv"
    return UploadCheck(name, False, reason,
                       kind="unknown")  # fmt: skip


def _check_json(name: str, data: bytes) -> UploadCheck:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return UploadCheck(name, False, "not UTF-8 text", kind="unknown")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1:  # `stash export --format json` writes one object per line
            try:
                return _check_table(name, pd.DataFrame([json.loads(line) for line in lines]))
            except (json.JSONDecodeError, ValueError, TypeError):
                pass
        return UploadCheck(name, False, f"not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})",
                           kind="unknown")  # fmt: skip
    if isinstance(doc, dict) and doc.get("kind") != "stash-profile" and "run_id" in doc and "model" in doc:
        return _check_table(name, pd.DataFrame([doc]))  # a one-row JSON-lines export
    try:
        doc = upgrade_result(doc)
    except UsageError as exc:
        return UploadCheck(name, False, str(exc))
    summary_text = f"{doc['status']} run of {doc['spec'].get('model')} with {len(doc['phases'])} phase(s)"
    return UploadCheck(name, True, summary_text, docs=[doc], run_ids=[doc["run_id"]])


def _check_table(name: str, frame: pd.DataFrame) -> UploadCheck:
    table = _identify_table(name, frame)
    if table is None:
        return UploadCheck(name, False, "not a Stash export: its columns match none of the store's tables",
                           kind="unknown")  # fmt: skip
    check = UploadCheck(
        name, True, f"{table} table, {len(frame)} row(s)", kind=f"export:{table}", frame=frame
    )
    if table == "stall_breakdown":
        check.storable = False
        check.reason += " - for comparing here; upload runs (with phases, stalls, ...) to store runs"
        check.run_ids = [str(v) for v in frame["run_id"].dropna().unique()]
    elif table in ("models", "instances", "probes"):
        # Part of a whole export folder: nothing to store from it (models come with the runs; the instance
        # catalog is edited on its own; probes are measured by `stash probe`), but no reason to refuse it.
        check.storable = False
        check.reason += (
            " - not stored from here (models come with their runs; the catalog is edited on its own;"
            " probes come from `stash probe`)"
        )
    return check


def _identify_table(name: str, frame: pd.DataFrame) -> str | None:
    columns = set(frame.columns)
    expected = _table_columns()
    matches = [table for table, wanted in expected.items() if wanted and wanted <= columns]
    if not matches:
        stem = Path(name).stem.lower()
        return stem if stem in expected and expected[stem] & columns == expected[stem] else None
    # The most specific table wins (stall_breakdown's columns include several of runs').
    return max(matches, key=lambda table: len(expected[table]))


_COLUMNS_CACHE: dict[str, set[str]] = {}


def _table_columns() -> dict[str, set[str]]:
    if not _COLUMNS_CACHE:
        with tempfile.TemporaryDirectory(prefix="stash-schema-") as folder:
            with store.connect(Path(folder) / "schema.duckdb") as con:
                rows = con.execute(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = 'main'"
                ).fetchall()
        for table, column in rows:
            # exports made before the later runs columns lack them and are still whole
            if table in _EXPORT_TABLES and not (table == "runs" and column in store.LATER_RUN_COLUMNS):
                _COLUMNS_CACHE.setdefault(table, set()).add(column)
    return _COLUMNS_CACHE


def _assemble_exports(checks: list[UploadCheck]) -> None:
    """Turn uploaded export tables into result documents: runs rows plus their phases, stalls, samples."""
    tables: dict[str, pd.DataFrame] = {}
    for check in checks:
        if check.ok and check.kind.startswith("export:") and check.frame is not None:
            table = check.kind.split(":", 1)[1]
            tables[table] = pd.concat([tables[table], check.frame]) if table in tables else check.frame
    companions = COMPANION_TABLES
    for check in checks:
        if not (check.ok and check.kind.startswith("export:")):
            continue
        table = check.kind.split(":", 1)[1]
        if table in companions and "runs" not in tables:
            check.ok = False
            check.reason = f"a {table} table adds nothing alone; upload it together with the runs table"
        elif table == "runs":
            try:
                check.docs = [upgrade_result(doc) for doc in docs_from_export(tables)]
            except UsageError as exc:
                check.ok = False
                check.reason = f"runs table: {exc}"
                continue
            check.run_ids = [doc["run_id"] for doc in check.docs]
            check.reason = f"runs table with {len(check.docs)} run(s)" + (
                f", with {', '.join(t for t in companions if t in tables)}"
                if any(t in tables for t in companions)
                else ""
            )


def _dry_run(checks: list[UploadCheck]) -> pd.DataFrame:
    """Ingest the runs into a scratch database (each on its own) and return their stall_breakdown rows."""
    frames = []
    with tempfile.TemporaryDirectory(prefix="stash-upload-") as folder:
        scratch = Path(folder) / "scratch.duckdb"
        seen: set[str] = set()
        for check in checks:
            if not check.ok:
                continue
            if check.kind == "export:stall_breakdown" and check.frame is not None:
                frames.append(check.frame.assign(source=check.name))
                continue
            for doc in check.docs:
                if doc["run_id"] in seen:
                    continue
                try:
                    store.ingest_result(scratch, doc)
                except UsageError as exc:
                    check.ok = False
                    check.reason = str(exc)
                    break
                seen.add(doc["run_id"])
        if seen:
            with store.connect(scratch, read_only=True) as con:
                stored = store.relation_frame(
                    con.sql("SELECT * FROM stall_breakdown ORDER BY started_at DESC")
                )
            names = {doc["run_id"]: check.name for check in checks if check.ok for doc in check.docs}
            frames.append(stored.assign(source=stored["run_id"].map(names)))
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return add_run_labels(pd.DataFrame(columns=["run_id", "source"]))
    preview = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if "started_at" in preview.columns:
        preview["started_at"] = pd.to_datetime(preview["started_at"], utc=True, errors="coerce")
    return add_run_labels(preview.drop_duplicates(subset=["run_id"]))
