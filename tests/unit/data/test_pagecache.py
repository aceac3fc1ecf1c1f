"""Page-cache control of one set of files: resident_fraction (mincore), evict, make_resident, memory fit."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from stash_core.data.pagecache import (
    available_memory_bytes,
    evict,
    fits_in_memory,
    make_resident,
    memory_filesystem,
    resident_fraction,
)
from stash_core.errors import UsageError


def _write_synced(path: Path, size_bytes: int) -> Path:
    """A file of random bytes, fsync'ed so its pages are clean and can be evicted."""
    with open(path, "wb") as handle:
        handle.write(os.urandom(size_bytes))
        handle.flush()
        os.fsync(handle.fileno())
    return path


@pytest.fixture()
def files(tmp_path: Path) -> list[Path]:
    """40 files of 64 KiB plus odd sizes (one byte, a partial last page, an empty file)."""
    paths = [_write_synced(tmp_path / f"f{i:02d}.bin", 64 * 1024) for i in range(40)]
    paths.append(_write_synced(tmp_path / "one_byte.bin", 1))
    paths.append(_write_synced(tmp_path / "partial_page.bin", 3 * 4096 + 100))
    paths.append(_write_synced(tmp_path / "empty.bin", 0))
    return paths


def test_resident_then_evicted_then_mixed(files: list[Path]) -> None:
    make_resident(files)
    assert resident_fraction(files) == pytest.approx(1.0, abs=0.01)

    evict(files)
    assert resident_fraction(files) < 0.2

    # Half of the bytes back in: the fraction lands in between.
    first_half = files[:20]
    make_resident(first_half)
    mixed = resident_fraction(files)
    assert 0.3 < mixed < 0.7
    assert resident_fraction(first_half) == pytest.approx(1.0, abs=0.01)
    assert resident_fraction(files[20:40]) < 0.2


def test_partial_last_page_is_not_over_counted(files: list[Path]) -> None:
    small = [p for p in files if p.name in ("one_byte.bin", "partial_page.bin")]
    make_resident(small)
    assert resident_fraction(small) == 1.0  # exactly: a resident tail page counts only the file's bytes


def test_no_bytes_counts_as_fully_resident(files: list[Path]) -> None:
    assert resident_fraction([]) == 1.0
    assert resident_fraction([p for p in files if p.name == "empty.bin"]) == 1.0


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot open"):
        resident_fraction([tmp_path / "absent.bin"])
    with pytest.raises(UsageError):
        evict([tmp_path / "absent.bin"])


def test_available_memory_and_fit() -> None:
    available = available_memory_bytes()
    assert 0 < available <= psutil.virtual_memory().total
    assert fits_in_memory(1)
    # Wide margins: available memory moves a little while other processes run.
    assert fits_in_memory(int(available * 0.35))
    assert not fits_in_memory(int(available * 1.4))
    assert not fits_in_memory(int(available * 0.5), safety=0.25)
    assert fits_in_memory(int(available * 0.5), safety=1.0)
    assert not fits_in_memory(10**18)


def test_freshly_written_files_are_evicted_too(tmp_path: Path) -> None:
    """Dirty pages (a data set just copied, not yet written back) are skipped by DONTNEED alone."""
    if memory_filesystem(tmp_path):
        pytest.skip("the temporary folder is in memory: nothing can be evicted from it")
    paths = []
    for index in range(8):
        path = tmp_path / f"fresh{index}.bin"
        path.write_bytes(os.urandom(256 * 1024))  # no fsync: its pages are dirty
        paths.append(path)
    evict(paths)
    assert resident_fraction(paths) < 0.2


def test_memory_filesystem_names_tmpfs_only(tmp_path: Path) -> None:
    assert memory_filesystem("/proc/self") is None  # proc: not a file system that holds data in memory
    if Path("/dev/shm").is_dir() and "tmpfs" in Path("/proc/self/mountinfo").read_text():
        shm_type = next(
            line.split(" - ")[1].split()[0]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4] == "/dev/shm"
        )
        assert memory_filesystem("/dev/shm") == (shm_type if shm_type in ("tmpfs", "ramfs") else None)
    assert memory_filesystem(tmp_path) in (None, "tmpfs", "ramfs")
