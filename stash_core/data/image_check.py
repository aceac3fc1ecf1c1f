"""The check of an image data set before it is timed: every file is opened and its data checked, so that an
unreadable, truncated or oversized image is named before the runs instead of being swapped for another
sample inside them."""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from PIL import Image

from stash_core.data.dataset_dir import total_size_bytes
from stash_core.data.evicting_open import drop_pages
from stash_core.errors import UsageError
from stash_core.interrupts import check_stop_request
from stash_core.terminal import one_line

_STOP_CHECK_EVERY = 200  # files checked between looks for a Cancel (each look is one stat)
_JPEG_END = b"\xff\xd9"  # EOI: the last marker of every complete JPEG
_PIXELS_RE = re.compile(r"\((\d+) pixels\)")

UNREADABLE = "unreadable"
TOO_LARGE = "too large to decode"
CORRUPT = "corrupt or truncated"
KINDS = (UNREADABLE, TOO_LARGE, CORRUPT)


@dataclass
class ImageCheck:
    """What the check found: the files it dropped by kind (with one example each), and the images kept that
    are over Pillow's decompression-bomb limit (decoded as they are, slowly)."""

    total: int
    dropped: dict[str, list[Path]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    example: dict[str, str] = field(default_factory=dict)
    large: list[tuple[Path, int]] = field(default_factory=list)

    @property
    def dropped_count(self) -> int:
        return sum(len(paths) for paths in self.dropped.values())

    def dropped_text(self) -> str:
        """'2 corrupt or truncated (c0/a.jpg: image file is truncated), 1 unreadable (...)'."""
        return ", ".join(
            f"{len(self.dropped[kind])} {kind} ({self.example[kind]})" for kind in KINDS if self.dropped[kind]
        )

    def messages(self) -> list[str]:
        """One line per thing the user should know, in the words of the result's warnings."""
        lines = []
        if self.dropped_count:
            lines.append(f"skipping {self.dropped_count} of {self.total} image files: {self.dropped_text()}")
        if self.large:
            path, pixels = self.large[0]
            lines.append(
                f"{len(self.large)} image(s) have more pixels than Pillow's decompression-bomb limit "
                f"({Image.MAX_IMAGE_PIXELS}), e.g. {_shown(path)} ({pixels} pixels): they "
                "are decoded as they are, slowly and with much memory"
            )
        return lines


def _shown(path: Path) -> str:
    """class folder/file name as a warning holds it: one line (a name may hold a newline), every byte that is
    not printable UTF-8 written out."""
    return one_line(f"{path.parent.name}/{path.name}")


def check_image(path: Path) -> tuple[str | None, str, int | None]:
    """(what is wrong or None, the detail, the pixel count when known) of one image file.

    A JPEG whose data does not end with its end marker, and a file of any format but JPEG and PNG (whose
    verify reads only the header), is decoded in full: Image.verify alone passes a truncated JPEG."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, after the decode
    except OSError as exc:
        return UNREADABLE, (exc.strerror or str(exc)).lower(), None
    pixels = None
    with handle, warnings.catch_warnings():
        # Pillow warns (on stderr) above its limit; such an image is said once, in the check's words.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(handle) as image:
                pixels, image_format = image.width * image.height, image.format
                image.verify()
            if image_format == "PNG" or (image_format == "JPEG" and _ends_with(handle, _JPEG_END)):
                pass  # PNG's verify reads every chunk and its checksum
            else:
                _decode(handle)
        except Image.DecompressionBombError as exc:
            found = _PIXELS_RE.search(str(exc))
            pixels = int(found.group(1)) if found else pixels
            return (
                TOO_LARGE,
                f"{pixels} pixels; Pillow refuses more than {2 * Image.MAX_IMAGE_PIXELS}",
                pixels,
            )
        except Image.UnidentifiedImageError:  # Pillow names the open file object, not the file
            return CORRUPT, "not an image format Pillow reads", pixels
        except OSError as exc:
            if exc.errno is not None:  # the read failed, not the decode (an EIO, say)
                return UNREADABLE, (exc.strerror or str(exc)).lower(), pixels
            return CORRUPT, str(exc) or type(exc).__name__, pixels
        except Exception as exc:  # noqa: BLE001 - any failure to decode is what the check looks for
            return CORRUPT, str(exc) or type(exc).__name__, pixels
    return None, "", pixels


def _ends_with(handle: BinaryIO, marker: bytes) -> bool:
    handle.seek(0, os.SEEK_END)
    if handle.tell() < len(marker):
        return False
    handle.seek(-len(marker), os.SEEK_END)
    return handle.read(len(marker)) == marker


def _decode(handle: BinaryIO) -> None:
    """Decode the whole image; a JPEG at 1/8 scale (all of its data is still read and decoded)."""
    handle.seek(0)
    with Image.open(handle) as image:
        if image.format == "JPEG":
            image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
        image.load()


def validate_images(dataset: Any, max_bad_fraction: float = 0.05) -> ImageCheck:
    """Check every image file of `dataset` (an ImageFolderDataset) and drop the ones that cannot be used.

    Raises UsageError when more than `max_bad_fraction` of them cannot be used, or none can."""
    total = len(dataset.files)
    report = ImageCheck(total)
    limit = Image.MAX_IMAGE_PIXELS
    bad: set[int] = set()
    for index, path in enumerate(dataset.files):
        if index % _STOP_CHECK_EVERY == 0:
            check_stop_request()  # a Cancel of a profile run from Python
        kind, detail, pixels = check_image(path)
        if dataset.evict_after_read:
            _evict(path)  # keep the cold run cold: the check must not leave pages in the cache
        if kind is not None:
            bad.add(index)
            report.dropped[kind].append(path)
            report.example.setdefault(kind, f"{_shown(path)}: {detail}")
        elif limit and pixels and pixels > limit:
            report.large.append((path, pixels))
    if bad and (len(bad) > max_bad_fraction * total or len(bad) == total):
        share = "all" if len(bad) == total else f"more than {max_bad_fraction:.0%}"
        raise UsageError(
            f"{len(bad)} of {total} images under {dataset.root} cannot be used ({share}): "
            f"{report.dropped_text()}"
        )
    if bad:
        kept = [i for i in range(total) if i not in bad]
        dataset.files = [dataset.files[i] for i in kept]
        dataset.labels = [dataset.labels[i] for i in kept]
        dataset.total_bytes = total_size_bytes(dataset.files)
    return report


def _evict(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        drop_pages(fd)
    finally:
        os.close(fd)
