"""Evict each file of a data directory from the page cache as soon as a process has read it, when the
process opens the files itself (a user's script in a cold run), as Stash's own loader does for its data sets.

While installed, opening a file under the directory read-only gives a file whose close first drops its pages
(posix_fadvise DONTNEED): builtins.open and io.open (used by pathlib's read_bytes/read_text, PIL's
Image.open, numpy and torch.load on a path), and os.open with its os.close. Processes forked after install
(DataLoader workers) inherit it. Files opened any other way (memory maps, C libraries, spawned processes)
are not seen: the caller keeps a periodic sweep of the directory as a fallback.
"""

from __future__ import annotations

import builtins
import io
import os
from collections.abc import Callable
from pathlib import Path

READ_ONLY_MODE_LETTERS = frozenset("rbt")


def drop_pages(fd: int) -> None:
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass  # a file system without page-cache advice (or a closed descriptor): nothing to drop


class EvictingFileIO(io.FileIO):
    """A read-only raw file that drops its pages from the page cache when it is closed (also when garbage
    collected unclosed: io's finaliser calls close)."""

    def close(self) -> None:
        if not self.closed:
            drop_pages(self.fileno())
        super().close()


class Evictor:
    def __init__(self, root: str | Path) -> None:
        roots = {os.path.abspath(root), os.path.realpath(root)}
        self.prefixes = tuple(path.rstrip(os.sep) + os.sep for path in roots)
        self.fds: dict[int, tuple[int, int]] = {}  # os.open descriptors of data files: (device, inode)
        self.original = (builtins.open, io.open, os.open, os.close)

    def under(self, file) -> bool:
        if not isinstance(file, str | bytes | os.PathLike):
            return False  # a descriptor
        return os.path.abspath(os.fsdecode(file)).startswith(self.prefixes)

    def open(self, file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True,
             opener=None):  # fmt: skip
        if (
            opener is not None
            or not closefd
            or not set(mode) <= READ_ONLY_MODE_LETTERS
            or not self.under(file)
        ):
            return self.original[0](file, mode, buffering, encoding, errors, newline, closefd, opener)
        raw = EvictingFileIO(file, "r")
        try:
            if "b" in mode:
                if buffering == 0:
                    return raw
                return io.BufferedReader(raw, buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE)
            text = io.TextIOWrapper(
                io.BufferedReader(raw), encoding, errors, newline, line_buffering=buffering == 1
            )
            text.mode = mode
            return text
        except BaseException:
            raw.close()
            raise

    def os_open(self, path, flags, mode=0o777, *, dir_fd=None):
        fd = self.original[2](path, flags, mode, dir_fd=dir_fd)
        if dir_fd is None and flags & os.O_ACCMODE == os.O_RDONLY and self.under(path):
            stat = os.fstat(fd)
            self.fds[fd] = (stat.st_dev, stat.st_ino)
        return fd

    def os_close(self, fd: int) -> None:
        known = self.fds.pop(fd, None)
        if known is not None:
            try:  # the same file still: the number may have been closed another way and reused
                stat = os.fstat(fd)
                if (stat.st_dev, stat.st_ino) == known:
                    drop_pages(fd)
            except OSError:
                pass
        self.original[3](fd)

    def install(self) -> None:
        builtins.open = io.open = self.open
        os.open, os.close = self.os_open, self.os_close

    def remove(self) -> None:
        builtins.open, io.open, os.open, os.close = self.original


def evict_after_read(root: str | Path) -> Callable[[], None]:
    """Install for the files under `root`; returns the function that puts the original functions back."""
    evictor = Evictor(root)
    evictor.install()
    return evictor.remove
