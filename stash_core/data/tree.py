"""The files and folders under a data folder as a script reaches them: links followed (a folder of links to
the data, or a linked folder, is a common subset), each file once by its real path, a link loop walked once.
The launcher's page-cache setup, the workers' eviction and the watch of the script's opens all see these."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def folders_under(root: str | os.PathLike) -> Iterator[tuple[str, list[str]]]:
    """(real folder, its file names) of `root` and every folder under it, links followed, each real folder
    once."""
    seen: set[str] = set()
    for folder, folders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            folders[:] = []  # a loop, or a folder linked twice: not into it again
            continue
        seen.add(real)
        yield real, names


def files_under(root: str | os.PathLike) -> list[Path]:
    """The regular files under `root` by their real paths, sorted (a broken link or a FIFO is no file). The
    folders are real already: only a link to a file is resolved (a data set has a million files)."""
    found = set()
    for folder, names in folders_under(root):
        for name in names:
            path = Path(folder, name)
            if path.is_file():
                found.add(path.resolve() if path.is_symlink() else path)
    return sorted(found)


def folders_reached(root: str | os.PathLike) -> Iterator[str]:
    """The real folders of folders_under and those that links to single files lead to (an open through a
    link happens in the folder the file is in), each once."""
    seen: set[str] = set()
    for folder, names in folders_under(root):
        reached = [folder]
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path) and os.path.isfile(path):
                reached.append(os.path.dirname(os.path.realpath(path)))
        for real in reached:
            if real not in seen:
                seen.add(real)
                yield real
