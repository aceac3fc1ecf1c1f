"""Exporting the store: one file per table and view, in Parquet, CSV or newline-delimited JSON."""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from pathlib import Path

import duckdb

from stash_core.errors import StashError, UsageError, first_line, write_failure
from stash_core.exits import corruption_line, is_database_corruption, is_database_io_error
from stash_core.pathargs import required_path
from stash_core.results.file import results_dir_of
from stash_core.store.connection import connect, is_stand_in
from stash_core.store.console_files import mark_owner, remove_stale_folders
from stash_core.store.dbfile import check_duckdb_path
from stash_core.store.export_targets import refuse_replacing_others, refuse_result_folder
from stash_core.store.schema_template import copy_schema
from stash_core.store.sql_names import quoted_name
from stash_core.terminal import FORMULA_LEADS, escaped_characters
from stash_core.userfiles import nearest_existing

# DuckDB COPY options per format. JSON is newline-delimited (one object per line, "JSON Lines"), which
# streams and appends well; read it with pandas.read_json(path, lines=True, precise_float=True) or DuckDB
# read_json.
# Where an export's files are written before they are moved into place, in the export's folder.
STAGING_PREFIX = ".stash-export-"
EXPORT_FORMATS = {
    "parquet": ("parquet", "FORMAT parquet"),
    "csv": ("csv", "FORMAT csv, HEADER true"),
    "json": ("json", "FORMAT json"),
}

# Deterministic row order makes exports comparable between runs of the command.
EXPORTED = {
    "runs": "started_at, run_id",
    "phases": "run_id, phase_index, phase",
    "iterations": "run_id, phase, iteration",
    "telemetry": "run_id, phase, metric, t_s",
    "stalls": "run_id, stall",
    "models": "name",
    "instances": "name",
    "probes": "started_at, probe_id, kind, size_bytes",
    "simulations": "created_at, simulation_id, policy",
    "stall_breakdown": "started_at, run_id",
}


def numeric_columns(table: str) -> frozenset[str]:
    """The columns of an exported table (or view) that hold numbers (integers, doubles): what an upload of
    it reads as numbers, cell by cell."""
    return frozenset(name for name, kind in _column_kinds(table) if kind.startswith(_NUMBER_KINDS))


def text_columns(table: str) -> frozenset[str]:
    """The columns of an exported table (or view) that do not hold numbers (text, times, JSON)."""
    return frozenset(name for name, kind in _column_kinds(table) if not kind.startswith(_NUMBER_KINDS))


def json_columns(table: str) -> frozenset[str]:
    """The columns of an exported table (or view) that hold JSON: a CSV holds their text as it is (valid JSON
    for any reader; JSON escapes its own control characters and backslashes)."""
    return frozenset(name for name, kind in _column_kinds(table) if kind == "JSON")


_NUMBER_KINDS = ("INTEGER", "BIGINT", "SMALLINT", "DOUBLE", "FLOAT", "REAL", "DECIMAL", "HUGEINT", "UBIGINT")


@functools.cache
def _column_kinds(table: str) -> tuple[tuple[str, str], ...]:
    """(column, its type in capitals) of an exported table or view, read from a new database's schema."""
    with duckdb.connect() as con:  # the schema of a new database, in memory
        copy_schema(con)
        rows = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [table]
        ).fetchall()
    return tuple((name, str(kind).upper()) for name, kind in rows)


def table_of_row(keys: set[str]) -> str | None:
    """The exported table (or view) whose columns `keys` all are, at least two of them: what one line of a
    JSON export holds. None when no table has them all."""
    if len(keys) < 2:
        return None
    with duckdb.connect() as con:  # the schema of a new database, in memory
        copy_schema(con)
        for name in EXPORTED:
            columns = {column[0] for column in con.execute(f"SELECT * FROM {name} LIMIT 0").description}
            if keys <= columns:
                return name
    return None


