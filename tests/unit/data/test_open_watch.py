"""Opens of files under a folder, seen whoever opens them and however; listings and other folders not."""

from __future__ import annotations

import mmap
import os
import subprocess

from stash_core.data.open_watch import MAX_WATCHED_DIRS, OpenWatch


def test_every_way_of_reading_a_file_under_the_folder_is_an_open_and_nothing_else_is(tmp_path) -> None:
    root = tmp_path / "data"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "a.bin").write_bytes(b"a" * 4096)
    (root / "deep" / "er" / "b.bin").write_bytes(b"b" * 4096)
    (tmp_path / "other.bin").write_bytes(b"c")
    watch = OpenWatch(root)
    os.listdir(root)
    list(root.rglob("*"))  # listings open folders, not files
    (tmp_path / "other.bin").read_bytes()
    assert watch.opens() == 0
    (root / "a.bin").read_bytes()
    assert watch.opens() == 1
    fd = os.open(root / "deep" / "er" / "b.bin", os.O_RDONLY)  # a memory map opens its file first
    mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    os.close(fd)
    mapped.close()
    subprocess.run(["cat", str(root / "a.bin")], capture_output=True, check=True)  # another process
    assert watch.close() == 3
    assert watch.opens() is None  # closed: no longer watched


def test_a_folder_tree_too_large_to_watch_whole_is_not_watched(tmp_path) -> None:
    for index in range(MAX_WATCHED_DIRS + 1):
        (tmp_path / f"d{index}").mkdir()
    assert OpenWatch(tmp_path).opens() is None
