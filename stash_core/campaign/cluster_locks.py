"""One cloud campaign at a time on each SkyPilot cluster. A cluster's name is the same on every run of a
campaign (cloud_plan.cluster_name), so that a re-run after a crash finds what the crash left; a second
campaign started meanwhile would take the first one's live cluster for such a leftover, cancel its jobs and
tear it down. Each campaign holds an exclusive flock on a file per cluster it runs, under the user's cache
folder, while it runs; the operating system releases it when the process ends, however it ends. The files
stay (empty but for the holder's process id): removing a file another process may be locking is a race."""

from __future__ import annotations

import os
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.pathargs import user_cache_dir

try:
    import fcntl
except ImportError:  # not on POSIX: no lock, as before it
    fcntl = None  # type: ignore[assignment]

HINT = "STASH_CACHE_DIR chooses the folder"


def hold_clusters(clusters: list[str]) -> list[int]:
    """Hold every cluster of `clusters` for this campaign: the descriptors that hold them (release_clusters
    gives them back). UsageError (one line) naming the first one another campaign holds and its process, or a
    lock that cannot be made, before anything is launched; nothing held then."""
    folder = user_cache_dir("cloud-clusters")
    if fcntl is None or not clusters:
        return []
    if folder is None:
        raise UsageError(f"no folder to hold the campaign's clusters in: no home folder ({HINT})")
    held: list[int] = []
    try:
        for cluster in clusters:
            held.append(_hold(folder, cluster))
    except BaseException:
        release_clusters(held)
        raise
    return held


def release_clusters(held: list[int]) -> None:
    for fd in held:
        os.close(fd)  # releases the flock


def _hold(folder: Path, cluster: str) -> int:
    path = folder / f"{cluster}.lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as error:
        raise UsageError(f"cannot hold cluster {cluster} for this campaign: {error.strerror}: {path} "
                         f"({HINT})") from None  # fmt: skip
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        by = f" (process {holder})" if holder.isdigit() else ""
        raise UsageError(f"cluster {cluster} is in use by another cloud campaign of this database{by}: let "
                         "it end first, or give this one another --db") from None  # fmt: skip
    except OSError as error:
        os.close(fd)
        raise UsageError(f"cannot hold cluster {cluster} for this campaign: {error.strerror}: "
                         f"{path}") from None  # fmt: skip
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
