"""JPEG data set: generator, ImageFolderDataset, corrupt files, TrainTransform, per-rank loader."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from stash_core.data import jpeg_dataset
from stash_core.data.jpeg_dataset import ImageFolderDataset, generate_synthetic_jpegs
from stash_core.data.loader import iterations_per_epoch, make_loader
from stash_core.data.pagecache import make_resident, resident_fraction
from stash_core.data.transforms import IMAGENET_MEAN, IMAGENET_STD, TrainTransform, random_resized_crop_box
from stash_core.errors import UsageError
from stash_core.interrupts import Cancelled, stop_requests

MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
STD = torch.tensor(IMAGENET_STD).view(3, 1, 1)


@pytest.fixture(scope="module")
def jpeg_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 JPEGs of 64 px in 4 classes, shared by the read-only tests of this module."""
    return generate_synthetic_jpegs(200, image_px=64, num_classes=4, root=tmp_path_factory.mktemp("jpegs"))


def _copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# --- generator -----------------------------------------------------------------------------------------


def test_generator_writes_decodable_jpegs_per_class(jpeg_root: Path) -> None:
    manifest = json.loads((jpeg_root / "MANIFEST.json").read_text())
    class_dirs = sorted(p for p in jpeg_root.iterdir() if p.is_dir())
    files = sorted(jpeg_root.rglob("*.jpg"))
    assert [p.name for p in class_dirs] == ["class_000", "class_001", "class_002", "class_003"]
    assert len(files) == manifest["count"] == 200
    assert [len(list(d.glob("*.jpg"))) for d in class_dirs] == [50, 50, 50, 50]
    assert manifest["total_bytes"] == sum(p.stat().st_size for p in files)
    for path in files[::40]:
        with Image.open(path) as image:
            assert image.format == "JPEG"
            assert image.size == (64, 64)
    # Content has structure and noise: sizes differ and are far from a flat image's few hundred bytes.
    sizes = [p.stat().st_size for p in files]
    assert len(set(sizes)) > 150
    assert min(sizes) > 2000


def test_generator_reuses_a_complete_set(tmp_path: Path) -> None:
    first = generate_synthetic_jpegs(30, image_px=32, num_classes=3, root=tmp_path)
    manifest_stat = (first / "MANIFEST.json").stat()
    image_mtimes = {p: p.stat().st_mtime_ns for p in first.rglob("*.jpg")}
    second = generate_synthetic_jpegs(30, image_px=32, num_classes=3, root=tmp_path)
    assert second == first
    assert (first / "MANIFEST.json").stat().st_mtime_ns == manifest_stat.st_mtime_ns
    assert {p: p.stat().st_mtime_ns for p in first.rglob("*.jpg")} == image_mtimes
    # A different seed is a different set.
    assert generate_synthetic_jpegs(30, image_px=32, num_classes=3, root=tmp_path, seed=1) != first


def test_generator_default_root_follows_stash_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path))
    root = generate_synthetic_jpegs(5, image_px=16)
    assert root == tmp_path / "datasets" / "synthetic-5-16px-s0"
    # Another class count is another set, not a reuse of the first.
    other = generate_synthetic_jpegs(5, image_px=16, num_classes=2)
    assert other != root
    assert len([p for p in other.iterdir() if p.is_dir()]) == 2


def test_generator_is_deterministic_with_and_without_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jpeg_dataset, "_POOL_MIN_COUNT", 10)
    pooled = generate_synthetic_jpegs(120, image_px=16, num_classes=3, root=tmp_path / "a")
    monkeypatch.setattr(jpeg_dataset, "_POOL_MIN_COUNT", 10**9)
    serial = generate_synthetic_jpegs(120, image_px=16, num_classes=3, root=tmp_path / "b")
    pooled_files = sorted(p.relative_to(pooled) for p in pooled.rglob("*.jpg"))
    assert pooled_files == sorted(p.relative_to(serial) for p in serial.rglob("*.jpg"))
    assert len(pooled_files) == 120
    for rel in pooled_files[::7]:
        assert (pooled / rel).read_bytes() == (serial / rel).read_bytes()


