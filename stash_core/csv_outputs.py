"""A CSV output path checked before the work: it may hold no file, an empty one, or an earlier CSV of the same
kind (its header line starts as this one's does), which a rerun replaces.

A mistyped --jobs-csv, --csv or --loss-csv that named a database, a result file (a --no-store run's only copy)
or a workload replaced it whole without a word; `--out` refuses such a path the same way
(results/file.check_replaceable).
"""

from __future__ import annotations

from pathlib import Path

from stash_core.errors import UsageError

HEADER_BYTES = 4096  # a header line longer than this is no CSV Stash writes


def check_csv_replaceable(path: Path | str, flag: str, what: str, header_start: str) -> None:
    """UsageError (one line) when `path` holds a non-empty file whose first line does not start with
    `header_start` (the columns this CSV starts with, comma-separated). A file that cannot be read is left to
    the writer, which says why it cannot be replaced. A path in a folder that does not exist is refused too,
    as a shell's `> folder/file` is: a mistyped folder is not made (--jobs-csv, --csv and --loss-csv alike)."""
    path = Path(path)
    if not path.parent.exists():
        raise UsageError(f"{flag} {path}: folder {path.parent} does not exist")
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        with path.open("rb") as handle:
            first_line = handle.readline(HEADER_BYTES)
    except OSError:
        return
    if not first_line.decode("utf-8", "replace").lstrip("\ufeff").startswith(header_start):
        raise UsageError(
            f"{flag} {path} holds a file that is not {what}; writing there would replace it: "
            "choose another path"
        )
