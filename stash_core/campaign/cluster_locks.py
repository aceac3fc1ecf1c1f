"""One cloud campaign at a time on each SkyPilot cluster. A cluster's name is the same on every run of a
campaign (cloud_plan.cluster_name), so that a re-run after a crash finds what the crash left; a second
campaign started meanwhile would take the first one's live cluster for such a leftover, cancel its jobs and
tear it down. Each campaign holds an exclusive flock on a file per cluster it runs, under the user's cache
folder, while it runs; the operating system releases it when the process ends, however it ends."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.pathargs import user_cache_dir

try:
    import fcntl
except ImportError:  # not on POSIX: no lock, as before it
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def clusters_held(clusters: list[str]) -> Iterator[None]:
    """Hold every cluster of `clusters` for this campaign; UsageError (one line) naming the first one that
    another campaign holds, and the process that holds it, before anything is launched."""
    folder = user_cache_dir("cloud-clusters")
    if fcntl is None or folder is None or not clusters:
        yield
        return
    held: list[int] = []
    try:
        for cluster in clusters:
            fd = _hold(folder, cluster)
            if fd is not None:
                held.append(fd)
        yield
    finally:
        for fd in held:
            os.close(fd)  # releases the flock


def _hold(folder: Path, cluster: str) -> int | None:
    """The descriptor holding `cluster`'s lock; None where its file cannot be made (a read-only cache
    folder: the campaign runs unguarded, as without flock)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f"{cluster}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        by = f" (process {holder})" if holder.isdigit() else ""
        raise UsageError(f"cluster {cluster} is in use by another cloud campaign of this database{by}: let "
                         "it end first, or give this one another --db") from None  # fmt: skip
    except OSError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