def test_interrupted_generation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_image = jpeg_dataset._synthetic_image

    def interrupt_after_ten(index: int, *args: object) -> Image.Image:
        if index >= 10:
            raise KeyboardInterrupt
        return real_image(index, *args)

    monkeypatch.setattr(jpeg_dataset, "_synthetic_image", interrupt_after_ten)
    with pytest.raises(KeyboardInterrupt):
        generate_synthetic_jpegs(40, image_px=16, num_classes=2, root=tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither the final folder nor a temp folder

    monkeypatch.setattr(jpeg_dataset, "_synthetic_image", real_image)
    root = generate_synthetic_jpegs(40, image_px=16, num_classes=2, root=tmp_path)
    assert len(list(root.rglob("*.jpg"))) == 40


def test_stale_temp_folder_of_a_dead_process_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / ".tmp-synthetic-8-16px-2c-s0-999999999"  # no such pid
    (stale / "class_000").mkdir(parents=True)
    generate_synthetic_jpegs(8, image_px=16, num_classes=2, root=tmp_path)
    assert not stale.exists()


def test_folder_without_manifest_is_rebuilt(tmp_path: Path) -> None:
    half_made = tmp_path / "synthetic-8-16px-2c-s0"
    (half_made / "class_000").mkdir(parents=True)
    (half_made / "class_000" / "junk.jpg").write_bytes(b"not a jpeg")
    root = generate_synthetic_jpegs(8, image_px=16, num_classes=2, root=tmp_path)
    assert (root / "MANIFEST.json").exists()
    assert not (root / "class_000" / "junk.jpg").exists()
    assert len(list(root.rglob("*.jpg"))) == 8


# --- ImageFolderDataset --------------------------------------------------------------------------------


def test_dataset_scans_classes_and_yields_transformed_samples(jpeg_root: Path) -> None:
    dataset = ImageFolderDataset(jpeg_root, TrainTransform(output_hw=(24, 20)))
    assert dataset.classes == ["class_000", "class_001", "class_002", "class_003"]
    assert len(dataset) == len(dataset.files) == len(dataset.labels) == 200
    assert dataset.total_bytes == sum(p.stat().st_size for p in dataset.files)
    assert sorted(set(dataset.labels)) == [0, 1, 2, 3]
    sample, label = dataset[123]
    assert sample.shape == (3, 24, 20)
    assert sample.dtype == torch.float32
    assert label == dataset.labels[123]
    assert dataset.files[123].parent.name == dataset.classes[label]


def test_dataset_accepts_any_case_image_suffix_and_ignores_other_files(tmp_path: Path) -> None:
    (tmp_path / "cats").mkdir()
    (tmp_path / "dogs").mkdir()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(tmp_path / "cats" / "a.JPG", format="JPEG")
    Image.new("L", (8, 8), 99).save(tmp_path / "dogs" / "b.png")
    (tmp_path / "dogs" / "notes.txt").write_text("not an image")
    dataset = ImageFolderDataset(tmp_path, transform=None)
    assert [p.name for p in dataset.files] == ["a.JPG", "b.png"]
    image, label = dataset[1]
    assert label == 1
    assert image.mode == "RGB"  # grey image converted


@pytest.mark.parametrize("layout", ["missing", "file", "empty", "no_images"])
def test_dataset_usage_errors(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "data"
    if layout == "file":
        root.write_text("x")
    elif layout == "empty":
        root.mkdir()
    elif layout == "no_images":
        (root / "class_a").mkdir(parents=True)
        (root / "class_a" / "readme.txt").write_text("x")
    with pytest.raises(UsageError):
        ImageFolderDataset(root, transform=None)


# --- corrupt files -------------------------------------------------------------------------------------


def test_corrupt_sample_is_replaced_and_counted(jpeg_root: Path, tmp_path: Path) -> None:
    root = _copy_tree(jpeg_root, tmp_path / "data")
    dataset = ImageFolderDataset(root, TrainTransform(output_hw=(16, 16)))
    broken = dataset.files[10]
    broken.write_bytes(broken.read_bytes()[:300])  # header intact, image data cut off
    sample, label = dataset[10]
    assert sample.shape == (3, 16, 16)
    assert label == dataset.labels[11]  # the next valid sample stands in
    assert dataset.corrupt_reads == 1


def test_corrupt_reads_in_loader_workers_are_visible_to_the_parent(jpeg_root: Path, tmp_path: Path) -> None:
    root = _copy_tree(jpeg_root, tmp_path / "data")
    dataset = ImageFolderDataset(root, TrainTransform(output_hw=(16, 16)))
    for index in (3, 77):
        dataset.files[index].write_bytes(b"garbage, not an image")
    loader = make_loader(dataset, batch_size=20, loader_workers=2, rank=0, world_size=1, pin_memory=False)
    batches = list(loader)
    assert len(batches) == 10
    assert dataset.corrupt_reads == 2  # each bad file is hit once per epoch, in a worker process


# --- TrainTransform ------------------------------------------------------------------------------------


def test_transform_shape_dtype_and_normalisation_range() -> None:
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, size=(90, 120, 3), dtype=np.uint8))
    tensor = TrainTransform(output_hw=(48, 40), generator=torch.Generator().manual_seed(0))(image)
    assert tensor.shape == (3, 48, 40)
    assert tensor.dtype == torch.float32
    assert tensor.is_contiguous()
    assert torch.all(tensor >= (0 - MEAN) / STD - 1e-5)
    assert torch.all(tensor <= (1 - MEAN) / STD + 1e-5)
    assert tensor.std() > 0.1  # not collapsed to a constant


