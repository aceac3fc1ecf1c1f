"""Counted steps of the zoo's models kept on disk, so that a prediction after the first for a model, batch,
input shape and attention does not trace the step again (tracing imports torch's compiler and walks every
operator: seconds on a small machine, against milliseconds to read the count back).

A file is named by a digest of what determines the count: the model's name, batch, input shape and attention,
torch's version, and the source of the zoo and of the counting code, so an edit of either starts afresh.
Only the zoo's own models are kept (a user's model file can change under the same name). The folder is
$STASH_CACHE_DIR, else $XDG_CACHE_HOME/stash/steps, else ~/.cache/stash/steps (none with no home folder);
a folder that cannot be written only costs the time, and an unreadable or foreign file is ignored and traced
again. The folder keeps the MAX_KEPT counts read or written last (a count is tens of kB, and every upgrade of
torch or Stash starts a new set): a write beyond them removes the least recently used, and a temporary file
an interrupted write left behind.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from stash_core.pathargs import env_path, user_cache_dir

FORMAT = 1
MAX_KEPT = 500  # counted steps kept on disk: of the order of 30 MB
STALE_TEMPORARY_S = 3600.0  # a temporary file older than this is a write that was interrupted
# The counting code: step_cost.py and every module of this package the tracer imports, directly or not
_COUNTING_CODE = ("step_cost.py", "step_trace.py", "step_types.py", "attention.py", "op_classes.py", "rnn.py",
                  "rnn_costs.py")  # fmt: skip


def cache_dir() -> Path | None:
    """$STASH_CACHE_DIR itself, else the user's cache folder's steps/ (None with no home folder)."""
    return env_path("STASH_CACHE_DIR") or user_cache_dir("steps")


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    digest = hashlib.sha256(importlib.metadata.version("torch").encode())  # without importing torch
    here = Path(__file__).resolve().parent
    zoo_folder = here.parents[1] / "zoo"
    sources = sorted(zoo_folder.glob("*.py")) + [here / name for name in _COUNTING_CODE]
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cached(key: tuple, count: Callable[[], object], decode: Callable[[dict], object]) -> object:
    """The count for `key` (model, batch, shape, attention) from disk, else count() written there. A user's
    FILE.py:FACTORY is counted afresh (its file may change); a zoo name is kept (an unknown name fails in
    count(), and nothing is written)."""
    if ":" in str(key[0]):
        return count()
    name = hashlib.sha256(json.dumps([FORMAT, _code_digest(), *key], default=list).encode()).hexdigest()
    folder = cache_dir()
    if folder is None:  # no home folder to keep it in: counted every time
        return count()
    path = folder / f"{name[:32]}.json"
    found = _read(path, decode)
    if found is not None:
        _touch(path)  # read last: kept before counts not used for longer
        return found
    result = count()
    _write(path, result)
    _prune(folder)
    return result


def _read(path: Path, decode: Callable[[dict], object]) -> object | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return decode(json.load(handle))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write(path: Path, cost: object) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return  # a read-only or full disk: the next prediction traces again
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(asdict(cost), out)
        os.replace(temporary, path)
    except (OSError, TypeError, ValueError):
        Path(temporary).unlink(missing_ok=True)


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only folder: its counts are only read, never pruned


def _prune(folder: Path) -> None:
    """Leave the MAX_KEPT counts used last, and no temporary file of an interrupted write."""
    try:
        entries = [(entry.stat().st_mtime, entry) for entry in os.scandir(folder) if entry.is_file()]
    except OSError:
        return
    now = time.time()
    counts = sorted((item for item in entries if item[1].name.endswith(".json")), key=lambda item: -item[0])
    unused = [entry for _, entry in counts[MAX_KEPT:]]
    stale = [
        entry for mtime, entry in entries if entry.name.endswith(".tmp") and now - mtime > STALE_TEMPORARY_S
    ]
    for entry in unused + stale:
        try:
            os.unlink(entry.path)
        except OSError:
            pass  # removed by another process meanwhile, or not ours to remove
