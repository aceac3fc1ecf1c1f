"""The image check before a profile: truncated, unreadable and oversized files are found and named."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stash_core.data import image_check
from stash_core.data.image_check import CORRUPT, TOO_LARGE, UNREADABLE, check_image, validate_images
from stash_core.data.jpeg_dataset import ImageFolderDataset, generate_synthetic_jpegs
from stash_core.errors import UsageError
from stash_core.interrupts import Cancelled, stop_requests


@pytest.fixture(scope="module")
def jpeg_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 JPEGs of 64 px in 4 classes, shared by the read-only tests of this module."""
    return generate_synthetic_jpegs(200, image_px=64, num_classes=4, root=tmp_path_factory.mktemp("jpegs"))


def _copy(jpeg_root: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(jpeg_root, tmp_path / "data"))


def _noise_image(path: Path, px: int = 64) -> Path:
    pixels = np.random.default_rng(0).integers(0, 256, size=(px, px, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


@pytest.mark.parametrize("keep", [0.5, 0.9, -2])
def test_a_truncated_jpeg_is_found_though_its_header_is_whole(jpeg_root: Path, tmp_path: Path, keep) -> None:
    data = next(jpeg_root.rglob("*.jpg")).read_bytes()
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: int(len(data) * keep)] if keep > 0 else data[:keep])
    with Image.open(path) as image:
        image.verify()  # what the check did alone: it passes
    kind, detail, _ = check_image(path)
    assert kind == CORRUPT and "truncated" in detail


def test_a_truncated_png_is_found(tmp_path: Path) -> None:
    path = _noise_image(tmp_path / "whole.png")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert check_image(path)[0] == CORRUPT


