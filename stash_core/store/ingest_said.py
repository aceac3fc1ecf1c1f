"""The words of storing a batch of files: what each file's storing did, and what a failure part of the way
left stored (store/ingest.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError

# What storing one file did (ingest_files with words=True): the CLI says it per file.
STORED = "stored"  # a run, probe set or simulation new to the database
COMPLETED = "completed"  # a stored run given what an older layout or an export left out (samples, columns)
ALREADY_STORED = "already stored"  # the same, stored already: nothing written


class NothingStored(UsageError):
    """A batch refused before anything was written: one file's reason, and that the others were not stored
    either (skip_bad would store them). `reasons`: every file's that cannot be stored, each "PATH: why", in
    the order given (the first is the one said), so that one command names every bad file."""

    reasons: tuple[str, ...] = ()


def nothing_stored(reason: str, given: int, also: list[str] | tuple[str, ...] = ()) -> NothingStored:
    """The refusal of a batch of `given` files for one file's `reason` (and `also` the other bad files'),
    saying the others were not stored."""
    more = f"; {len(also)} more file(s) cannot be stored either" if also else ""
    if given < 2:
        refused = NothingStored(f"{reason}{more}")
    else:
        others = f"the {given - 1} others were" if given > 2 else "the other was"
        said = "nothing stored: every file is checked before any is stored"
        refused = NothingStored(f"{reason}{more}; {said}, so {others} not stored either")
    refused.reasons = (reason, *also)
    return refused


def each_prepared(
    paths: list[Path], prepare: Callable[[Path], Any], skip_bad: Callable[[Path, str], None] | None
) -> list[tuple[Path, Any]]:
    """(path, prepare(path)) for each file; one that cannot be is handed to `skip_bad` with its reason, or
    without it the batch is refused (NothingStored) naming every such file, not only the first."""
    prepared, bad = [], []
    for path in paths:
        try:
            prepared.append((path, prepare(path)))
        except UsageError as error:
            if skip_bad is None:
                bad.append(str(error))
            else:
                skip_bad(path, str(error))
    if bad:
        raise nothing_stored(bad[0], len(paths), bad[1:])
    return prepared


NAMED_FILES = 5  # files named in a failure's note; the others are counted


def stored_before(outcomes: list[tuple[Path, str, str]], given: int, storing: Path | None = None) -> str:
    """What a failure part of the way leaves stored, naming the files ("" for none): the same command again
    stores the rest, and the user knows which went in. `storing`: the file whose insert the failure
    stopped, which may have been committed."""
    written = [str(path) for path, _, said in outcomes if said != ALREADY_STORED]
    if not written:
        return ""
    named = ", ".join(written[:NAMED_FILES])
    more = f" and {len(written) - NAMED_FILES} more" if len(written) > NAMED_FILES else ""
    perhaps = f", and perhaps {storing}, being stored when it stopped" if storing is not None else ""
    return (f"{len(written)} of the {given} files were stored before it ({named}{more}{perhaps}; the same "
            "command again stores the rest, none twice)")  # fmt: skip
