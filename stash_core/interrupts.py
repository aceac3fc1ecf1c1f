"""Holding Ctrl-C back while something must not be cut in half (saving a run, ending remote processes)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def held_interrupts() -> Iterator[list[int]]:
    """Hold SIGINT until the block has finished; the yielded list gets one entry per interrupt received.

    The caller decides what a held interrupt means afterwards (usually: raise KeyboardInterrupt). Signal
    handlers can only be set from the main thread; elsewhere the block runs unprotected.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)
