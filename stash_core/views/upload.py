"""Upload: check result files and exports before storing them, and store them."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core import store
from stash_core.errors import NO_SPACE, StashError, UsageError, first_line
from stash_core.results.file import PROBE_KIND, upgrade_result
from stash_core.results.values import STORABLE, unreadable_json_reason
from stash_core.store import queries_upload
from stash_core.store.connection import DatabaseLocked
from stash_core.store.simulations import SIMULATION_KIND
from stash_core.views.breakdown import add_run_labels
from stash_core.views.upload_conflicts import stored_verdict, upload_conflict
from stash_core.views.upload_exports import assemble_exports
from stash_core.views.upload_exports import reason as _reason
from stash_core.views.upload_files import numbers_read, read_csv, read_parquet_bounded

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

    Each file is judged on its own: whatever goes wrong with one file (a value the store cannot hold, a
    preview that cannot be drawn, a bug) refuses that file with the reason and leaves the others as they are.
    """
    checks = [_check_one(name, data) for name, data in files]
    assemble_exports(checks)
    _say_repeated_runs(checks)
    stored: set[str] = set()
    run_ids = list(dict.fromkeys(run_id for check in checks if check.ok for run_id in check.run_ids))
    if db_path is not None and run_ids:  # before the preview: a file refused here is in none of it
        stored = queries_upload.stored_run_ids(db_path, run_ids)
        for check in (check for check in checks if check.ok and check.storable):  # as Store would refuse it
            # a stored run's content, or a new run's probe sets (which another run may hold already)
            verdicts = {doc["run_id"]: stored_verdict(db_path, doc)
                        for doc in check.docs if doc["run_id"] in stored or doc.get("probes")}  # fmt: skip
            if reason := next((conflict for conflict, _ in verdicts.values() if conflict), None):
                _refuse(check, reason)
                continue
            # a stored run without the samples this file holds is not "already stored": Store adds them
            completing = [run_id for run_id, (_, adds) in verdicts.items() if adds]
            if completing:
                stored -= set(completing)
                check.reason += (
                    f" - {', '.join(completing)} stored without the samples this file holds: Store adds them"
                )
    preview = _dry_run(checks)
    return UploadReport(checks=checks, preview=preview, already_stored=stored)


def _say_repeated_runs(checks: list[UploadCheck]) -> None:
    """A result file of a run an earlier file holds says so (the same file dropped twice was listed twice,
    and "Store 1 new run(s)" beside them with no word of why one)."""
    first_of: dict[str, str] = {}
    for check in checks:
        if not check.ok:
            continue
        again = [run_id for run_id in check.run_ids if run_id in first_of]
        if again and check.kind == "result":
            check.reason += f" - the same run as {first_of[again[0]]} above: stored once"
        for run_id in check.run_ids:
            first_of.setdefault(run_id, check.name)