def export(db_path: Path | str, fmt: str, out_dir: Path | str) -> list[Path]:
    """Write every table and view (EXPORTED) to `out_dir/<name>.<fmt>`; returns the paths written.

    Files are written into a temporary folder inside `out_dir` first and moved into place only when all
    of them succeeded, so a failure leaves no partial export behind. Files of the same name are replaced
    only where they are an earlier export of the same table (export_targets): anything else is refused.
    """
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"unknown export format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    suffix, options = EXPORT_FORMATS[fmt]
    db_path, out_dir = required_path("db_path", db_path), required_path("out_dir", out_dir)
    if not db_path.exists():  # a mistyped --db would otherwise export the empty tables of no database
        raise UsageError(f"no database at {db_path}: nothing to export")
    _refuse_replacing_the_database(db_path, out_dir, suffix)
    results = os.path.realpath(results_dir_of(db_path))
    if os.path.realpath(out_dir) == results or os.path.realpath(out_dir).startswith(results + os.sep):
        # tables among result files: `stash ingest results/*` would then read instances.json (or .csv) as one,
        # and refuse the whole lot ("one bad file stores none")
        raise UsageError(
            f"cannot export into {out_dir}: profiles on this database write their result files there, "
            "and the tables would be read as result files: choose another folder"
        )
    refuse_result_folder(out_dir, list(EXPORTED))
    check_duckdb_path(Path(out_dir), "export folder")  # DuckDB writes the files (COPY)
    existing = nearest_existing(out_dir)  # the folders made below it are removed when nothing is exported
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"cannot write export to {out_dir}: it is a file, and an export is a folder of "
                         "files (one per table): give a folder")  # fmt: skip
    staging = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_folders(out_dir, STAGING_PREFIX)  # of exports killed part-way (SIGKILL)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))
        mark_owner(staging)
    except OSError as exc:  # a full disk: no staging folder (its owner file empty) or new folder left
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        _remove_made(out_dir, existing)
        raise write_failure(f"cannot write export to {out_dir}: {exc.strerror or exc}", exc) from None
    try:
        staged = []
        with connect(db_path, read_only=True) as con:
            if is_stand_in(con):  # an empty DuckDB file, as a missing one: no Stash database to export
                raise UsageError(f"database {db_path} holds no Stash tables (nothing was stored in it): "
                                 "nothing to export")  # fmt: skip
            present = {row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views()"
            ).fetchall()}  # fmt: skip
            refuse_replacing_others(con, out_dir, suffix, [name for name in EXPORTED if name in present])
            for name, order in EXPORTED.items():
                if name not in present:  # a table newer than the database's schema (simulations: v4)
                    continue
                target = staging / f"{name}.{suffix}"
                literal = str(target).replace("'", "''")
                try:
                    columns = {"csv": _csv_safe_columns, "json": _json_safe_columns}.get(fmt)
                    columns = columns(con, name) if columns else "*"
                    con.execute(
                        f"COPY (SELECT {columns} FROM {name} ORDER BY {order}) TO '{literal}' ({options})"
                    )
                except duckdb.Error as exc:
                    line = f"cannot export {name}: {first_line(exc)}"
                    if is_database_corruption(exc):  # the way back, as every other command says it
                        line = f"cannot export {name}: {corruption_line(exc)}"
                    # a full disk or a failed write is the machine's (exit 1), a bad table the input's
                    raise (StashError if is_database_io_error(exc) else UsageError)(line) from None
                if fmt == "json":
                    _json_escape_controls(target)
                staged.append(target)
        return _move_into_place(staged, out_dir, staging)
    except OSError as exc:
        raise write_failure(f"cannot write export to {out_dir}: {exc.strerror or exc}", exc) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        _remove_made(out_dir, existing)


def _remove_made(out_dir: Path, existing: Path) -> None:
    """Remove `out_dir` and the folders above it that this export made (below `existing`), while empty."""
    folder = out_dir
    while folder != existing and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _move_into_place(staged: list[Path], out_dir: Path, staging: Path) -> list[Path]:
    """Move the staged files over those of `out_dir`, all or none: a failure or an interrupt part of the way
    puts back the files they replaced (kept aside in `staging` meanwhile) and removes the new ones."""
    for path in staged:
        if (out_dir / path.name).is_dir() and not (out_dir / path.name).is_symlink():
            raise UsageError(f"cannot write export to {out_dir}: {path.name} there is a folder")
    previous = staging / ".previous"
    previous.mkdir()
    written: list[Path] = []
    try:
        for path in staged:
            final = out_dir / path.name
            if final.is_symlink() or final.exists():
                os.replace(final, previous / path.name)
            os.replace(path, final)
            written.append(final)
    except BaseException:
        for final in written:
            final.unlink(missing_ok=True)
        for old in previous.iterdir():
            os.replace(old, out_dir / old.name)
        raise
    return written


