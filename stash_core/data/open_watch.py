"""Whether any process opens a file under a folder while a run goes on (Linux inotify, IN_OPEN).

Every way of reading a file opens it first (read, memory maps, C libraries, other processes), so a script
profiled with --data-dir that opens nothing there during a real-data run reads its data from elsewhere: its
cold and cached runs then differ in nothing the disk stall measures. Opens of the folders themselves (a
listing) are not counted, nor files reached through links from elsewhere (their events are the target's).
"""

from __future__ import annotations

import ctypes
import os
import struct

from stash_core.data.tree import folders_reached

IN_OPEN = 0x00000020
IN_Q_OVERFLOW = 0x00004000  # more events than the queue holds: there were opens
IN_ISDIR = 0x40000000
MAX_WATCHED_DIRS = 4096  # a folder tree larger than this is not watched (the kernel's default is 8192)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class OpenWatch:
    """Counts file opens under `root` from now on; `opens()` is None where they cannot be watched."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.fd: int | None = None
        self.count = 0
        folders = _folders(os.fspath(root))
        if folders is None:
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):  # no inotify here
            return
        if fd < 0:
            return
        for folder in folders:
            if libc.inotify_add_watch(fd, os.fsencode(folder), IN_OPEN) < 0:
                os.close(fd)  # a folder left out would make "no opens" untrue
                return
        self.fd = fd

    def opens(self) -> int | None:
        """File opens seen so far (at least 1 where the queue overflowed), or None: not watched."""
        if self.fd is None:
            return None
        while True:
            try:
                chunk = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return self.count
            except OSError:
                return self.count
            offset = 0
            while offset + _EVENT.size <= len(chunk):
                _, mask, _, name_len = _EVENT.unpack_from(chunk, offset)
                offset += _EVENT.size + name_len
                if mask & IN_Q_OVERFLOW or (mask & IN_OPEN and not mask & IN_ISDIR):
                    self.count += 1

    def close(self) -> int | None:
        """The opens seen, and the watch ended."""
        seen = self.opens()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        return seen


def _folders(root: str) -> list[str] | None:
    """The folder and every folder under it, links followed (an open through a link is seen on the folder
    the file really is in), or None past MAX_WATCHED_DIRS."""
    found = []
    for folder in folders_reached(root):
        found.append(folder)
        if len(found) > MAX_WATCHED_DIRS:
            return None
    return found or None
