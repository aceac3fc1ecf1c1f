"""Each data file leaves the page cache as soon as the process that read it closes it, whichever way it was
opened (open, pathlib, PIL, os.open), in forked DataLoader workers too; other files and writes are left
alone."""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path

import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from stash_core.data.evicting_open import evict_after_read
from stash_core.data.pagecache import make_resident, resident_fraction

FILE_BYTES = 64 * 1024


def write_synced(path: Path, data: bytes) -> Path:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())  # clean pages, so they can be evicted
    return path


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    for index in range(24):
        write_synced(root / f"{index:02}.bin", os.urandom(FILE_BYTES))
    image = io.BytesIO()
    Image.frombytes("RGB", (128, 128), os.urandom(128 * 128 * 3)).save(image, format="PNG", compress_level=0)
    write_synced(root / "image.png", image.getvalue())
    make_resident(files(root))
    assert resident_fraction(files(root)) > 0.95
    return root


def files(root: Path) -> list[Path]:
    return sorted(root.iterdir())


def read_every_way(root: Path) -> None:
    for path in files(root)[:6]:
        with open(path, "rb") as handle:
            handle.read()
    for path in files(root)[6:12]:
        path.read_bytes()
    for path in files(root)[12:18]:
        len(open(path, encoding="latin-1").read())  # text mode, closed by the garbage collector
    for path in files(root)[18:24]:
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 1 << 16):
            pass
        os.close(fd)
    with Image.open(root / "image.png") as image:
        image.load()


def test_files_read_every_way_leave_the_page_cache(data: Path) -> None:
    remove = evict_after_read(data)
    try:
        read_every_way(data)
    finally:
        remove()
    assert resident_fraction(files(data)) < 0.05


def test_without_it_the_same_reads_stay_resident(data: Path) -> None:
    read_every_way(data)  # the control: reading alone does not evict
    assert resident_fraction(files(data)) > 0.95


def test_other_files_and_writes_are_left_alone_and_everything_is_put_back(data: Path, tmp_path: Path) -> None:
    other = write_synced(tmp_path / "other.bin", os.urandom(FILE_BYTES))
    make_resident([other])
    before = (builtins.open, io.open, os.open, os.close)
    remove = evict_after_read(data)
    try:
        other.read_bytes()
        with open(data / "new.txt", "w") as handle:  # written, not read: the plain open
            handle.write("x")
        assert type(open(data / "00.bin", "r+b")).__name__ == "BufferedRandom"
    finally:
        remove()
    assert (builtins.open, io.open, os.open, os.close) == before
    assert resident_fraction([other]) > 0.95


class Files(Dataset):
    def __init__(self, root: Path) -> None:
        self.paths = sorted(root.glob("*.bin"))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor(len(self.paths[index].read_bytes()))


def test_a_cold_epoch_through_forked_loader_workers_leaves_little_resident(data: Path) -> None:
    remove = evict_after_read(data)
    try:
        loader = DataLoader(Files(data), batch_size=4, num_workers=2)
        total = sum(int(batch.sum()) for batch in loader)
    finally:
        remove()
    assert total == 24 * FILE_BYTES
    assert resident_fraction(sorted(data.glob("*.bin"))) < 0.05