@pytest.mark.parametrize("colour, expected", [((255, 255, 255), 1.0), ((0, 0, 0), 0.0)])
def test_transform_normalises_with_mean_and_std(colour: tuple[int, int, int], expected: float) -> None:
    tensor = TrainTransform(output_hw=(8, 8))(Image.new("RGB", (50, 30), colour))
    assert torch.allclose(tensor, ((expected - MEAN) / STD).expand(3, 8, 8), atol=1e-5)


def test_transform_flip() -> None:
    half = np.zeros((32, 32, 3), dtype=np.uint8)
    half[:, 16:] = 255  # left black, right white
    image = Image.fromarray(half)
    kept = TrainTransform(output_hw=(32, 32), scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=0.0)(image)
    flipped = TrainTransform(output_hw=(32, 32), scale=(1.0, 1.0), ratio=(1.0, 1.0), flip_p=1.0)(image)
    assert kept[:, :, 0].mean() < 0 < kept[:, :, -1].mean()
    assert flipped[:, :, 0].mean() > 0 > flipped[:, :, -1].mean()
    assert torch.allclose(flipped, kept.flip(-1), atol=1e-5)


def test_crop_box_stays_inside_and_follows_scale() -> None:
    generator = torch.Generator().manual_seed(1)
    boxes = [random_resized_crop_box(120, 80, (0.08, 1.0), (3 / 4, 4 / 3), generator) for _ in range(300)]
    for left, top, crop_w, crop_h in boxes:
        assert 0 <= left and left + crop_w <= 120
        assert 0 <= top and top + crop_h <= 80
        assert 0.07 <= crop_w * crop_h / (120 * 80) <= 1.0
        assert 3 / 4 - 0.1 <= crop_w / crop_h <= 4 / 3 + 0.1
    assert len(set(boxes)) > 250  # random, not a fixed crop


def test_crop_box_falls_back_to_central_crop() -> None:
    # An aspect ratio of 10 can never fit in a square image: the central fallback must be used.
    assert random_resized_crop_box(100, 100, (0.5, 1.0), (10.0, 10.0)) == (0, 45, 100, 10)
    assert random_resized_crop_box(100, 100, (0.5, 1.0), (0.1, 0.1)) == (45, 0, 10, 100)


def test_transform_is_reproducible_with_a_seeded_generator() -> None:
    image = Image.fromarray(np.random.default_rng(3).integers(0, 256, size=(64, 64, 3), dtype=np.uint8))
    first = TrainTransform(output_hw=(16, 16), generator=torch.Generator().manual_seed(7))
    second = TrainTransform(output_hw=(16, 16), generator=torch.Generator().manual_seed(7))
    outputs = [first(image) for _ in range(3)]
    assert all(torch.equal(a, second(image)) for a in outputs)
    assert not torch.equal(outputs[0], outputs[1])  # successive calls crop differently


# --- loader --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loader_workers", [0, 2])
def test_loader_yields_image_batches(jpeg_root: Path, loader_workers: int) -> None:
    dataset = ImageFolderDataset(jpeg_root, TrainTransform(output_hw=(32, 32)))
    loader = make_loader(
        dataset, batch_size=16, loader_workers=loader_workers, rank=0, world_size=1, pin_memory=True
    )
    for _epoch in range(2):  # persistent workers serve a second epoch
        batches = list(loader)
        assert len(batches) == iterations_per_epoch(200, 16, 1) == 12
        for images, labels in batches:
            assert images.shape == (16, 3, 32, 32)
            assert images.dtype == torch.float32
            assert labels.shape == (16,)
            assert labels.dtype == torch.int64


