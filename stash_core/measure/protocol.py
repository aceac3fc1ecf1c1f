"""The line protocol between workers (and `stash profile`) and whoever launched them.

A line `STASH-<KIND> <json>` on stdout carries a message; anything else is ordinary output.
The marker may appear after a prefix that a launcher adds (torchrun's "[rank0]:", ssh).
"""

from __future__ import annotations

import json
import os
import sys
from typing import NoReturn

from stash_core.units import json_safe

MARKER = "STASH-"
KINDS = ("PROGRESS", "RESULT", "ERROR", "PHASE", "DONE")


def emit(kind: str, payload, stream=None) -> None:
    stream = stream or sys.stdout
    stream.write(f"{MARKER}{kind} {json.dumps(json_safe(payload), allow_nan=False)}\n")
    stream.flush()


def parse(line: str) -> tuple[str, object] | None:
    """(kind, payload) for a protocol line, None for any other line."""
    start = line.find(MARKER)
    if start < 0:
        return None
    head, _, body = line[start + len(MARKER) :].partition(" ")
    if head not in KINDS:
        return None
    try:
        return head, json.loads(body)
    except json.JSONDecodeError:
        return None


def end_reported(status: int) -> NoReturn:
    """End a worker process that has reported and closed everything (its process group, its loader's
    workers): flush the streams and exit without the interpreter's teardown of torch, some 0.5 s of every
    worker of every launch, which the launch waits for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
