"""Which failed launches are tried once more: failures of the machine, not of the job."""

from __future__ import annotations

import re

from stash_core.launch.torchrun_failure import signal_of

# Failures of the machine rather than of the job: gloo connections lost or timed out, a port taken between
# choosing and binding it. A worker ended by a signal (killed, out of memory) is not tried again.
_TRANSIENT = re.compile(
    r"connection (closed|reset|refused)|pair closure|timed out waiting|address already in use|EADDRINUSE",
    re.IGNORECASE,
)


def transient(error: str | None) -> bool:
    """Whether a failed launch is worth one more try: the same launch may well succeed."""
    if not error or signal_of(error):  # a rank ended by a signal
        return False
    return _TRANSIENT.search(error) is not None


def aborted(error: str | None) -> bool:
    """Whether a rank ended by SIGABRT: gloo's transport aborts the process on a socket failure of a busy
    machine. Unlike a rank killed from outside (SIGKILL, the out-of-memory killer), worth one more try."""
    return signal_of(error) == "SIGABRT"