def test_loader_shards_across_ranks(jpeg_root: Path) -> None:
    dataset = ImageFolderDataset(jpeg_root, TrainTransform(output_hw=(16, 16)))
    shards = []
    for rank in range(2):
        loader = make_loader(
            dataset, batch_size=16, loader_workers=0, rank=rank, world_size=2, pin_memory=False
        )
        assert len(loader) == iterations_per_epoch(200, 16, 2) == 6
        shards.append(list(loader.sampler))
    assert len(shards[0]) == len(shards[1]) == 100
    assert set(shards[0]).isdisjoint(shards[1])
    assert sorted(shards[0] + shards[1]) == list(range(200))
    # Same seed -> same order, as every rank must agree on the partition.
    again = make_loader(dataset, batch_size=16, loader_workers=0, rank=0, world_size=2, pin_memory=False)
    assert list(again.sampler) == shards[0]


def test_loader_usage_errors(jpeg_root: Path) -> None:
    dataset = ImageFolderDataset(jpeg_root, transform=None)
    with pytest.raises(UsageError, match="too small"):
        make_loader(dataset, batch_size=64, loader_workers=0, rank=0, world_size=4, pin_memory=False)
    with pytest.raises(UsageError, match="rank"):
        make_loader(dataset, batch_size=4, loader_workers=0, rank=2, world_size=2, pin_memory=False)
    with pytest.raises(UsageError):
        make_loader(dataset, batch_size=0, loader_workers=0, rank=0, world_size=1, pin_memory=False)


@pytest.mark.parametrize(
    "dataset_size, batch_size, world_size, expected",
    [(200, 16, 1, 12), (200, 16, 2, 6), (10, 16, 1, 1), (7, 2, 3, 1), (1000, 10, 4, 25)],
)
def test_iterations_per_epoch(dataset_size: int, batch_size: int, world_size: int, expected: int) -> None:
    assert iterations_per_epoch(dataset_size, batch_size, world_size) == expected


# --- cold reads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("evict_after_read", [True, False])
def test_evict_after_read_leaves_files_cold_after_an_epoch(
    jpeg_root: Path, tmp_path: Path, evict_after_read: bool
) -> None:
    root = _copy_tree(jpeg_root, tmp_path / "data")
    os.sync()  # clean pages: only those can be evicted
    dataset = ImageFolderDataset(root, TrainTransform(output_hw=(16, 16)), evict_after_read=evict_after_read)
    make_resident(dataset.files)
    assert resident_fraction(dataset.files) > 0.95
    loader = make_loader(dataset, batch_size=20, loader_workers=2, rank=0, world_size=1, pin_memory=False)
    assert sum(len(labels) for _, labels in loader) == 200
    if evict_after_read:
        assert resident_fraction(dataset.files) < 0.2
    else:
        assert resident_fraction(dataset.files) > 0.95


POOL_END = """
import multiprocessing, signal, sys, time
from stash_core.interrupts import signals_as_interrupts
from stash_core.data.jpeg_dataset import _quiet_worker
def handlers(_):
    term, interrupt = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    return term == signal.SIG_DFL, interrupt == signal.SIG_IGN
with signals_as_interrupts():  # as the command has it while it prepares the images
    with multiprocessing.get_context("fork").Pool(2, initializer=_quiet_worker) as pool:
        print(all(all(pair) for pair in pool.map(handlers, range(8))))
        time.sleep(0.5)  # the workers wait for work when the pool ends them (SIGTERM)
"""


def test_the_image_writers_end_without_a_word(tmp_path) -> None:
    """Forked with the command's handlers, a writer could turn the pool's SIGTERM at its normal end into a
    traceback of its own (and Ctrl-C into another): the writers take the default SIGTERM and leave SIGINT."""
    import subprocess
    import sys

    from support import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", POOL_END], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True" and "Traceback" not in done.stderr, (done.stdout, done.stderr)


@pytest.mark.parametrize("count", [120, 500])  # one process, and the pool of two
def test_a_cancel_asked_while_the_images_are_written_stops_the_build_and_leaves_nothing(
    tmp_path: Path, count: int
) -> None:
    """A profile run from Python is stopped by a request, not a signal: the generator looks for it."""
    with stop_requests(lambda: True), pytest.raises(Cancelled):
        generate_synthetic_jpegs(count, image_px=16, root=tmp_path)
    assert list(tmp_path.iterdir()) == []
