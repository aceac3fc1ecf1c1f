"""The words of storing a batch of files: what each file's storing did, and what a failure part of the way
left stored (store/ingest.py)."""

from __future__ import annotations

from pathlib import Path

from stash_core.errors import UsageError

# What storing one file did (ingest_files with words=True): the CLI says it per file.
STORED = "stored"  # a run, probe set or simulation new to the database
COMPLETED = "completed"  # a stored run given what an older layout or an export left out (samples, columns)
ALREADY_STORED = "already stored"  # the same, stored already: nothing written


class NothingStored(UsageError):
    """A batch refused before anything was written: one file's reason, and that the others were not stored
    either (skip_bad would store them). `also`: the reasons of the other files that cannot be stored, each
    "PATH: why", so that one command names every bad file."""

    also: tuple[str, ...] = ()


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
    refused.also = tuple(also)
    return refused


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