class StoreOutcomes(list):
    """(file name, run_id, inserted) per run stored or already stored; `refused` holds (file name, run_id,
    reason) per run that could not be stored (the others are stored all the same)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[tuple[str, str, str]] = []


def store_uploads(db_path: Path | str, report: UploadReport) -> StoreOutcomes:
    """Ingest the storable runs of a checked upload, each on its own; (file name, run_id, inserted) per run,
    and in `.refused` the runs that the database refused (e.g. changed since the check) with the reason."""
    outcomes = StoreOutcomes()
    docs = list(report.storable_docs)
    for index, (name, doc) in enumerate(docs):
        try:
            inserted = store.ingest_result(db_path, doc, source_file=f"upload:{name}")
        except DatabaseLocked as exc:  # busy for the rest too: one wait of LOCK_TIMEOUT_S, not one per run
            busy = _reason(exc)
            outcomes.refused += [(rest, str(other.get("run_id")), busy) for rest, other in docs[index:]]
            break
        except Exception as exc:  # one run's failure leaves the others to be stored
            outcomes.refused.append((name, str(doc.get("run_id")), _reason(exc)))
            continue
        outcomes.append((name, doc["run_id"], inserted))
    return outcomes


def _check_one(name: str, data: bytes) -> UploadCheck:
    try:
        return _check_file(name, data)
    except Exception as exc:  # whatever breaks on this file refuses this file only
        return UploadCheck(name, False, f"cannot check it: {_reason(exc)}", kind="unknown")


def _refuse(check: UploadCheck, reason: str) -> None:
    check.ok = False
    check.reason = reason


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
    "simulations",
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
            return _check_table(name, read_parquet_bounded(data))
        if suffix == ".csv":
            return _check_table(name, read_csv(data))
    except UsageError as exc:
        return UploadCheck(name, False, str(exc), kind="unknown")
    except Exception as exc:  # pandas/pyarrow raise many kinds for a corrupt file
        return UploadCheck(name, False, f"cannot read it as {suffix[1:]}: {first_line(exc)}", kind="unknown")
    reason = f"unsupported file type {suffix or '(none)'}; upload .json, .parquet or .csv"
    return UploadCheck(name, False, reason,
                       kind="unknown")  # fmt: skip


def _check_json(name: str, data: bytes) -> UploadCheck:
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is no content
    except UnicodeDecodeError:
        return UploadCheck(name, False, "not UTF-8 text", kind="unknown")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        # lines as JSON Lines ends them: a U+2028 inside a text cell is no line break
        lines = [line for line in text.split("\n") if line.strip()]
        if len(lines) > 1:  # `stash export --format json` writes one object per line
            try:
                return _check_table(name, pd.DataFrame([json.loads(line) for line in lines]))
            except (json.JSONDecodeError, ValueError, TypeError):
                pass
        return UploadCheck(name, False, f"not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})",
                           kind="unknown")  # fmt: skip
    except (RecursionError, ValueError) as exc:  # as the command says it (results/file.py)
        return UploadCheck(name, False, unreadable_json_reason(exc), kind="unknown")
    if isinstance(doc, dict) and doc.get("kind") != "stash-profile":
        row = pd.DataFrame([doc])
        if _identify_table(name, row) is not None:  # a one-row JSON-lines export of any table
            return _check_table(name, row)
    if isinstance(doc, dict) and doc.get("kind") in _STORED_BY_INGEST:  # a Stash file, not a profile's
        what = _STORED_BY_INGEST[doc["kind"]]
        reason = f"{what}: store it with `stash ingest FILE`; this page stores result files and exports"
        return UploadCheck(name, False, reason, kind="unknown")
    try:
        doc = upgrade_result(doc)
    except UsageError as exc:
        reason = str(exc)
        if reason.startswith("not a Stash result file"):  # another tool's JSON: say what this page takes
            reason += f"; this page stores {STORABLE}"
        return UploadCheck(name, False, reason)
    summary_text = f"{doc['status']} run of {doc['spec'].get('model')} with {len(doc['phases'])} phase(s)"
    return UploadCheck(name, True, summary_text, docs=[doc], run_ids=[doc["run_id"]])


def _check_table(name: str, frame: pd.DataFrame) -> UploadCheck:
    table = _identify_table(name, frame)
    if table is None:
        return UploadCheck(name, False, "not a Stash export: its columns match none of the store's tables",
                           kind="unknown")  # fmt: skip
    try:
        frame = numbers_read(table, frame)
    except UsageError as exc:
        return UploadCheck(name, False, f"{table} table: {exc}", kind=f"export:{table}")
    check = UploadCheck(
        name, True, f"{table} table, {len(frame)} row(s)", kind=f"export:{table}", frame=frame
    )
    if table == "stall_breakdown":
        check.storable = False
        check.reason += " - for comparing here; upload runs (with phases, stalls, ...) to store runs"
        check.run_ids = [str(v) for v in frame["run_id"].dropna().unique()]
    elif table in _NOT_STORED_ALONE:  # part of a whole export folder: no reason to refuse it
        check.storable = False
        check.reason += f" - {_NOT_STORED_ALONE[table]}"
    return check


# Stash's other files, which `stash ingest` stores
_STORED_BY_INGEST = {
    PROBE_KIND: "a `stash probe` file",
    SIMULATION_KIND: "a `stash schedule` simulation file",
}
# Export tables stored from here only through the runs they belong to, or not at all.
_NOT_STORED_ALONE = {
    "models": "not stored from here: models come with their runs",
    "instances": "not stored from here: the catalog is edited on its own",
    "simulations": "not stored from here: simulations come from `stash schedule`",
    # a profile's probes go back with its run (import_export); a `stash probe` set has no run here
    "probes": "a profile's probes are stored with its run when the runs table comes with them; a `stash "
    "probe` set (no run) is not stored from here: ingest its probe file",
}


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
            rows = queries_upload.schema_columns(Path(folder) / "schema.duckdb")
        for table, column in rows:
            # exports made before a later version's columns lack them and are still whole
            if table in _EXPORT_TABLES and column not in store.LATER_COLUMNS.get(table, ()):
                _COLUMNS_CACHE.setdefault(table, set()).add(column)
    return _COLUMNS_CACHE


def _refuse_unless_no_room(check: UploadCheck, reason: str, folder: str) -> None:
    """Refuse the file for its reason; a full temporary folder is no fault of the file: the check stops there
    and says so (the Upload page shows it), nothing stored."""
    if NO_SPACE in reason:
        where = Path(folder).parent
        raise StashError(f"the temporary folder {where} is full ({NO_SPACE}): the files could not be "
                         "checked, nothing was stored; free some space and upload them again")  # fmt: skip
    _refuse(check, reason)


def _dry_run(checks: list[UploadCheck]) -> pd.DataFrame:
    """Ingest the runs into a scratch database (each on its own) and return their stall_breakdown rows; a file
    whose runs do not store, or whose rows cannot be previewed, is refused."""
    stored = pd.DataFrame(columns=["run_id"])
    with tempfile.TemporaryDirectory(prefix="stash-upload-") as folder:
        scratch = Path(folder) / "scratch.duckdb"
        seen: dict[str, tuple[str, dict[str, Any]]] = {}  # run_id: the first file holding it, its document
        for check in checks:
            if not check.ok or check.kind == "export:stall_breakdown":
                continue
            for doc in check.docs:
                first = seen.get(doc["run_id"])
                if first is not None and first[0] != check.name:  # the same content is a no-op at Store
                    if conflict := upload_conflict(first[0], first[1], doc):
                        _refuse(check, conflict)
                        break
                try:
                    store.ingest_result(scratch, doc)
                except UsageError as exc:  # one file's values refuse that file only
                    _refuse_unless_no_room(check, _reason(exc), folder)
                    break
                except Exception as exc:
                    _refuse(check, f"cannot store run {doc['run_id']}: {_reason(exc)}")
                    break
                seen.setdefault(doc["run_id"], (check.name, doc))
        if seen:
            stored, unreadable = _scratch_breakdown(scratch, sorted(seen))
            for check in checks:
                bad = [run_id for run_id in check.run_ids if run_id in unreadable]
                if check.ok and bad:
                    _refuse(check, f"run {bad[0]} stores but cannot be read back: {unreadable[bad[0]]}")
    parts = []
    for check in checks:
        if not check.ok:
            continue
        try:
            part = _preview_part(check, stored)
        except Exception as exc:  # e.g. a stall_breakdown export whose values make no table
            _refuse(check, f"cannot preview it: {_reason(exc)}")
            continue
        if not part.empty:
            parts.append(part)
    if not parts:
        return add_run_labels(pd.DataFrame(columns=["run_id", "source"]))
    preview = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    preview = preview.drop_duplicates(subset=["run_id"])
    if "started_at" in preview.columns and pd.api.types.is_datetime64_any_dtype(preview["started_at"]):
        preview = preview.sort_values("started_at", ascending=False, na_position="last", kind="stable")
    return preview.reset_index(drop=True)


def _scratch_breakdown(scratch: Path, run_ids: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The stall_breakdown rows of the scratch database, and {run_id: why} for runs whose rows cannot be read
    (read one by one only when reading them all at once fails)."""
    with store.connect(scratch, read_only=True) as con:
        try:
            return queries_upload.scratch_breakdown(con), {}
        except Exception:
            pass
        frames, unreadable = [], {}
        for run_id in run_ids:
            try:
                frames.append(queries_upload.scratch_breakdown(con, run_id))
            except Exception as exc:
                unreadable[run_id] = _reason(exc)
    frames = [frame for frame in frames if not frame.empty]
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id"])), unreadable


def _preview_part(check: UploadCheck, stored: pd.DataFrame) -> pd.DataFrame:
    """The preview rows of one file, labelled: its stall_breakdown table, or its runs as the scratch store
    shows them."""
    if check.kind == "export:stall_breakdown" and check.frame is not None:
        part = check.frame.assign(source=check.name)
    else:
        run_ids = {doc["run_id"] for doc in check.docs}
        part = stored[stored["run_id"].isin(run_ids)].assign(source=check.name)
    if part.empty:
        return part
    if "started_at" in part.columns:
        part["started_at"] = pd.to_datetime(part["started_at"], utc=True, errors="coerce")
    return add_run_labels(part.drop_duplicates(subset=["run_id"]))
