"""Checks that result files (results/file.py) and probe files (results/probe.py) share: the JSON tree's depth
and numbers, names that are shown (no terminal escapes), times the store and the dashboard can hold. Each
refusal is one UsageError line that names its document and field."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from stash_core.errors import UsageError, first_line
from stash_core.terminal import invisible_character, unsafe_character

MAX_DEPTH = 32  # objects and lists within each other; a result nests about 7 deep
INT64_MAX = 2**63 - 1
MAX_ID_CHARS = 200
# One text of a document (a warning, an error, a spec field): a profile writes at most some kB; 180 MB in a
# spec's field was stored whole and printed by `stash show`.
MAX_TEXT_CHARS = 1_000_000

# Times a result may carry: what pandas (the dashboard) can represent, from 1900 on.
EARLIEST, LATEST = datetime(1900, 1, 1), datetime(2262, 4, 11)
# How far ahead of this machine's clock a document's start may be: another machine's clock may run ahead.
FUTURE_LEEWAY = timedelta(days=1)


def check_kind(path: Any, doc: Any, kinds: tuple[str, ...]) -> None:
    """UsageError "PATH: not a Stash result file" naming the kinds Stash stores, for a document of none of
    them: another tool's JSON, or another command's (`stash spot --json`)."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind not in kinds:
        if printed := printed_by(doc, INGESTED):
            raise UsageError(f"{path}: {printed}")
        has = 'no "kind"' if kind is None else f'"kind" {json.dumps(kind)[:60]}'
        raise UsageError(f"{path}: not a Stash result file ({has}; the files Stash stores have \"kind\" "
                         f"{', '.join(kinds)})")  # fmt: skip


# What `stash show` and `stash runs` print with --format json: read back, they hold no run as it was stored.
_PRINTED_KEYS = {
    frozenset({"run", "breakdown"}): "`stash show --format json`",
    frozenset({"probe"}): "`stash show PROBE --format json`",
    frozenset({"runs", "stored"}): "`stash runs --format json`",
}
# What the dashboard's Upload page stores, and what `stash ingest` does.
STORABLE = "the result file `stash profile --out` writes, or a `stash export` of the database"
INGESTED = ("the result file `stash profile --out` writes (the tables of a `stash export` are stored by the "
            "dashboard's Upload page)")


def printed_by(doc: Any, storable: str = STORABLE) -> str | None:
    """"what COMMAND printed, not a result file: store ..." for a document of Stash's own printed output;
    None for any other."""
    command = _PRINTED_KEYS.get(frozenset(doc)) if isinstance(doc, dict) else None
    return f"what {command} printed, not a result file: store {storable}" if command else None


def check_timestamp(key: str, value: Any, required: bool, document: str = "result file") -> None:
    """An ISO 8601 time within EARLIEST .. LATEST (a time beyond them cannot be turned into UTC or shown)."""
    if value is None and not required:
        return
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise UsageError(f"{document}: {key} is not an ISO 8601 time ({value!r})") from None
    # as the store holds it, in UTC: 1900-01-01T00:30+01:00 is 1899 there, which no reader takes back
    try:
        utc = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
    except OverflowError:  # year 1 or 9999 moved past the calendar's ends
        utc = datetime.min
    if not EARLIEST <= utc < LATEST:
        raise UsageError(f"{document}: {key} {value!r} is outside the representable range (1900 .. 2262)")


def stored_moment(text: str) -> datetime:
    """An ISO 8601 time (already checked) as the store holds it: one without an offset is UTC."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def in_the_future(moment: datetime) -> bool:
    """Past this machine's clock by more than FUTURE_LEEWAY: it would be the newest, "0 s ago", for years."""
    return moment > datetime.now(UTC) + FUTURE_LEEWAY


def unreadable_json_reason(error: RecursionError | ValueError) -> str:
    """Why json.loads gave up on a text past Python's limits: nesting it cannot recurse into, or an integer
    of more digits than it converts (not Python's own words)."""
    if isinstance(error, RecursionError):
        return f"JSON nested too deeply (at most {MAX_DEPTH} levels)"
    return f"a number in the file is too long ({first_line(error)})"


