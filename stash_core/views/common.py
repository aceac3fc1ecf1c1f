"""What every page shares: stall labels and colours, the database identity for caches, small helpers."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.cells import csv_text
from stash_core.errors import UsageError
from stash_core.pathargs import default_db, expand_home
from stash_core.terminal import printable
from stash_core.units import finite_float
from stash_core.userfiles import check_reachable, nearest_existing

STALL_LABELS = {
    "compute": "Compute",
    "interconnect": "Interconnect",
    "network": "Network",
    "cpu": "CPU pre-processing",
    "disk": "Disk fetch",
}
STALL_COLORS = {
    "compute": "#4C78A8",
    "interconnect": "#F58518",
    "network": "#E45756",
    "cpu": "#72B7B2",
    "disk": "#B279A2",  # not green: beside network's red it must stay apart to red-green colour blindness
}
NO_INSTANCE = "(no label)"
RUN_STATUSES = ("completed", "failed", "interrupted")
MAX_ITERATION_POINTS = 20_000
MAX_TELEMETRY_POINTS_PER_METRIC = 600

# ---------------------------------------------------------------------------------------------------------
# Database identity (for caches)


# The characters that make Markdown (or Streamlit's extensions of it) out of text anywhere in a line:
# emphasis, code, links and images, HTML and entities, LaTeX ($...$), colour directives and emoji (:red[x],
# :smile:), tables and headings. A backslash before one shows it as itself (CommonMark's escapes).
_INLINE_MARKUP = frozenset("\\`*_[]<>$:~|#&")
# What GitHub-flavoured Markdown links by itself: http(s)://, www. and the @ of an e-mail address
_LINKABLE_RE = re.compile(r"(?i)(?<=h)(?=ttps?:)|(?<=w)(?=ww\.)|(?<=@)")
WORD_JOINER = "\u2060"  # invisible, and no line break where it stands
# At a line's start, these begin a list, a quote or a heading's underline.
_LINE_START_RE = re.compile(r"^(\s*)([-+=>]|\d+(?=[.)]))", re.MULTILINE)


# The command line's ways of choosing the database, in every page's words: the dashboard has no --db, its
# sidebar's Database file chooses (its default from $STASH_DB).
DATABASE_WORDS = {
    "give another --db": "choose another Database file in the sidebar",
    "check --db or $STASH_DB": "check the Database file in the sidebar",
    "--db or $STASH_DB chooses one": "the Database file in the sidebar chooses one",
}


def in_page_words(text: str, words: dict[str, str] | None) -> str:
    """A command's message in a page's words: each option (`--budget-hours`) written as the page's control
    for it, the longest first, so that a page never asks for a flag it has no control for. The ways of
    choosing the database (DATABASE_WORDS) are written as the sidebar's on every page."""
    words = {**DATABASE_WORDS, **(words or {})}
    for option in sorted(words, key=len, reverse=True):
        text = text.replace(option, words[option])
    if text.startswith(("--db ", "--db:")):  # a check of --db names the flag first (a command to copy keeps
        text = "Database file" + text.removeprefix("--db")  # its --db)
    return text


def sentence(text: object) -> str:
    """A line of the commands' (which follows "warning: " there) as a page's sentence: its first letter up."""
    said = str(text)
    return said[:1].upper() + said[1:]


def plain(value: object) -> str:
    """Text from a file, the database, a URL or an upload, to be shown inside a page's Markdown (a caption,
    a heading, an error): its Markdown characters escaped and control characters written as \\xNN, so it
    reads as the data it is, and no web address or e-mail address in it made a link (a word joiner inside
    each: the pages' Markdown links them in the rendered text, past any escape)."""
    text = _LINKABLE_RE.sub(WORD_JOINER, printable(str(value)))
    escaped = "".join(f"\\{char}" if char in _INLINE_MARKUP else char for char in text)
    return _LINE_START_RE.sub(_escape_line_start, escaped)


def _escape_line_start(match: re.Match[str]) -> str:
    """A list's bullet escaped before it ("\\- a"), an ordered list's number after it ("1\\. a")."""
    indent, marker = match.groups()
    return f"{indent}{marker}\\" if marker[0].isdigit() else f"{indent}\\{marker}"


