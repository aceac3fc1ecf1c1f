"""Result files: one self-contained, versioned JSON document per profile.

The format is described in docs/schema.md (section "Result file", rendered from stash_core/results/doc.py).
This module writes result files atomically, reads them back, migrates documents of older schema versions
forward and checks that a document has the shape the store relies on; it also checks the probe documents of
`stash probe` (same SCHEMA_VERSION). Every problem a user can cause (missing, truncated, foreign or too new
file) ends in a one-line UsageError.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stash_core.analysis.stalls import REMAINDER, with_remainder
from stash_core.errors import NewerThanStash, UsageError
from stash_core.results.document import ResultDocument, check_ranges
from stash_core.results.phase_series import check_samples, check_telemetry
from stash_core.results.probe import PROBE_BACKENDS, check_probe_set
from stash_core.results.values import (
    check_identifier,
    check_kind,
    check_numbers,
    check_spec_layout,
    check_timestamp,
    check_tree,
    in_the_future,
    printed_by,
    stored_moment,
    unreadable_json_reason,
)
from stash_core.spec import DEVICES
from stash_core.spec_parse import instance_name_problem
from stash_core.units import STALLS, json_safe  # noqa: F401 - json_safe re-exported
from stash_core.userfiles import read_user_bytes, write_json_atomic

# The one schema version of result and probe documents: whatever writes one stamps it with this constant.
SCHEMA_VERSION = 1
RESULT_KIND = "stash-profile"
PROBE_KIND = "stash-probe"

# A parsed result or probe document (results/document.py names its keys); upgrade_result and validate_result
# check its shape.

RUN_STATUSES = ("completed", "failed", "interrupted")
PHASE_STATUSES = ("completed", "failed", "skipped", "interrupted")
STALL_STATUSES = ("measured", "clamped_zero", "negative", "not_measured", "not_separable")
STALL_NAMES = STALLS
LAUNCH_NUMBERS = (
    "mean_s",
    "ci95_s",
    "iterations",
    "warmup_iterations",
    "wall_s",
    "resident_fraction_start",
    "other_cores",
)

REQUIRED_KEYS = ("schema_version", "kind", "run_id", "status", "started_at", "spec", "phases")
MAX_RESULT_BYTES = 256 * 2**20  # a long run with dense telemetry is tens of MB; read, some 14x that

# MIGRATIONS[v] turns a document of schema_version v into one of version v + 1. Version 1 is the first
# version, so there is nothing to migrate yet; a future version 2 adds `MIGRATIONS[1] = _v1_to_v2`.
MIGRATIONS: dict[int, Callable[[ResultDocument], ResultDocument]] = {}


def results_dir_of(db_path: Path | str) -> Path:
    """`results/` beside the database, wherever a profile starts (`results-files/` by one named results)."""
    folder = Path(db_path).parent / "results"
    return folder.with_name("results-files") if folder.name == Path(db_path).name else folder


def default_result_path(run_id: str, results_dir: Path = Path("results")) -> Path:
    """Where the result file of `run_id` goes by default: `<results_dir>/<run_id>.json`."""
    if not run_id or "/" in run_id or "\\" in run_id or run_id in (".", ".."):
        raise UsageError(f"run id {run_id!r} cannot be used as a file name")
    return Path(results_dir) / f"{run_id}.json"


def write_result_atomic(path: Path, doc: ResultDocument) -> Path:
    """Write `doc` as JSON to `path` so that readers see either the old file or the whole new one (through
    links, never onto a special file, fsynced); NaN and inf become null (not valid JSON), parent
    directories are created."""
    return write_json_atomic(path, doc, "result file")


def check_replaceable(path: Path, flag: str) -> tuple[str, str] | None:
    """Refuse (one line) an output path that holds a file other than a Stash result or probe file: `--out`
    would replace it (a database, a script, a CSV). An empty file, or none, is fine; a special file is
    refused by writable_target. Returns the kind and id (run or probe id) of the document it would replace,
    so the caller can see whether that document is kept elsewhere; None when there is none."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        doc = _read_json(path)
    except UsageError:
        doc = None
    if not (isinstance(doc, dict) and doc.get("kind") in (RESULT_KIND, PROBE_KIND) and "run_id" in doc):
        raise UsageError(
            f"{flag} {path} holds a file that is not a Stash result file; writing there would replace it: "
            "choose another path"
        )
    # a run's own file, named after it (a link so named, or a link to it): another run would lie there
    if f"{doc['run_id']}.json" in (path.name, path.resolve().name):
        raise UsageError(f"{flag} {path} is the result file of run {doc['run_id']}: choose another path")
    doc_id = doc.get("probe_id") if doc["kind"] == PROBE_KIND else doc["run_id"]
    return (doc["kind"], str(doc_id)) if doc_id else None


