"""The page-cache state of the files a script reads (--data-dir), kept from inside a run.

In a cold run (R2) every worker evicts each file under the data directory as soon as the script (or its
DataLoader workers) closes it, as Stash's own loader does (data/evicting_open.py: builtins.open, io.open,
os.open). Reads it cannot see (memory maps, C libraries, spawned processes) are caught by the fallback: the
first worker of each machine also evicts the directory's files about once a second while the script runs.
On remote machines (where the launcher cannot reach the page cache) that worker also makes the files
resident or evicts them before the script starts.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from stash_core.data import pagecache
from stash_core.data.evicting_open import evict_after_read
from stash_core.data.open_watch import OpenWatch
from stash_core.data.tree import files_under
from stash_core.measure.worker_job import WorkerJob

MIN_EVICT_PERIOD_S = 1.0
EVICT_DUTY = 0.1  # at most this share of one core on eviction passes


def data_files(root: str) -> list[Path]:
    return files_under(root)  # as the launcher sets them up (links followed)


class CacheKeeper:
    def __init__(
        self, files: list[Path], action: str | None, keep_evicting: bool, watch: str | None = None
    ) -> None:
        self.files, self.action = files, action
        self.fraction: float | None = None
        self.opens: int | None = None  # files the script opened under `watch` (None: not watched)
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        if action == "resident":
            pagecache.make_resident(files)
        elif action == "evict":
            pagecache.evict(files)
        if action:
            self.fraction = pagecache.resident_fraction(files)
        # After Stash's own reads (residency above): from here on, every open is the script's.
        self.watch = OpenWatch(watch) if watch else None
        if keep_evicting:
            self.thread = threading.Thread(target=self._evict_while_running, daemon=True)
            self.thread.start()

    def _evict_while_running(self) -> None:
        period_s = MIN_EVICT_PERIOD_S
        while not self.stopped.wait(period_s):
            start = time.perf_counter()
            pagecache.evict(self.files)
            period_s = max(MIN_EVICT_PERIOD_S, (time.perf_counter() - start) / EVICT_DUTY)

    def stop(self) -> float | None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if self.watch is not None:
            self.opens = self.watch.close()
        return self.fraction


def cache_state_thread(job: WorkerJob) -> CacheKeeper | None:
    """The first worker of each machine keeps the data directory's page-cache state; None elsewhere."""
    if not job.get("data_dir") or job["data"] == "synthetic" or int(os.environ.get("LOCAL_RANK", "0")) != 0:
        return None
    files = data_files(job["data_dir"])
    # The cached run watches for the script's opens (the cold run's eviction passes open the files too).
    watch = job["data_dir"] if job["data"] == "cached" else None
    return CacheKeeper(files, job.get("cache_action"), keep_evicting=job["data"] == "cold", watch=watch)


def evict_each_read(job: WorkerJob) -> Callable[[], None]:
    """In a cold run with --data-dir, each data file read by this process leaves the page cache when closed;
    returns the function that ends it (a no-op elsewhere)."""
    if not job.get("data_dir") or job["data"] != "cold":
        return lambda: None
    return evict_after_read(job["data_dir"])