def test_a_jpeg_with_bytes_after_its_end_is_decoded_and_kept(jpeg_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "trailer.jpg"
    path.write_bytes(next(jpeg_root.rglob("*.jpg")).read_bytes() + b"camera trailer")
    assert check_image(path)[0] is None


def test_a_file_that_cannot_be_opened_is_unreadable_not_corrupt(tmp_path: Path, monkeypatch) -> None:
    path = _noise_image(tmp_path / "locked.png")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(image_check, "open", denied, raising=False)
    assert check_image(path)[:2] == (UNREADABLE, "permission denied")


def test_an_image_over_twice_the_pixel_limit_is_too_large_to_decode(tmp_path: Path, monkeypatch) -> None:
    path = _noise_image(tmp_path / "huge.png")  # 4096 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    kind, detail, pixels = check_image(path)
    assert kind == TOO_LARGE and pixels == 4096 and detail.startswith("4096 pixels")


def test_an_image_over_the_limit_is_kept_and_said_once_in_words_of_its_own(
    jpeg_root: Path, tmp_path: Path, monkeypatch, capfd
) -> None:
    root = _copy(jpeg_root, tmp_path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 3000)  # 64 x 64 = 4096: over it, under twice it
    dataset = ImageFolderDataset(root, transform=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = validate_images(dataset)
        dataset[0]  # a read in the run says nothing either
    assert not [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)]
    assert "DecompressionBombWarning" not in capfd.readouterr().err
    assert report.dropped_count == 0 and len(report.large) == 200 and len(dataset) == 200
    [line] = report.messages()
    assert line.startswith("200 image(s) have more pixels than Pillow's decompression-bomb limit (3000)")


def test_the_dropped_files_are_said_by_kind(jpeg_root: Path, tmp_path: Path, monkeypatch) -> None:
    root = _copy(jpeg_root, tmp_path)
    dataset = ImageFolderDataset(root, transform=None)
    cut, locked = dataset.files[5], dataset.files[9]
    cut.write_bytes(cut.read_bytes()[:-2])
    real_open = open

    def open_but_locked(path, *args, **kwargs):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(image_check, "open", open_but_locked, raising=False)
    report = validate_images(dataset)
    assert report.dropped[CORRUPT] == [cut] and report.dropped[UNREADABLE] == [locked]
    assert len(dataset) == len(dataset.labels) == 198
    [line] = report.messages()
    assert line.startswith("skipping 2 of 200 image files: 1 unreadable (")
    assert "permission denied" in line and "1 corrupt or truncated (" in line and "truncated" in line


def test_validate_images_drops_bad_files(jpeg_root: Path, tmp_path: Path) -> None:
    root = _copy(jpeg_root, tmp_path)
    dataset = ImageFolderDataset(root, transform=None)
    bad = dataset.files[5]
    bad_original_bytes = bad.stat().st_size
    bytes_before = dataset.total_bytes
    bad.write_bytes(b"\x00" * 1000)
    assert validate_images(dataset, max_bad_fraction=0.05).dropped_count == 1
    assert len(dataset) == len(dataset.labels) == 199
    assert bad not in dataset.files
    assert dataset.total_bytes == bytes_before - bad_original_bytes


def test_validate_images_refuses_too_many_bad_files(jpeg_root: Path, tmp_path: Path) -> None:
    root = _copy(jpeg_root, tmp_path)
    dataset = ImageFolderDataset(root, transform=None)
    for path in dataset.files[:11]:  # 11 of 200 = 5.5% > 5%
        path.write_bytes(b"not a picture")
    with pytest.raises(UsageError, match="11 of 200 images .* cannot be used .*11 corrupt or truncated"):
        validate_images(dataset, max_bad_fraction=0.05)
    assert len(dataset) == 200  # nothing dropped on refusal
    assert validate_images(dataset, max_bad_fraction=0.10).dropped_count == 11


def test_a_set_of_truncated_files_only_is_refused_with_the_reason(jpeg_root: Path, tmp_path: Path) -> None:
    root = _copy(jpeg_root, tmp_path)
    dataset = ImageFolderDataset(root, transform=None)
    for path in dataset.files:
        path.write_bytes(path.read_bytes()[:-100])
    said = r"200 of 200 images .* \(all\): 200 corrupt or truncated .*truncated"
    with pytest.raises(UsageError, match=said):
        validate_images(dataset, max_bad_fraction=1.0)


def test_validate_clean_set_drops_nothing(jpeg_root: Path) -> None:
    dataset = ImageFolderDataset(jpeg_root, transform=None)
    report = validate_images(dataset)
    assert report.dropped_count == 0 and report.messages() == []
    assert len(dataset) == 200


def test_a_cancel_asked_while_the_images_are_checked_stops_the_check(jpeg_root: Path) -> None:
    dataset = ImageFolderDataset(jpeg_root, transform=None)
    with stop_requests(lambda: True), pytest.raises(Cancelled):
        validate_images(dataset)


def test_a_bad_images_name_is_said_on_one_line_and_can_be_stored(jpeg_root: Path, tmp_path: Path) -> None:
    """A name of bytes that are not UTF-8 made the run's warning unstorable (DuckDB refused the JSON of its
    surrogates) and a newline in a name forged lines of the profile's output."""
    import os

    for index, (name, shown) in enumerate(((b"bad\xff\xfe.jpg", "\\xff\\xfe"), (b"x\ny.jpg", "x\\ny.jpg"))):
        root = Path(shutil.copytree(jpeg_root, tmp_path / f"data{index}"))
        with open(os.path.join(os.fsencode(next(root.iterdir())), name), "wb") as handle:
            handle.write(b"garbage")
        [line] = validate_images(ImageFolderDataset(root, transform=None)).messages()
        assert "\n" not in line and shown in line, line
        assert not any(0xD800 <= ord(char) <= 0xDFFF for char in line)  # DuckDB refuses a lone surrogate


def test_a_name_that_cannot_be_looked_at_is_kept_for_the_check_to_name(tmp_path: Path, monkeypatch) -> None:
    """A link into a folder this user may not enter ended the profile (exit 1, 'Permission denied')."""
    from stash_core.data import dataset_dir

    root = generate_synthetic_jpegs(40, image_px=32, num_classes=2, root=tmp_path / "data")
    linked = next(root.iterdir()) / "linked.jpg"
    linked.symlink_to(tmp_path / "elsewhere.jpg")
    real_is_file = Path.is_file

    def is_file(path: Path) -> bool:
        if path == linked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(dataset_dir.Path, "is_file", is_file)
    dataset = ImageFolderDataset(root, transform=None)
    assert linked in dataset.files
    report = validate_images(dataset)
    assert report.dropped[UNREADABLE] == [linked] and linked not in dataset.files


def test_a_file_of_no_image_format_is_said_in_words_not_as_pillows_file_object(tmp_path: Path) -> None:
    """"cannot identify image file <_io.BufferedReader name='...'>" was shown for a text file named .jpg."""
    bad = tmp_path / "notes.jpg"
    bad.write_text("not an image")
    assert check_image(bad)[:2] == (CORRUPT, "not an image format Pillow reads")