def check_tree(doc: Any, what: str = "result file") -> None:
    """Refuse, naming the place, JSON nested deeper than MAX_DEPTH, integers beyond 64 bits, infinite numbers
    (a number too large for a double, like 1e400), texts longer than MAX_TEXT_CHARS and keys that are not
    text. NaN stands for "unknown" and is kept. Walks without recursion, so a hostile document cannot exhaust
    the stack."""
    stack: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UsageError(f"{what}: {where} nests deeper than {MAX_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            kind = type(item)
            if kind is float:
                if item in _INFINITIES:
                    raise UsageError(f"{what}: {_place(where, key)} is a number too large to store")
            elif kind is int:
                if not -INT64_MAX <= item <= INT64_MAX:
                    raise UsageError(f"{what}: {_place(where, key)} is an integer beyond 64 bits")
            elif kind is str:
                if len(item) > MAX_TEXT_CHARS:
                    said = f"a text of {len(item):,} characters; at most {MAX_TEXT_CHARS:,} are stored"
                    raise UsageError(f"{what}: {_place(where, key)} is {said}")
            elif isinstance(item, dict | list):
                stack.append((item, _place(where, key), depth + 1))
            if type(key) is not str and type(key) is not int:
                raise UsageError(f"{what}: {where or 'the document'} has a key that is not text ({key!r})")
            if type(key) is str and len(key) > MAX_TEXT_CHARS:
                said = f"a key of {len(key):,} characters; at most {MAX_TEXT_CHARS:,} are stored"
                raise UsageError(f"{what}: {where or 'the document'} has {said}")


_INFINITIES = (math.inf, -math.inf)


def _place(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def check_identifier(what: str, value: Any, document: str = "result file") -> None:
    """Text of sensible length without control, bidi or invisible characters: a name that is shown and
    searched for ("resnet10" with a zero-width space is shown as resnet10, and is another name)."""
    if not isinstance(value, str):
        raise UsageError(f"{document}: {what} must be text, got {value!r}")
    character = unsafe_character(value)
    if character:
        raise UsageError(f"{document}: {what} holds the control character {character}")
    invisible = invisible_character(value)
    if invisible:
        raise UsageError(f"{document}: {what} holds the invisible character {invisible}")
    if len(value) > MAX_ID_CHARS:
        raise UsageError(f"{document}: {what} is longer than {MAX_ID_CHARS} characters")


def check_not_a_path(what: str, value: str, document: str = "result file") -> None:
    """An id that names a file of its own (results/ID.json, an export): never a path out of its folder."""
    if "/" in value or "\\" in value or value.strip(".") == "":
        raise UsageError(f"{document}: {what} {value[:80]!r} is a path, not a name (no '/', '\\\\', '..')")


def check_numbers(what: str, values: list) -> None:
    """A flat list of numbers (None for a missing one): not nested, not text."""
    for value in values:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(
                f"result file: {what} holds non-numeric values ({value!r}): give a flat list of numbers"
            )


# A run's machines and workers, as `stash profile` takes them (spec_parse.WORKERS): more is not a real run.
MAX_WORKERS_PER_NODE = MAX_NODES = 1024


# Every profile's spec names these (a script's batch_size may be null: its loader's batches differed); a
# file without one was edited by hand, and would be stored as a run of no known layout.
REQUIRED_SPEC_KEYS = ("model", "batch_size", "workers_per_node", "nodes")


def check_spec_layout(spec: dict) -> None:
    """A result's spec names its model, batch and layout, and the layout is one `stash profile` takes."""
    # a script's batch size may be null; the others say what ran and on how many workers and machines
    missing = [key for key in REQUIRED_SPEC_KEYS
               if key not in spec or (key != "batch_size" and spec[key] is None)]  # fmt: skip
    if not missing and not (isinstance(spec["model"], str) and spec["model"].strip()):
        missing = ["model"]
    if missing:
        raise UsageError(f"result file: spec lacks {', '.join(missing)} (every profile's spec names them)")
    for key, most in (("workers_per_node", MAX_WORKERS_PER_NODE), ("nodes", MAX_NODES)):
        value = spec.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise UsageError(
                f"result file: spec.{key} is {value!r:.40}; expected a whole number from 1 to {most}"
            )
