"""Limits on a user's model code while Stash runs it in its own process: a time limit, and no way out.

A model file or factory that sleeps, waits on the network or loops would hold `profile`, `predict`,
`recommend`, `spot-memory` and `spot-profile` forever; one that calls os._exit at import would end the
command with exit status 0 and no output. While a factory is imported and called, SIGALRM interrupts it after
USER_CODE_LIMIT_S (STASH_USER_CODE_LIMIT_S overrides it), and os._exit raises instead of ending Stash.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from stash_core.errors import UsageError, UserCodeLimitError, UserModelError  # noqa: F401 - named here too

USER_CODE_LIMIT_S = 120.0  # importing a model file and building the model: seconds, even for large models
LIMIT_VAR = "STASH_USER_CODE_LIMIT_S"
# A caller's alarm that came due while the user's code ran is re-armed this soon (0 would disarm it).
OVERDUE_ALARM_S = 1e-3


class UserCodeTimeout(BaseException):
    """Raised inside the user's code at its time limit (a BaseException, so its `except Exception` cannot
    swallow it)."""


class UserCodeExit(BaseException):
    """Raised in place of os._exit called by the user's code."""


def user_code_limit_s() -> float:
    text = os.environ.get(LIMIT_VAR, "")
    try:
        value = float(text) if text else USER_CODE_LIMIT_S
    except ValueError:
        raise UsageError(f"{LIMIT_VAR}={text!r:.40}: give a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= 86400):
        raise UsageError(f"{LIMIT_VAR}={text!r:.40}: give seconds above 0, at most 86400")
    return value


@contextmanager
def limited_user_code(what: str) -> Iterator[None]:
    """Run the user's code of `what` (e.g. "model f.py:make": its import and factory) under the limits;
    UsageError (one line) when it runs past its time or calls os._exit. One thread at a time
    (user.USER_CODE): os._exit is the process's, and a second thread saving it here would save the first
    one's stand-in and restore that."""
    limit_s = user_code_limit_s()
    on_main = threading.current_thread() is threading.main_thread()
    real_exit = os._exit
    owner, process = threading.get_ident(), os.getpid()

    def refuse_exit(code: int = 0) -> None:
        # os._exit is the process's: another thread's call, or a child forked meanwhile (a DataLoader
        # worker's), ends as it asked
        if threading.get_ident() != owner or os.getpid() != process:
            real_exit(code)
        raise UserCodeExit(code)

    def on_alarm(signum, frame) -> None:
        raise UserCodeTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm) if on_main else None
    if on_main:
        # the caller's own timer, if any: given back when the user's code is done
        callers_delay, callers_interval = signal.getitimer(signal.ITIMER_REAL)
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    os._exit = refuse_exit  # type: ignore[assignment]
    try:
        yield
    except UserCodeTimeout:
        message = f"{what} did not finish within {limit_s:g} s (time limit; {LIMIT_VAR})"
        raise UserCodeLimitError(message) from None
    except UserCodeExit as exit_code:
        message = f"{what} called os._exit({exit_code.args[0]!r:.20}); a model file must not exit"
        raise UserCodeLimitError(message) from None
    finally:
        os._exit = real_exit
        if on_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if callers_delay > 0:
                left = callers_delay - (time.monotonic() - started)
                signal.setitimer(signal.ITIMER_REAL, max(left, OVERDUE_ALARM_S), callers_interval)
