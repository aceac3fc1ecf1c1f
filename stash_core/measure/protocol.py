"""The line protocol between workers (and `stash profile`) and whoever launched them.

A line `STASH-<KIND> <json>` on stdout carries a message; anything else is ordinary output.
The marker may appear after a prefix that a launcher adds (torchrun's "[rank0]:", ssh).
"""

from __future__ import annotations

import json
import math
import sys

MARKER = "STASH-"
KINDS = ("PROGRESS", "RESULT", "ERROR", "PHASE", "DONE")


def emit(kind: str, payload, stream=None) -> None:
    stream = stream or sys.stdout
    stream.write(f"{MARKER}{kind} {json.dumps(finite(payload), allow_nan=False)}\n")
    stream.flush()


def finite(value):
    """JSON has no NaN or infinity: send them as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


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
