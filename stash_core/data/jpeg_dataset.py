"""Real JPEG data: a synthetic ImageFolder generator and the Dataset that reads, decodes and augments it."""

from __future__ import annotations

import io
import multiprocessing
import signal
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageChops, ImageDraw

from stash_core.data.dataset_dir import (
    build_dataset_dir,
    read_file_bytes,
    scan_class_folders,
    total_size_bytes,
)
from stash_core.errors import UsageError
from stash_core.interrupts import check_stop_request
from stash_core.pathargs import dataset_cache_root
from stash_core.terminal import one_line

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
JPEG_QUALITY = 90
_GENERATOR_VERSION = 1
_POOL_MIN_COUNT = 400  # below this, starting worker processes costs more than it saves


_noise_tiles: dict[int, Image.Image] = {}


def _noise_tile(image_px: int) -> Image.Image:
    """(2*px, 2*px) RGB noise in 0..24 (used as +-12 levels); fixed seed so every process makes the same."""
    if image_px not in _noise_tiles:
        rng = np.random.default_rng(12345)
        noise = rng.integers(0, 25, size=(2 * image_px, 2 * image_px, 3), dtype=np.uint8)
        _noise_tiles[image_px] = Image.fromarray(noise)
    return _noise_tiles[image_px]


def _synthetic_image(index: int, image_px: int, num_classes: int, seed: int) -> Image.Image:
    """A photo-like picture: smooth colour field + shapes + sensor noise, so JPEG sizes are realistic."""
    rng = np.random.default_rng([seed, index])
    label = index % num_classes
    # Low-frequency colour field (class-tinted) upsampled: the "scene".
    coarse = rng.integers(0, 256, size=(6, 6, 3), dtype=np.uint8)
    coarse[..., label % 3] = np.maximum(coarse[..., label % 3], 96)
    image = Image.fromarray(coarse).resize((image_px, image_px), Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(3, 9))):
        x0, y0, w, h = (int(v) for v in rng.integers(image_px // 10, image_px // 2, size=4))
        fill = tuple(int(c) for c in rng.integers(0, 256, size=3))
        box = (x0 - image_px // 10, y0 - image_px // 10, x0 + w, y0 + h)
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    # Fine texture: what makes real photos cost bytes and decode time. A window at a random offset into
    # one fixed noise tile is as good as fresh noise for JPEG and far cheaper than drawing it per image.
    left, top = (int(v) for v in rng.integers(0, image_px, size=2))
    noise = _noise_tile(image_px).crop((left, top, left + image_px, top + image_px))
    return ImageChops.add(image, noise, scale=1.0, offset=-12)  # clipped to 0..255


def _class_name(label: int) -> str:
    return f"class_{label:03d}"


def _quiet_worker() -> None:
    """A pool worker ends on the pool's SIGTERM and leaves Ctrl-C to the command: forked, it had the command's
    handlers, which turned both into tracebacks of its own (the pool's normal end sends SIGTERM)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _write_jpeg_range(args: tuple[Path, int, int, int, int, int]) -> int:
    tmp_dir, start, stop, image_px, num_classes, seed = args
    written_bytes = 0
    for index in range(start, stop):
        path = tmp_dir / _class_name(index % num_classes) / f"img_{index:07d}.jpg"
        _synthetic_image(index, image_px, num_classes, seed).save(path, format="JPEG", quality=JPEG_QUALITY)
        written_bytes += path.stat().st_size
    return written_bytes


def generate_synthetic_jpegs(
    count: int, image_px: int = 256, num_classes: int = 10, root: Path | None = None, seed: int = 0
) -> Path:
    """Make (or reuse) an ImageFolder tree of `count` real JPEG files and return its folder."""
    if count < 1 or image_px < 8 or num_classes < 1:
        raise UsageError(
            f"synthetic JPEGs need count >= 1, image_px >= 8, num_classes >= 1 "
            f"(got {count}, {image_px}, {num_classes})"
        )
    base = Path(root) if root is not None else dataset_cache_root()
    # The class count joins the name only when not the default, keeping the common name short.
    classes_tag = "" if num_classes == 10 else f"-{num_classes}c"
    final_dir = base / f"synthetic-{count}-{image_px}px{classes_tag}-s{seed}"
    manifest = {
        "kind": "synthetic-jpeg",
        "generator_version": _GENERATOR_VERSION,
        "count": count,
        "image_px": image_px,
        "num_classes": min(num_classes, count),
        "seed": seed,
        "jpeg_quality": JPEG_QUALITY,
    }

    def write_files(tmp_dir: Path) -> dict[str, Any]:
        started_s = time.monotonic()
        for label in range(min(num_classes, count)):
            (tmp_dir / _class_name(label)).mkdir()
        workers = 2 if count >= _POOL_MIN_COUNT else 1
        chunk = max(50, count // (workers * 8))
        jobs = [
            (tmp_dir, start, min(start + chunk, count), image_px, num_classes, seed)
            for start in range(0, count, chunk)
        ]
        total_bytes = 0
        if workers == 1:
            for job in jobs:
                check_stop_request()  # a Cancel of a profile run from Python, between chunks
                total_bytes += _write_jpeg_range(job)
        else:
            # fork: the workers only use numpy/Pillow, and fork needs no __main__ guard in the caller.
            with multiprocessing.get_context("fork").Pool(workers, initializer=_quiet_worker) as pool:
                for written_bytes in pool.imap_unordered(_write_jpeg_range, jobs):
                    check_stop_request()
                    total_bytes += written_bytes
        return {"total_bytes": total_bytes, "generate_s": round(time.monotonic() - started_s, 3)}

    def estimated_bytes() -> int:  # one image encoded: only when the set is made, not each time it is reused
        return _estimated_bytes(count, image_px, num_classes, seed)

    return build_dataset_dir(final_dir, manifest, write_files, estimated_bytes)


def _estimated_bytes(count: int, image_px: int, num_classes: int, seed: int) -> int:
    """The set's size on disk, from its first image encoded (the others are alike): a file takes a whole
    4 KiB block at least."""
    encoded = io.BytesIO()
    _synthetic_image(0, image_px, num_classes, seed).save(encoded, format="JPEG", quality=JPEG_QUALITY)
    return count * max(len(encoded.getvalue()), 4096)


def _decode_rgb(data: bytes) -> Image.Image:
    # An image over Pillow's decompression-bomb limit was said once by the check (data/image_check.py),
    # not at every read.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")  # convert() forces the full decode, so corruption surfaces here


class ImageFolderDataset(torch.utils.data.Dataset):
    """One folder per class of image files; yields (transform(RGB image), label).

    A sample that fails to decode is replaced by the next decodable one and counted in
    `corrupt_reads` (shared memory, so reads made in DataLoader workers are visible to the parent)."""

    def __init__(
        self, root: Path | str, transform: Callable[[Image.Image], Any] | None, evict_after_read: bool = False
    ) -> None:
        self.root = Path(root)
        self.transform = transform
        self.evict_after_read = evict_after_read
        self.classes, self.files, self.labels = scan_class_folders(self.root, IMAGE_SUFFIXES, "image")
        self.total_bytes = total_size_bytes(self.files)
        # Lock-protected shared counter; inherited by DataLoader workers (fork or spawn).
        self._corrupt_reads = multiprocessing.Value("q", 0)

    @property
    def corrupt_reads(self) -> int:
        """Reads that hit an undecodable file and were replaced by another sample (all processes)."""
        return int(self._corrupt_reads.value)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        example = ""
        for attempt in range(len(self.files)):
            sample_index = (index + attempt) % len(self.files)
            path = self.files[sample_index]
            try:
                image = _decode_rgb(read_file_bytes(path, self.evict_after_read))
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
                example = example or one_line(f"{path.parent.name}/{path.name}: {exc}")
                with self._corrupt_reads.get_lock():
                    self._corrupt_reads.value += 1
                continue
            sample = self.transform(image) if self.transform is not None else image
            return sample, self.labels[sample_index]
        raise UsageError(
            f"none of the {len(self.files)} images under {one_line(self.root)} could be decoded, "
            f"e.g. {example}"
        )