def load_result(path: Path) -> ResultDocument:
    """Read, migrate to the current schema version and validate one result file; UsageError "<path>:
    <problem>" for a missing, unreadable, truncated, foreign, too new or incomplete file."""
    path = Path(path)
    doc = _read_json(path)
    try:
        return upgrade_result(doc)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def load_document(path: Path, other_kinds: tuple[str, ...] = ()) -> ResultDocument:
    """A result file (migrated and validated as by load_result) or a probe file of `stash probe` (checked by
    check_probe); UsageError "<path>: <problem>" otherwise. A document of one of `other_kinds` (a simulation
    file, for the store to check) is returned as read, so that the file is read once."""
    path = Path(path)
    doc = _read_json(path)
    if isinstance(doc, dict) and doc.get("kind") in other_kinds:
        return doc
    check_kind(path, doc, (RESULT_KIND, PROBE_KIND, *other_kinds))
    try:
        if isinstance(doc, dict) and doc.get("kind") == PROBE_KIND:
            check_probe(doc)
            return doc
        return upgrade_result(doc)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


EXPORT_TABLE = "the dashboard's Upload page stores an export's tables, `stash ingest` result files"


def _read_json(path: Path) -> Any:
    raw = read_user_bytes(path, "result file", MAX_RESULT_BYTES)
    if raw[:4] == b"PAR1":
        raise UsageError(
            f"{path}: a Parquet file (as `stash export` writes a table), not a result file: {EXPORT_TABLE}"
        )
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark, as an editor may save it, is no content
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a Stash result file (not UTF-8 text)") from None
    if not text.strip():
        raise UsageError(f"{path}: result file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if _json_lines(text):
            raise UsageError(
                f"{path}: one JSON object per line (as `stash export --format json` writes a table), not a "
                f"result file: {EXPORT_TABLE}"
            ) from None
        if path.suffix.lower() == ".csv":
            raise UsageError(f"{path}: a CSV file, not a result file: {EXPORT_TABLE}") from None
        raise UsageError(
            f"{path}: not valid JSON (truncated or corrupt at line {exc.lineno} column {exc.colno}: "
            f"{exc.msg})"
        ) from None
    except (RecursionError, ValueError) as exc:
        raise UsageError(f"{path}: {unreadable_json_reason(exc)}") from None


def _json_lines(text: str) -> bool:
    """Whether `text` is JSON Lines: its first two lines each a JSON object."""
    lines = [line for line in text.split("\n")[:2] if line.strip()]
    try:
        return len(lines) == 2 and all(isinstance(json.loads(line), dict) for line in lines)
    except ValueError:
        return False


def check_probe(doc: Any) -> None:
    """Raise UsageError (one line) unless `doc` is a probe document of `stash probe` this Stash can read and
    store: the checks of a result file's own fields, for its probe set (results/probe.py)."""
    if not isinstance(doc, dict) or doc.get("kind") != PROBE_KIND:
        raise UsageError(f'not a Stash probe (no "kind": "{PROBE_KIND}")')
    version = doc.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(f"probe has schema_version {version!r}; this Stash reads up to {SCHEMA_VERSION}")
    if version < 1:
        raise UsageError(f"probe has schema_version {version}, which never existed")
    probe_id = doc.get("probe_id")
    if not isinstance(probe_id, str) or not probe_id.strip():
        raise UsageError("probe has an empty or non-text probe_id")
    check_tree(doc, "probe")  # before anything walks it: a hostile nesting cannot exhaust the stack
    check_probe_set(doc, "probe")


def upgrade_result(doc: Any) -> ResultDocument:
    """Check that `doc` is a Stash result, migrate it forward to SCHEMA_VERSION and validate it."""
    if not isinstance(doc, dict) or doc.get("kind") != RESULT_KIND:
        raise UsageError(printed_by(doc) or f'not a Stash result file (no "kind": "{RESULT_KIND}")')
    version = doc.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise UsageError(f"result file has no integer schema_version (got {version!r})")
    if version > SCHEMA_VERSION:
        raise NewerThanStash(
            f"result file has schema_version {version}; this Stash reads up to {SCHEMA_VERSION}"
            " - upgrade Stash"
        )
    if version < 1:
        raise UsageError(f"result file has schema_version {version}, which never existed")
    while version < SCHEMA_VERSION:
        doc = MIGRATIONS[version](doc)
        version += 1
        doc["schema_version"] = version
    validate_result(doc)
    return _with_remainder_entry(doc)


def _with_remainder_entry(doc: ResultDocument) -> ResultDocument:
    """A breakdown written before the remainder existed (no `unattributed` entry; its `unattributed_s`, if
    any, of the old meaning) given the remainder that closes it, as the store computes it on ingest: every
    reader of the file (the Python API, `stash show`, the store) then gives one remainder."""
    breakdown = doc.get("breakdown")
    if isinstance(breakdown, dict) and not isinstance(breakdown.get(REMAINDER), dict):
        return {**doc, "breakdown": with_remainder(breakdown)}  # the caller's document left as it is
    return doc


def validate_result(doc: Any) -> None:
    """Raise UsageError (one line) unless `doc` is a current-version result document the store can ingest."""
    if not isinstance(doc, dict) or doc.get("kind") != RESULT_KIND:
        raise UsageError(f'not a Stash result file (no "kind": "{RESULT_KIND}")')
    missing = [key for key in REQUIRED_KEYS if key not in doc]
    if missing:
        raise UsageError(f"result file is missing required key(s): {', '.join(missing)}")
    if doc["schema_version"] != SCHEMA_VERSION:
        raise UsageError(f"result has schema_version {doc['schema_version']!r}, expected {SCHEMA_VERSION}")
    run_id = doc["run_id"]
    if not isinstance(run_id, str) or not run_id.strip():
        raise UsageError("result file has an empty or non-text run_id")
    try:
        _validate_body(doc)
    except UsageError as error:
        # Name the run, so that one refused file among many is found (only an id that is safe to print).
        text = str(error)
        printable = run_id.isascii() and run_id.isprintable() and run_id == run_id.strip()
        if text.startswith("result file") and printable and len(run_id) <= 80:
            raise UsageError(text.replace("result file", f"result file of run {run_id}", 1)) from None
        raise


def _validate_body(doc: dict) -> None:
    check_tree(doc)
    _check_identifiers(doc)
    _check_choice("status", doc["status"], RUN_STATUSES)
    check_timestamp("started_at", doc["started_at"], required=True)
    check_timestamp("finished_at", doc.get("finished_at"), required=False)
    _check_order(doc["started_at"], doc.get("finished_at"))
    if not isinstance(doc["spec"], dict):
        raise UsageError("result file: spec must be an object")
    check_spec_layout(doc["spec"])
    for key in ("model", "fingerprint"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise UsageError(f"result file: {key} must be an object or null")
    if not isinstance(doc["phases"], list):
        raise UsageError("result file: phases must be a list")
    seen: set[str] = set()
    for index, phase in enumerate(doc["phases"]):
        _validate_phase(index, phase, seen)
    breakdown = doc.get("breakdown")
    if breakdown is not None:
        _validate_breakdown(breakdown)
    _check_probes(doc.get("probes"))
    hosts = doc.get("hosts")  # what each remote host reported: stored whole (runs.hosts)
    if hosts is not None and not (isinstance(hosts, list) and all(isinstance(host, dict) for host in hosts)):
        raise UsageError("result file: hosts must be a list of objects or null")
    check_ranges(doc)


def _check_probes(probes: Any) -> None:
    """A profile's probe sets: a list of objects, each held to what a probe file is."""
    if probes is None:
        return
    if not isinstance(probes, list) or not all(isinstance(probe, dict) for probe in probes):
        raise UsageError("result file: probes must be a list of objects")
    for index, probe in enumerate(probes):
        check_probe_set(probe, "result file", f"probes[{index}].")


def _validate_phase(index: int, phase: Any, seen: set[str]) -> None:
    if not isinstance(phase, dict) or not isinstance(phase.get("name"), str) or not phase["name"]:
        raise UsageError(f"result file: phase #{index} has no name")
    name = phase["name"]
    if name in seen:
        raise UsageError(f"result file: phase {name} appears twice")
    seen.add(name)
    if "status" in phase:
        _check_choice(f"phase {name} status", phase["status"], PHASE_STATUSES)
    check_identifier(f"phase {name!r} name", name)
    for key in ("iteration_s", "parts_mean_s", "samples", "telemetry", "pooled"):
        if phase.get(key) is not None and not isinstance(phase[key], dict):
            raise UsageError(f"result file: phase {name} {key} must be an object or null")
    _validate_launches(name, phase.get("launches"))
    mean_s = (phase.get("iteration_s") or {}).get("mean")
    check_samples(name, phase.get("samples") or {}, mean_s, phase.get("launches"))
    check_telemetry(name, phase.get("telemetry") or {})


def _validate_breakdown(breakdown: Any) -> None:
    if not isinstance(breakdown, dict):
        raise UsageError("result file: breakdown must be an object or null")
    stalls = {} if breakdown.get("stalls") is None else breakdown["stalls"]
    if not isinstance(stalls, dict):  # an empty list too: it read as a run without stalls
        raise UsageError("result file: breakdown.stalls must be an object")
    for stall, entry in stalls.items():
        check_identifier("breakdown stall name", stall)
        if stall not in STALL_NAMES:  # the store and the pages know these five only
            raise UsageError(f"result file: breakdown stall {stall!r} is none of {', '.join(STALL_NAMES)}")
        if not isinstance(entry, dict):
            raise UsageError(f"result file: breakdown stall {stall} must be an object")
        if entry.get("status") is not None:
            _check_choice(f"stall {stall} status", entry["status"], STALL_STATUSES)
    warnings = breakdown.get("warnings")
    if warnings is not None and not isinstance(warnings, list):
        raise UsageError("result file: breakdown.warnings must be a list")


RUN_DEVICES, RUN_BACKENDS = DEVICES, PROBE_BACKENDS  # "auto": a run that failed before choosing one


def _check_choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"result file: {what} is {value!r:.40}; expected one of {', '.join(allowed)}")


def _check_order(started: str, finished: str | None) -> None:
    """started_at not in the future (a day's leeway for another machine's clock), finished_at not before it
    (both already checked as ISO 8601 times)."""
    start = stored_moment(started)  # as the store will hold them (store/ingest_values.utc_text)
    if in_the_future(start):
        raise UsageError(f"result file: started_at {started!r} is in the future; a run starts when it ran")
    if finished is not None and stored_moment(finished) < start:
        raise UsageError(f"result file: finished_at {finished!r} is before started_at {started!r}")


def _check_identifiers(doc: dict) -> None:
    """The names a run is found and shown by: text of sensible length, no control or bidi characters."""
    check_identifier("run_id", doc["run_id"])
    for section, keys in (("spec", ("model", "instance", "device", "backend")), ("model", ("name", "kind")),
                          ("fingerprint", ("hostname", "instance"))):  # fmt: skip
        values = doc.get(section)
        for key in keys if isinstance(values, dict) else ():
            if values.get(key) is not None:
                check_identifier(f"{section}.{key}", values[key])
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    for key, allowed in (("device", RUN_DEVICES), ("backend", RUN_BACKENDS)):  # what a run ran on and with
        if spec.get(key) is not None:
            _check_choice(f"spec.{key}", spec[key], allowed)
    instance = spec.get("instance")
    problem = instance_name_problem(instance) if isinstance(instance, str) else None
    if problem:  # as `stash profile --instance` refuses it: no --instances could name it
        raise UsageError(f"result file: spec.instance {instance[:80]!r} {problem}")


def _validate_launches(name: str, launches: Any) -> None:
    """A run launched in rounds keeps each launch's figures: a list of objects, each with its round."""
    if not isinstance(launches, list | None):
        raise UsageError(f"result file: phase {name} launches must be a list or null")
    for index, launch in enumerate(launches or []):
        where = f"phase {name} launches[{index}]"
        round_index = launch.get("round") if isinstance(launch, dict) else None
        if type(round_index) is not int or not 0 <= round_index <= 10**6:
            raise UsageError(f"result file: {where} must be an object whose round is a whole number from 0")
        check_numbers(f"{where} ({', '.join(LAUNCH_NUMBERS)})", [launch.get(key) for key in LAUNCH_NUMBERS])