def uncreatable_because(path: Path) -> str | None:
    """Why a database file that does not exist could not be created by the first write, None where it can:
    a writer makes the missing folders, so what matters is the nearest folder that exists."""
    folder = nearest_existing(path.parent)
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


def instance_labels(labels: pd.Series) -> pd.Series:
    """Runs' instance labels as pages show them: NO_INSTANCE for none, also for a result file's blank one."""
    return labels.mask(labels.fillna("").astype(str).str.strip() == "", NO_INSTANCE)


def check_database(path: Path | str) -> None:
    """UsageError for a database path that cannot be one (corrupt, not DuckDB, a folder, not writable): a
    page that would write it says so before anything is run or dropped."""
    from stash_core.store.connection import check_database_path

    check_database_path(path)


def new_database_words(path: Path, made_by: str = "the first run") -> str:
    """How a database that does not exist yet is said where the first write (`made_by`) will make it: its
    full path, and the folders that write makes too (a mistyped folder is seen before anything is stored)."""
    existing = nearest_existing(path.parent)
    missing = path.parent.relative_to(existing).parts  # the folders the first write makes, outermost first
    made = f", and the folder {existing / missing[0]}" if missing else ""
    return f"{path} · not created yet ({made_by} creates it{made})"


def resolve_db_path(text: str | os.PathLike | None) -> Path:
    """The database file a setting names (pathargs.default_db when it names none); `~` expanded, made
    absolute."""
    chosen = str(text).strip() if text else ""
    if any(ord(char) < 32 or ord(char) == 127 for char in chosen):
        raise UsageError(f"the database path {chosen!r} holds a control character; give a .duckdb file")
    path = expand_home(chosen) if chosen else default_db()
    if path.exists() and path.is_dir():
        raise UsageError(f"{path} is a folder; give the path of a .duckdb file")
    check_reachable(path)  # below a file the first write could only fail; through a loop resolve() raises
    return path.resolve()


def db_signature(db_path: Path | str) -> tuple[str, int, int, int]:
    """(path, mtime_ns, size, wal mtime_ns): changes whenever a writer changes the database (cache keys)."""
    path = Path(db_path)
    wal = path.with_name(path.name + ".wal")
    try:
        stat = path.stat()
        mtime, size = stat.st_mtime_ns, stat.st_size
    except OSError:
        mtime, size = 0, 0
    try:
        wal_mtime = wal.stat().st_mtime_ns
    except OSError:
        wal_mtime = 0
    return (str(path), mtime, size, wal_mtime)


# ---------------------------------------------------------------------------------------------------------
# Small helpers


def frame_to_csv(frame: pd.DataFrame) -> bytes:
    """A frame as CSV bytes (for download buttons), formula-leading text cells quoted (cells.csv_text)."""
    return csv_text(frame).encode("utf-8")


def frame_to_parquet(frame: pd.DataFrame) -> bytes:
    """A frame as Parquet bytes; object columns holding mixed values are written as text."""
    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=False)
    except (ValueError, TypeError, ImportError, Exception):  # pyarrow refuses mixed-type columns
        buffer = io.BytesIO()
        frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(
            buffer, index=False
        )
    return buffer.getvalue()


def as_int(value: Any) -> int | None:
    number = finite_float(value)
    return None if number is None else int(number)


# What a page's table shows for a missing value (Streamlit's own default is the word "None").
MISSING_TEXT = "—"


def with_missing_shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame for a static table (st.table has no placeholder): missing values (None, NaN, NaT) as "—"
    and True/False as yes/no; other cells unchanged."""
    shown = frame.astype(object)
    shown = shown.where(frame.notna(), MISSING_TEXT)
    for column in frame.select_dtypes(include="bool").columns:
        shown[column] = frame[column].map({True: "yes", False: "no"})
    return shown


def processes_text(processes: list[dict], limit: int = 120, most: int = 3) -> str:
    """The first `most` measuring processes ({"pid", "command"}) as page text: "pid N: command", each command
    cut at a whole argument before `limit` characters, with "..." where it goes on (a cut inside an option
    read as another option)."""
    shown = []
    for process in processes[:most]:
        command = str(process["command"])
        if len(command) > limit:
            command = command[: command.rfind(" ", 0, limit) if " " in command[:limit] else limit] + " ..."
        shown.append(f"pid {process['pid']}: {plain(command)}")
    return "; ".join(shown)