def _refuse_replacing_the_database(db_path: Path, out_dir: Path, suffix: str) -> None:
    """UsageError, before anything is written, when a file of the export (say runs.csv) is the database or
    its write-ahead log, by name or through a link: moving the export into place would replace it."""
    guarded = {os.path.realpath(db_path), os.path.realpath(f"{db_path}.wal")}
    for name in EXPORTED:
        target = out_dir / f"{name}.{suffix}"
        if os.path.realpath(target) in guarded:
            raise UsageError(
                f"cannot export into {out_dir}: its {target.name} would replace the database {db_path}; "
                "choose another folder"
            )


def _csv_safe_columns(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The select list of `name` for a CSV: in every text column, backslashes doubled and control characters
    written as \\xNN (terminal.csv_escaped: an error text holding a terminal escape stays text when the CSV
    is printed, and an upload reads it back whole), then
    formula-leading cells quoted (cells.FORMULA_LEADS, as every CSV Stash writes). Each column's expression
    names the column and each character class once: a replace() per escaped character, nested, made a
    statement of some 100 KB that took DuckDB half a second per table to bind."""
    leads = _character_class(FORMULA_LEADS)
    parts = []
    for column, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {name}").fetchall():
        quoted = quoted_name(column)
        if kind == "VARCHAR":
            # quotes before a lead too (terminal.formula_safe): "'=x" is written "''=x", read back whole
            # backslashes doubled first (terminal.csv_escaped): an upload then reads the text back whole
            escaped = _visible_controls(f"replace({quoted}, '\\', '\\\\')")
            quoted_lead = f"regexp_replace({escaped}, '^(''*{leads})', chr(39) || '\\1')"
            parts.append(f"{quoted_lead} AS {quoted}")
        else:
            parts.append(quoted)
    return ", ".join(parts)


def _json_safe_columns(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The select list of `name` for JSON: a number that is not finite (NaN, Infinity) as null, as result
    files write it; DuckDB would write NaN and Infinity, which no JSON reader takes."""
    parts = []
    for column, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {name}").fetchall():
        quoted = quoted_name(column)
        finite = kind in ("DOUBLE", "FLOAT", "REAL")
        parts.append(f"CASE WHEN isfinite({quoted}) THEN {quoted} END AS {quoted}" if finite else quoted)
    return ", ".join(parts)


def _json_escape_controls(path: Path) -> None:
    """Rewrite a JSON export with every character `printable` escapes that JSON allows raw (C1 controls,
    bidirectional overrides, line separators) as its \\uXXXX escape: the same text to a JSON reader, nothing
    a terminal runs or a line reader splits when the file is shown. DuckDB writes them raw."""
    raw = [char for char in escaped_characters() if ord(char) >= 0x7F]
    found = re.compile(b"|".join(re.escape(char.encode("utf-8")) for char in raw))
    with path.open("rb") as written:  # most tables hold none: read, not rewritten (4.5x the export's time)
        if not any(found.search(line) for line in written):
            return
    table = {ord(char): f"\\u{ord(char):04x}" for char in raw}
    rewritten = path.with_name(path.name + ".escaped")
    with (
        path.open(encoding="utf-8", newline="") as source,
        rewritten.open("w", encoding="utf-8", newline="") as out,
    ):
        for line in source:
            out.write(line.translate(table))
    rewritten.replace(path)


def _visible_controls(column: str) -> str:
    """SQL of `column` with each of terminal.escaped_characters() written as terminal.printable writes it
    (\\r, \\xNN below U+0100, \\uNNNN above); only the cells that hold one are taken apart."""
    controls = _character_class(escaped_characters())
    code = "unicode(character)"
    escape = (
        f"CASE WHEN NOT regexp_matches(character, '{controls}') THEN character "
        "WHEN character = chr(13) THEN '\\r' "
        f"WHEN {code} < 256 THEN '\\x' || lpad(lower(hex({code})), 2, '0') "
        f"ELSE '\\u' || lpad(lower(hex({code})), 4, '0') END"
    )
    each_character = f"list_transform(string_split({column}, ''), lambda character: {escape})"
    taken_apart = f"array_to_string({each_character}, '')"
    return f"(CASE WHEN regexp_matches({column}, '{controls}') THEN {taken_apart} ELSE {column} END)"


def _character_class(characters) -> str:
    """A regular expression's class of `characters`, each written as \\x{..} (none read as syntax)."""
    return "[" + "".join(f"\\x{{{ord(char):x}}}" for char in characters) + "]"
