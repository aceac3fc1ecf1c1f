"""Which files an export may replace: none but an earlier export of the same table in the same format.

An export writes `<table>.<format>` into a folder. A file of that name there that is something else (a result
file saved as runs.json, a database copied to telemetry.json, a hand-made instances.csv) was replaced
without a word; now the export is refused before anything is written. An earlier export is recognised by its
columns: a CSV's header, the keys of a JSON export's first line, a Parquet file's schema, each naming only
columns of the table (an export of an older schema has fewer).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import duckdb

from stash_core.errors import UsageError

FIRST_LINE_BYTES = 1 << 20  # a JSON line of a run (its spec, its fingerprint) is a few kB
# A result, probe or simulation file names its kind within its first few hundred bytes.
_RESULT_KIND = re.compile(rb'"kind"\s*:\s*"stash-(profile|probe|simulation)"')
KIND_BYTES = 4096
RESULT_FILES_LOOKED_AT = 1000  # a folder of more .json files is judged by the first, by name


def refuse_result_folder(out_dir: Path, names: list[str]) -> None:
    """UsageError when `out_dir` holds Stash result files (other than a JSON export's own names): the tables
    among them are read as bad result files by `stash ingest DIR/*`, which then stores none of them."""
    if not out_dir.is_dir():
        return
    own = {f"{name}.json" for name in names}
    others = sorted(path for path in out_dir.glob("*.json") if path.name not in own)  # the same each time
    for path in others[:RESULT_FILES_LOOKED_AT]:
        if not path.is_file():
            continue
        try:
            with path.open("rb") as handle:
                head = handle.read(KIND_BYTES)
        except OSError:
            continue
        if _RESULT_KIND.search(head):
            raise UsageError(
                f"cannot export into {out_dir}: it holds result files ({path.name}), and `stash ingest` of "
                "its files would read the tables as result files: choose another folder"
            )


def refuse_replacing_others(
    con: duckdb.DuckDBPyConnection, out_dir: Path, suffix: str, names: list[str]
) -> None:
    """UsageError (one line) when a target `out_dir/<name>.<suffix>` holds a non-empty file that is not an
    export of table `name` in that format."""
    for name in names:
        target = out_dir / f"{name}.{suffix}"
        # a link is replaced itself, what it points at is left alone (export._move_into_place)
        if target.is_symlink() or not target.is_file() or target.stat().st_size == 0:
            continue
        columns = {column[0] for column in con.execute(f"SELECT * FROM {name} LIMIT 0").description}
        found = _columns_of(con, target, suffix)
        if not found or not found <= columns:
            raise UsageError(
                f"cannot export into {out_dir}: {target.name} there is not an earlier export of the {name} "
                "table, and the export would replace it: move it or choose another folder"
            )


def _columns_of(con: duckdb.DuckDBPyConnection, path: Path, suffix: str) -> set[str]:
    """The column names an export file of `suffix` names; empty for a file that is no such export."""
    try:
        if suffix == "parquet":
            with path.open("rb") as handle:
                if handle.read(4) != b"PAR1":
                    return set()
            literal = str(path).replace("'", "''")
            described = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{literal}')").fetchall()
            return {row[0] for row in described}  # the top-level columns (a list's elements are not)
        with path.open("rb") as handle:
            first = handle.readline(FIRST_LINE_BYTES).decode("utf-8")
        if suffix == "csv":
            return set(next(csv.reader(io.StringIO(first)), []))
        row = json.loads(first)
        return set(row) if isinstance(row, dict) else set()
    except (OSError, UnicodeDecodeError, ValueError, duckdb.Error):
        return set()
