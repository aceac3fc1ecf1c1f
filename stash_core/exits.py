"""How an entry point ends: its exit status, and an error as one line on stderr (never a traceback).

Shared by the `stash` command (cli/main.py) and the profile child (api/child.py), so that a profile started
by the dashboard or a campaign fails with the same line and status as one typed in a terminal.

Exit status: 0 success, 1 failed measurement (or a run that could not be saved whole, a write the machine
refused: errors.DiskFull, or a decision that no configuration meets), 2 bad usage or bad input, 130
interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP), 141 the reader of the output went away
before the command had written it all (`| head`), as a Unix tool ended by SIGPIPE.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import sys
from collections.abc import Callable

from stash_core.errors import StashError, UsageError, first_line
from stash_core.interrupts import describe, exit_status, received_stop, signals_as_interrupts
from stash_core.terminal import printable

BROKEN_PIPE_STATUS = 128 + 13  # 128 + SIGPIPE


def run_command(body: Callable[[], int | None], json_errors: bool = False) -> int:
    """Run `body` and return its exit status. SIGTERM and SIGHUP stop it as Ctrl-C does (a profile saves
    what it measured and ends its workers); a Stash error, an interrupt, a machine's OSError or a DuckDB
    write failure is one line on stderr with its status. `json_errors`: a command asked for JSON, so a
    failure's line is also a JSON object on stdout ({"error": ..., "exit_status": ...}), which a script
    reading stdout can parse."""
    reserve_standard_descriptors()
    tolerant_output()
    given_stdout = sys.stdout  # None where started with descriptor 1 closed (`>&-`): print() would show
    sys.stdout = _ClosedStdout() if sys.stdout is None else _NamedStdout(sys.stdout)  # nothing, exit 0
    try:
        with signals_as_interrupts():
            try:
                status = body() or 0
            except SystemExit:  # argparse's --help or --version, written before it
                sys.stdout.flush()
                raise
            sys.stdout.flush()  # a write the device refuses is said now, not at exit as a traceback
            return status
    except KeyboardInterrupt as interrupt:
        for note in getattr(interrupt, "__notes__", []):  # what was kept before it (an ingest's stored runs)
            _say(f"stash: {printable(note)}")
        return _stopped(exit_status(interrupt) - 128, json_errors)
    except Exception as error:
        if (signum := received_stop()) is None:
            return _failed(error, json_errors)
        # a stop signal came first: what failed after it (DuckDB's "Query interrupted") is its doing
        return _stopped(signum, json_errors)
    finally:
        if isinstance(sys.stdout, _NamedStdout):
            sys.stdout = given_stdout


def _stopped(signum: int, json_errors: bool) -> int:
    """The exit status of a command stopped by signal `signum`, said on stderr (and as JSON on stdout when
    the command was asked for JSON: a script killed by its timeout parses why)."""
    if json_errors:
        _say_json(describe(signum), 128 + signum)
    _say(f"stash: {describe(signum)}")
    return 128 + signum


def _say_json(line: str, status: int) -> None:
    import json

    _write(sys.stdout, json.dumps({"error": printable(line), "exit_status": status}))


def _say(line: str) -> None:
    """`line` on stderr, where somebody still reads it (`2>&1 | head` has gone: the status says the rest)."""
    _write(sys.stderr, line)


def _write(stream, line: str) -> None:
    if stream is None:  # closed before Python started (`2>&-`): print() would write it to stdout instead
        return
    try:
        print(line, file=stream, flush=True)
    except (OSError, ValueError):  # its reader gone, a full device (/dev/full), a closed stream
        _quiet_at_exit(stream)


def _quiet_at_exit(*streams) -> None:
    """`streams` (whose reader has gone) to /dev/null: Python's flush of such a stream at exit would print an
    error and make the status 120. The other stream, still read, is left as it is."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in streams:
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # a replaced stream (a test's) has no descriptor
            pass
    os.close(devnull)


