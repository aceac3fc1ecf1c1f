"""The line protocol between workers (and `stash profile`) and whoever launched them.

A line `STASH-<KIND> <json>` on stdout carries a message; anything else is ordinary output.
The marker may appear after a prefix that a launcher adds (torchrun's "[rank0]:", ssh).

Workers share stdout with the code they run (a user's script prints there, and may print anything, even
"STASH-ERROR ..."): a launch's workers mark each line with the launch's token (`STASH-<KIND>@<token>`, the
job's `protocol_token`, set by use_token when the job is read), and the launcher reads only lines of its
own token. Lines between Stash's own processes (a profile's child and its parent) carry none.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import secrets
import signal
import sys
import time
from typing import NoReturn

from stash_core.units import json_safe

MARKER = "STASH-"
# What ps and top show for each worker of a launch (forked from torchrun, it would show its pt_elastic):
# a measuring worker, a bandwidth probe's, a parameter-server training's. At most 15 characters.
WORKER_NAME, PROBE_NAME, PS_NAME = "stash-worker", "stash-probe", "stash-ps-worker"
_PR_SET_NAME = 15
FAILED_FORKED_EXIT_DELAY_S = 1.0
KINDS = ("PROGRESS", "LOOP_END", "RESULT", "ERROR", "PHASE", "DONE")
TOKEN_KEY = "protocol_token"  # the key of a worker job that holds its launch's token
_token = [""]  # this process's: set in workers (use_token), empty elsewhere
_stream: list = [None]  # where this process's lines go (use_stream); None: sys.stdout as it is then


def new_token() -> str:
    """A launch's token: what marks its workers' lines apart from what the code they run prints."""
    return secrets.token_hex(8)


def use_token(token: str | None) -> None:
    """Mark every line this process emits from now on with `token` (a worker, as its job says)."""
    _token[0] = token or ""


def use_stream(stream) -> None:
    """Emit every line to `stream` from now on: a script's worker keeps its lines out of the script's
    sys.stdout, which the script may replace and Stash tails for the script's own output."""
    _stream[0] = stream


def emit(kind: str, payload, stream=None) -> None:
    stream = stream or _stream[0] or sys.stdout
    head = f"{kind}@{_token[0]}" if _token[0] else kind
    stream.write(f"{MARKER}{head} {json.dumps(json_safe(payload), allow_nan=False)}\n")
    stream.flush()


def parse(line: str, token: str | None = None) -> tuple[str, object] | None:
    """(kind, payload) for a protocol line, None for any other line; with `token`, only a line of that
    token is one (a worker's), without, only a line of none (a Stash process's)."""
    start = line.find(MARKER)
    if start < 0:
        return None
    head, _, body = line[start + len(MARKER) :].partition(" ")
    head, _, marked = head.partition("@")
    if head not in KINDS or marked != (token or ""):
        return None
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    return (head, payload) if well_formed(head, payload) else None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def well_formed(kind: str, payload: object) -> bool:
    """Whether `payload` has the shape of a `kind` message: a line of a script's own output that happens to
    hold the marker (print("STASH-PROGRESS {}")) is output, never a message that stops the profile."""
    if kind == "ERROR":
        return isinstance(payload, dict | str)
    if not isinstance(payload, dict):
        return False
    if kind == "PROGRESS":
        relative = payload.get("relative_ci")
        fixed = payload.get("fixed_iterations")
        return (
            all(_count(payload.get(key)) for key in ("iterations", "kept", "max_iterations"))
            and _number(payload.get("target_relative_ci"))
            and (relative is None or _number(relative))
            and (fixed is None or _count(fixed))
        )
    return True


def start_worker(name: str) -> None:
    """Name this process where the system allows it (Linux; elsewhere it keeps its name); forked from
    torchrun, give it the signal handling of a new interpreter instead of torchrun's handlers, which would
    turn a SIGTERM into an exception."""
    if multiprocessing.parent_process() is not None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode(), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def end_reported(status: int) -> NoReturn:
    """End a worker process that has reported and closed everything (its process group, its loader's
    workers): flush the streams and exit without the interpreter's teardown of torch, some 0.5 s of every
    worker of every launch, which the launch waits for. A worker forked by torchrun returns to torchrun's
    process wrapper, which reports its status and exits as quickly."""
    sys.stdout.flush()
    sys.stderr.flush()
    if multiprocessing.parent_process() is not None:  # forked by torchrun (--start-method fork): it exits us
        if status:
            # torchrun then reports the first worker it sees end (it looks every 0.1 s); a peer ended by a
            # signal (killed, out of memory) is the cause of this one's lost connection, so it goes first.
            time.sleep(FAILED_FORKED_EXIT_DELAY_S)
        raise SystemExit(status)
    os._exit(status)
