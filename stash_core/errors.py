"""Errors that end a command with a clear one-line message.

UsageError: the user gave something wrong (bad flag, bad file, unreachable host) -> exit 2.
MeasurementError: the input was fine but a measurement failed -> exit 1.
SaveError: the measurement was fine but could not be saved whole -> exit 1.
ProfileEnded: a profile that stopped early (a failure or an interrupt), carrying what it measured.
"""

import errno
import json
from pathlib import Path


class StashError(Exception):
    exit_code = 1


class UsageError(StashError):
    exit_code = 2


class UserModelError(UsageError):
    """A user's model that cannot be had: its file or module, its factory, or what the factory did. Said
    once for a whole command (not once per instance or batch size). Here rather than in the zoo, so that a
    caller can catch it without importing the zoo (and torch)."""


class UserCodeLimitError(UserModelError):
    """A user's code that ran past its time limit or called os._exit: the same code would do it again, so
    nothing runs it a second time (a factory is built for real after failing on the meta device)."""


class NewerThanStash(UsageError):
    """A database, result file or simulation written by a newer Stash than the running one: upgrade, or (a
    dashboard started before an update) restart."""


class DiskFull(UsageError):
    """A write the machine refused (a full disk, a quota, a failing device). A UsageError for the callers
    that catch one, but the machine's state, not the input: a command exits 1 with it."""

    exit_code = 1


NO_SPACE = "No space left on device"  # the OS's words (ENOSPC), as DuckDB passes them on
_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def is_disk_full(cause: BaseException) -> bool:
    """Whether a failed write was the machine's refusal: its errno, or the OS's words in DuckDB's message."""
    return getattr(cause, "errno", None) in _MACHINE_ERRNOS or NO_SPACE in str(cause)


def says_disk_full(text: str) -> bool:
    """Whether a one-line error (a child's, as printed) says the machine refused a write: the OS's words, or
    Stash's own refusal of a disk too full to start on ("... free some space first")."""
    return NO_SPACE in text or "Disk quota exceeded" in text or "free some space" in text


def write_failure(message: str, cause: BaseException) -> UsageError:
    """The error for a write that failed: DiskFull (exit 1) where the machine refused it, UsageError (exit 2)
    where the path given cannot be written (a read-only folder, a name too long)."""
    return DiskFull(message) if is_disk_full(cause) else UsageError(message)


class MeasurementError(StashError):
    exit_code = 1


class SaveError(StashError):
    """A measurement that could not be saved whole (a full disk, a broken database) -> exit 1; the message
    says where the run is kept and how to store it later."""

    exit_code = 1


class ProfileEnded(Exception):
    """A profile that ended before it completed. `doc` is its result document (status failed or
    interrupted, with the runs that did complete) for the caller to save; `cause` is the StashError or
    KeyboardInterrupt that ended it."""

    def __init__(self, doc: dict, cause: BaseException):
        super().__init__(str(cause) or type(cause).__name__)
        self.doc = doc
        self.cause = cause


def first_line(error: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none): what a user is shown. Where
    DuckDB appends its error as JSON ('IO Error: Async write failed for range [...]: {"exception_type": "IO",
    "exception_message": "Could not write file ...", ...}'), its type and message instead."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    start = line.find('{"exception_type"')
    if start > 0:
        try:
            detail = json.loads(line[start:])
        except ValueError:
            return line
        if isinstance(detail, dict) and isinstance(detail.get("exception_message"), str):
            kind = detail.get("exception_type")
            return f"{kind} Error: {detail['exception_message']}" if isinstance(kind, str) else line
    return line


def no_run_error(run_id: str, db_path: object) -> UsageError:
    """No run matches `run_id`: said as the database not existing where that is why (a mistyped --db)."""
    if not Path(str(db_path)).exists():
        return UsageError(f"no database {db_path} (check --db or $STASH_DB): no run {run_id!r} there")
    return UsageError(f"no run {run_id!r} in {db_path}")
