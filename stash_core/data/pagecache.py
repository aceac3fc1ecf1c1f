"""Page-cache control for one data set's files (never the whole machine, never sudo).

R3 needs the data fully resident, R2 needs it evicted; `resident_fraction` checks which one we got."""

from __future__ import annotations

import ctypes
import mmap
import os
import re
from collections.abc import Iterable
from pathlib import Path

import psutil

from stash_core.errors import UsageError
from stash_core.terminal import one_line

_PAGE_BYTES = mmap.PAGESIZE
_MAP_FAILED = ctypes.c_void_p(-1).value
_READ_CHUNK_BYTES = 1 << 20
_NO_LIMIT_BYTES = 1 << 60  # cgroup v1 reports "no limit" as a huge number

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.restype = ctypes.c_int
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


_LOW_BIT = bytes(value & 1 for value in range(256))  # mincore: bit 0 = resident, other bits reserved


def _open_readonly(path: Path | str) -> int:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise UsageError(f"cannot open data file {one_line(path)}: {exc.strerror}") from exc


def _resident_bytes(fd: int, size_bytes: int, page_flags: ctypes.Array) -> int:
    """Bytes of the open file `fd` that are in the page cache (mincore over a read-only mapping)."""
    pages = (size_bytes + _PAGE_BYTES - 1) // _PAGE_BYTES
    address = _libc.mmap(None, size_bytes, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if address in (None, _MAP_FAILED):
        errno = ctypes.get_errno()
        raise OSError(errno, f"mmap failed: {os.strerror(errno)}")
    try:
        if _libc.mincore(address, size_bytes, page_flags) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mincore failed: {os.strerror(errno)}")
    finally:
        _libc.munmap(address, size_bytes)
    flags = ctypes.string_at(page_flags, pages).translate(_LOW_BIT)
    resident = (pages - flags.count(0)) * _PAGE_BYTES
    if flags[-1]:
        resident -= pages * _PAGE_BYTES - size_bytes  # the last page is only partly file
    return resident


def resident_fraction(paths: Iterable[Path]) -> float:
    """Share of the files' bytes that sit in the page cache, 0..1 (1.0 when there are no bytes)."""
    total_bytes = 0
    resident_bytes = 0
    page_flags = (ctypes.c_ubyte * 256)()  # reused across files, grown on demand
    for path in paths:
        fd = _open_readonly(path)
        try:
            size_bytes = os.fstat(fd).st_size
            if size_bytes == 0:
                continue  # nothing to cache, and mmap of length 0 is invalid
            pages = (size_bytes + _PAGE_BYTES - 1) // _PAGE_BYTES
            if pages > len(page_flags):
                page_flags = (ctypes.c_ubyte * pages)()
            resident_bytes += _resident_bytes(fd, size_bytes, page_flags)
            total_bytes += size_bytes
        finally:
            os.close(fd)
    return resident_bytes / total_bytes if total_bytes else 1.0


def sync_filesystem_of(fd: int) -> None:
    """Flush the dirty pages of the file system holding the open file `fd` (syncfs; sync where it fails)."""
    syncfs = getattr(_libc, "syncfs", None)  # glibc 2.14 and later
    if syncfs is None or syncfs(fd) != 0:
        os.sync()


def evict(paths: Iterable[Path]) -> None:
    """Drop these files' pages from the page cache: each file system that holds them is synced first, as
    POSIX_FADV_DONTNEED skips dirty pages (a data set just copied or written would stay cached)."""
    synced_devices: set[int] = set()
    for path in paths:
        fd = _open_readonly(path)
        try:
            device = os.fstat(fd).st_dev
            if device not in synced_devices:
                sync_filesystem_of(fd)
                synced_devices.add(device)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# File systems whose files live in memory: nothing can be evicted from them to a disk.
_MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def memory_filesystem(path: Path | str) -> str | None:
    """The type of the file system holding `path` when it keeps its files in memory (tmpfs, ramfs), else None
    (also when /proc/self/mountinfo cannot be read)."""
    target = os.path.realpath(path)
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    best_mount, best_type = "", None
    for line in lines:
        fields, _, after = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not after:
            continue
        # Mount points escape space, tab, newline and backslash as octal (\040 ...).
        mount = _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), parts[4])
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best_mount):  # the last of equal mounts is the one on top
            best_mount, best_type = mount, after.split()[0]
    return best_type if best_type in _MEMORY_FILESYSTEMS else None


def make_resident(paths: Iterable[Path]) -> None:
    """Read every file fully so all its pages are in the page cache."""
    buffer = bytearray(_READ_CHUNK_BYTES)
    view = memoryview(buffer)
    for path in paths:
        fd = _open_readonly(path)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            while os.readv(fd, [view]) > 0:
                pass
        finally:
            os.close(fd)


def _cgroup_available_bytes() -> int | None:
    """Memory left under this process's memory cgroup limit (page cache is charged to it), if limited."""
    try:
        cgroup_lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in cgroup_lines:
        _, controllers, cgroup_path = line.split(":", 2)
        rel = cgroup_path.lstrip("/")
        if controllers == "":  # cgroup v2
            folder = Path("/sys/fs/cgroup") / rel
            limit_file, usage_file, inactive_key = "memory.max", "memory.current", "inactive_file"
        elif "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / rel
            limit_file, usage_file = "memory.limit_in_bytes", "memory.usage_in_bytes"
            inactive_key = "total_inactive_file"
        else:
            continue
        try:
            limit_text = (folder / limit_file).read_text().strip()
            if limit_text == "max" or int(limit_text) >= _NO_LIMIT_BYTES:
                continue
            usage = int((folder / usage_file).read_text())
            stats = {
                parts[0]: int(parts[1])
                for parts in (row.split() for row in (folder / "memory.stat").read_text().splitlines())
                if len(parts) == 2
            }
        except (OSError, ValueError):
            continue
        # Inactive file pages are reclaimable, just as MemAvailable counts them.
        return max(0, int(limit_text) - usage + stats.get(inactive_key, 0))
    return None


def available_memory_bytes() -> int:
    """Memory that can hold the data set's pages now: psutil's available, capped by a cgroup limit."""
    available = int(psutil.virtual_memory().available)
    cgroup_available = _cgroup_available_bytes()
    return min(available, cgroup_available) if cgroup_available is not None else available


def fits_in_memory(total_bytes: int, safety: float = 0.7) -> bool:
    """Whether a data set of `total_bytes` can stay cached next to training (uses `safety` of available)."""
    return total_bytes <= safety * available_memory_bytes()
