"""Interrupts: Ctrl-C, and SIGTERM and SIGHUP handled like it; holding them back while something must not be
cut in half (saving a run, ending remote processes).

Python turns SIGINT into KeyboardInterrupt. `signals_as_interrupts` makes SIGTERM (a `kill`, a scheduler, the
dashboard's Cancel) and SIGHUP (a closed terminal or ssh session) raise `Stopped`, a KeyboardInterrupt too, so
that every `except KeyboardInterrupt` and `finally` that ends worker trees and saves what was measured handles
them alike; the command then exits with 128 + the signal's number (130, 143, 129).

A profile run inside someone else's process (the Python API) cannot be stopped by a signal without stopping
that process too: the dashboard's Cancel asks instead (a file in the run's job folder, `stop_requests`), and
the launch loops raise `Cancelled`, a Stopped too, where they next check (`check_stop_request`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

# SIGHUP does not exist on Windows.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
_WORDS = {"SIGINT": "interrupted", "SIGTERM": "terminated", "SIGHUP": "hung up"}


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C would raise KeyboardInterrupt; `signum` is the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(describe(signum))
        self.signum = signum


class Cancelled(Stopped):
    """A stop asked for from outside the process without a signal (stop_requests); it ends the profile as
    SIGTERM would, its launches ended and what was measured saved."""

    def __init__(self) -> None:
        KeyboardInterrupt.__init__(self, "cancelled from the dashboard")
        self.signum = signal.SIGTERM


# The stop signals this process received while signals_as_interrupts ran: an error that follows one (DuckDB's
# "Query interrupted", a query whose callback was stopped) is the signal's doing, and said as it.
_RECEIVED: list[int] = []


def received_stop() -> int | None:
    """The first stop signal received since signals_as_interrupts began, or None."""
    return _RECEIVED[0] if _RECEIVED else None


# The stop request of the profile this thread runs (stop_requests): a check that says whether one came.
_REQUESTS = threading.local()


@contextlib.contextmanager
def stop_requests(requested: Callable[[], bool]) -> Iterator[None]:
    """While the block runs, check_stop_request() in this thread raises Cancelled once `requested()` says
    a stop was asked for."""
    before = getattr(_REQUESTS, "requested", None)
    _REQUESTS.requested = requested
    try:
        yield
    finally:
        _REQUESTS.requested = before


def check_stop_request() -> None:
    """Raise Cancelled when a stop was asked for this thread's profile (stop_requests); cheap enough to call
    about once a second from a loop that waits on launches."""
    requested = getattr(_REQUESTS, "requested", None)
    if requested is not None and requested():
        raise Cancelled()


def describe(signum: int) -> str:
    """'interrupted' (Ctrl-C), 'terminated (SIGTERM)', 'hung up (SIGHUP)'."""
    name = signal.Signals(signum).name
    return "interrupted" if name == "SIGINT" else f"{_WORDS.get(name, 'stopped')} ({name})"


def stop_exception(signum: int) -> KeyboardInterrupt:
    """What a stop signal raises: KeyboardInterrupt for Ctrl-C, Stopped for the others."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


def exit_status(interrupt: BaseException) -> int:
    """128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + int(getattr(interrupt, "signum", signal.SIGINT))


def reason(interrupt: BaseException) -> str:
    """How a result document words the interrupt: 'interrupted by the user' or 'terminated (SIGTERM)', and
    'cancelled by the user' for a dashboard job its Run page cancelled (it marks the job's folder, then
    sends SIGTERM: engine/jobs.cancel_job)."""
    if not isinstance(interrupt, Stopped):
        return "interrupted by the user"
    return "cancelled by the user" if _cancelled_job() else str(interrupt)


def _cancelled_job() -> bool:
    """Whether this process runs a dashboard job (STASH_JOB_RC: a file of its folder) that was cancelled."""
    rc_file = os.environ.get("STASH_JOB_RC")
    return bool(rc_file) and (Path(rc_file).parent / "cancelled").is_file()


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise Stopped (a KeyboardInterrupt) as Ctrl-C raises
    KeyboardInterrupt; the previous handlers come back afterwards. A signal the process was started with
    ignored (nohup ignores SIGHUP) stays ignored. Only the main thread can set handlers; elsewhere the block
    runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    _RECEIVED.clear()
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, _raise_stopped)
    try:
        yield
    finally:
        _restore(previous)


def _raise_stopped(signum: int, frame: object) -> None:
    _RECEIVED.append(signum)
    raise stop_exception(signum)


@contextlib.contextmanager
def held_interrupts() -> Iterator[list[int]]:
    """Hold SIGINT, SIGTERM and SIGHUP until the block has finished; the yielded list gets the number of each
    one received (a signal that was ignored stays ignored).

    The caller decides what a held interrupt means afterwards (usually: raise stop_exception(received[0])).
    Signal handlers can only be set from the main thread; elsewhere the block runs unprotected.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        _restore(previous)


def _restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