def _out_of_memory(error: Exception) -> bool:
    """An allocation that failed: MemoryError, or torch's "DefaultCPUAllocator: can't allocate memory" and
    "CUDA out of memory" (torch.OutOfMemoryError is a RuntimeError)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)
    )


def _failed(error: Exception, json_errors: bool = False) -> int:
    """The exit status of a command that failed with `error`, its one line said (a bug's traceback raised)."""
    if isinstance(error, BrokenPipeError):  # the reader of the output has gone (`| head`): nothing to say,
        _quiet_at_exit(sys.stdout, sys.stderr)  # and the answer was not delivered whole: SIGPIPE's status, as
        return BROKEN_PIPE_STATUS  # `seq 99999 | head -1` ends (a refusal's 1 or 2 read as 0 by pipefail)
    if isinstance(error, StashError):
        line, status = one_line(error), error.exit_code
    elif isinstance(error, OSError) and error.filename == _STDOUT:  # `> /dev/full`, a full disk
        line, status = f"the answer could not be written to {_STDOUT}: {error.strerror or error}", 1
        _quiet_at_exit(sys.stdout)  # what it still buffers would fail again at exit
    elif isinstance(error, OSError):  # the machine's, not the input's: a full disk, a vanished folder
        where = f": {error.filename}" if error.filename else ""
        line, status = f"{error.strerror or first_line(error)}{where}", 1
    elif _out_of_memory(error):  # the machine's, not a bug: torch's allocators raise a RuntimeError
        line, status = f"out of memory: {first_line(error)}" if str(error) else "out of memory", 1
    elif is_database_corruption(error):
        # a damaged block read after the open-time checks passed: before the write failures, as DuckDB 1.x
        # raises it as an IOException
        line, status = corruption_line(error), 2
    elif is_database_io_error(error):
        # DuckDB could not write (a full disk at commit or checkpoint): its transaction left the file as it
        # was; the machine's problem, so exit 1 with one line.
        line, status = f"the database could not be written: {one_line(error)}", 1
    else:
        raise error  # a bug: its traceback
    line = capped(line)
    if json_errors:  # first: a script reading stdout gets it even where nobody reads stderr
        _say_json(line, status)
    _say(f"stash: {printable(line)}")
    return status


MAX_ERROR_CHARS = 2000  # an error line echoes what was given: a 100,000-character argument is cut


def capped(line: str) -> str:
    """The error line, cut at MAX_ERROR_CHARS with the count of what was left out."""
    if len(line) <= MAX_ERROR_CHARS:
        return line
    return f"{line[:MAX_ERROR_CHARS]}... ({len(line) - MAX_ERROR_CHARS:,} more characters)"


def reserve_standard_descriptors() -> None:
    """/dev/null on descriptors 0, 1 and 2 where the command started with one closed (`2>&-`): the next file
    opened would take that number, and a library's own write to "stderr" would land in it (a database file
    was seen as descriptor 2). Python's sys.stdout and sys.stderr stay as they were (None: nothing shown)."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one, or a lower closed one
            if opened != descriptor:
                os.dup2(opened, descriptor)
                os.close(opened)


_STDOUT = "standard output"


class _NamedStdout:
    """sys.stdout, whose failed write names it (the OS's "No space left on device" alone did not say which
    output); everything else is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            raise _named(error) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            raise _named(error) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _named(error: OSError) -> OSError:
    if error.filename is None and not isinstance(error, BrokenPipeError):
        error.filename = _STDOUT
    return error


class _ClosedStdout(io.TextIOBase):
    """stdout of a command started with it closed: a write fails as it does on a closed descriptor, so the
    command says it could not show its answer (exit 1) as `cat >&-` does, instead of ending 0 silently."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed (>&-): the command's answer could not be shown")


# What a symbol the output's encoding lacks is written as: one ASCII form keeps a table's columns close to
# aligned ("\\xb1err" was three characters wider than its column); other characters (a name in another
# script) as their escape.
_ASCII_FORMS = {"±": "+-", "×": "x", "·": "-", "²": "2", "—": "-", "–": "-", "−": "-", "µ": "u", "°": "deg",
                "●": "*", "◇": "o", "α": "alpha", "β": "beta"}  # fmt: skip


def _ascii_forms(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    lacking = error.object[error.start : error.end]
    written = "".join(_ASCII_FORMS.get(c) or c.encode("ascii", "backslashreplace").decode() for c in lacking)
    return written, error.end


codecs.register_error("stash_ascii_forms", _ascii_forms)


def tolerant_output() -> None:
    """stdout and stderr write a character their encoding lacks in an ASCII form (± as +-, a name's letters as
    escapes like \\xe9) instead of raising: under an ASCII locale (LC_ALL=C with UTF-8 mode off) a ± or a name
    in another script ended in a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a replaced stream (a test's) may lack it
        if reconfigure is not None:
            reconfigure(errors="stash_ascii_forms")


def is_database_io_error(error: BaseException) -> bool:
    """A DuckDB I/O or commit failure (without importing duckdb, which not every command needs)."""
    kind = type(error)
    return kind.__module__.lstrip("_").startswith("duckdb") and kind.__name__ in (
        "IOException", "TransactionException", "FatalException", "OutOfMemoryException"
    )  # fmt: skip


# DuckDB's words for a damaged file read after the open: a block whose checksum does not match, and a block
# past the end of a file cut short (a copy that stopped), which is no failure to write
_DAMAGE_WORDS = ("Corrupt database file", "Could not read enough bytes")


def is_database_corruption(error: BaseException) -> bool:
    """DuckDB's error for a damaged database found by a read (damage the open did not read)."""
    from_duckdb = type(error).__module__.lstrip("_").startswith("duckdb")
    return from_duckdb and any(words in str(error) for words in _DAMAGE_WORDS)


# The way back from a damaged database: the result files hold every profile whole.
RESTORE_ADVICE = (
    "restore it from a copy, or store the result files again into a new one (stash ingest --skip-bad "
    "results/*.json --db NEW.duckdb)"
)


def corruption_line(error: BaseException) -> str:
    """What to do about a corrupt database (is_database_corruption), in one line."""
    return f"the database is corrupt ({one_line(error)}): {RESTORE_ADVICE}"


def refuse_undecodable(argv: list[str]) -> None:
    """Arguments that are not UTF-8 (bytes Python keeps as surrogates) are refused before anything reads
    them: names and paths end up in the database and result files, which hold text."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"argument {position} {undecodable_reason(os.fsencode(arg))}") from None


def refuse_vanished_folder() -> None:
    """One line where the current folder has been removed under the shell (`cd d && rmdir ../d`): relative
    paths cannot be resolved, and torch's libraries fail to load there with a fatal error of their own."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise StashError("the current folder no longer exists (it was removed): cd to a folder that does, "
                         "and run the command again") from None


def undecodable_reason(raw: bytes) -> str:
    """Why text Python could not decode is refused: bytes that are not UTF-8, or UTF-8 under a locale whose
    encoding is another (LC_ALL=C with Python's UTF-8 mode off decodes file names as ASCII)."""
    import locale

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"is not UTF-8 text ({raw[:60]!r}): give names and paths in UTF-8"
    encoding = locale.getpreferredencoding(False) or "unknown"
    return (f"({text[:60]!r}) is UTF-8 but this locale's encoding is {encoding}: run in a UTF-8 locale "
            "(LC_ALL=C.UTF-8), or give ASCII names and paths")  # fmt: skip


def one_line(error: BaseException) -> str:
    """An error's message on one line (a usage error is exactly one line on stderr)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines) or type(error).__name__
