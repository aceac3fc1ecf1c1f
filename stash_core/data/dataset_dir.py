"""Shared plumbing for the folder-per-class data sets: where generated sets live, building one atomically,
scanning a class tree, and reading a sample's bytes (optionally dropping them from the page cache)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from stash_core.data.pagecache import sync_filesystem_of
from stash_core.errors import UsageError, write_failure
from stash_core.proc import pid_alive
from stash_core.terminal import one_line
from stash_core.units import size_words
from stash_core.userfiles import nearest_existing

MANIFEST_NAME = "MANIFEST.json"
_TMP_PREFIX = ".tmp-"


def read_manifest(dataset_dir: Path) -> dict[str, Any] | None:
    """The manifest of a complete generated data set, or None when absent/unreadable (i.e. not complete)."""
    try:
        return json.loads((dataset_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None


def _remove_stale_tmp_dirs(parent: Path) -> None:
    # A build killed hard (SIGKILL, power loss) leaves .tmp-<name>-<pid>; remove those of dead processes, of
    # any data set: the one killed is seldom the one asked for next (too big: killed, and tried smaller).
    for tmp_dir in parent.glob(f"{_TMP_PREFIX}*-*"):
        pid_text = tmp_dir.name.rsplit("-", 1)[-1]
        try:  # this user's only: a cache folder shared between users holds others' builds
            if pid_text.isdigit() and tmp_dir.stat().st_uid == os.getuid() and not pid_alive(int(pid_text)):
                shutil.rmtree(tmp_dir, ignore_errors=True)
        except OSError:
            pass  # gone already


def sync_filesystem(any_path: Path) -> None:
    """Flush dirty pages of the file system holding `any_path`, so they are durable and evictable."""
    fd = os.open(any_path, os.O_RDONLY)
    try:
        sync_filesystem_of(fd)
    finally:
        os.close(fd)


def build_dataset_dir(
    final_dir: Path,
    manifest: dict[str, Any],
    write_files: Callable[[Path], dict[str, Any]],
    estimated_bytes: Callable[[], int] | None = None,
) -> Path:
    """Return `final_dir`, building it first unless a complete copy (manifest present) already exists.

    `write_files(tmp_dir)` fills a private temp folder and returns extra manifest fields; the manifest is
    written last and the folder renamed into place, so an interrupted build never looks complete. A set of
    about `estimated_bytes()` (asked only when it is built) that the disk has no room for is refused before
    a file is written."""
    parent = final_dir.parent
    if parent.is_dir():
        _remove_stale_tmp_dirs(parent)
    if read_manifest(final_dir) is not None:
        return final_dir
    existing = nearest_existing(parent)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failure(f"cannot create data set folder {parent}: {exc.strerror}", exc) from exc
    if estimated_bytes is not None:
        try:
            refuse_without_room(parent, estimated_bytes())
        except UsageError:  # refused before a file was written: the folders made for it go too
            _remove_made_folders(parent, existing)
            raise
    tmp_dir = parent / f"{_TMP_PREFIX}{final_dir.name}-{os.getpid()}"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    try:
        tmp_dir.mkdir()
        extra = write_files(tmp_dir)
        sync_filesystem(tmp_dir)
        (tmp_dir / MANIFEST_NAME).write_text(json.dumps({**manifest, **extra}, indent=2, sort_keys=True))
        if final_dir.exists() and read_manifest(final_dir) is None:
            shutil.rmtree(final_dir)  # left by an older, non-atomic writer: not trustworthy
        try:
            os.rename(tmp_dir, final_dir)
        except OSError:
            # Another process (e.g. a second rank) finished the same set first: use theirs.
            if read_manifest(final_dir) is None:
                raise
    except OSError as exc:
        raise write_failure(f"cannot write data set {final_dir}: {exc.strerror or exc}", exc) from exc
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return final_dir


def _remove_made_folders(folder: Path, existing: Path) -> None:
    """Remove `folder` and its parents up to `existing` (not it), each only while empty."""
    for made in [folder, *folder.parents]:
        if made == existing or existing not in made.parents:
            return
        try:
            made.rmdir()
        except OSError:
            return  # not empty (another set, another process): kept


def refuse_without_room(folder: Path, estimated_bytes: int) -> None:
    """UsageError when `folder`'s disk has less free space than a data set of about `estimated_bytes`: it
    would fill the disk part way, and the profile fail after minutes of writing."""
    free_bytes = shutil.disk_usage(folder).free
    if estimated_bytes > free_bytes:
        raise UsageError(
            f"the data set would take about {size_words(estimated_bytes)} and {folder} has "
            f"{size_words(free_bytes)} free: ask for fewer --synthetic-images, or set STASH_CACHE_DIR to a "
            "folder on a larger disk"
        )


def scan_class_folders(
    root: Path | str, suffixes: Iterable[str], kind: str
) -> tuple[list[str], list[Path], list[int]]:
    """(classes, files, labels) of a one-folder-per-class tree; files with a matching suffix (any case)."""
    root = Path(root)
    if not _looked_at(root, root.exists):
        raise UsageError(f"data set folder {root} does not exist")
    if not _looked_at(root, root.is_dir):
        raise UsageError(f"data set path {root} is not a folder")
    wanted = {suffix.lower() for suffix in suffixes}
    classes = sorted(p.name for p in _listed(root) if _looked_at(p, p.is_dir) and not p.name.startswith("."))
    if not classes:
        raise UsageError(f"data set folder {root} has no class folders (expected one sub-folder per class)")
    files: list[Path] = []
    labels: list[int] = []
    owners: dict[str, str] = {}  # each real folder walked -> the class folder it was found in
    for label, class_name in enumerate(classes):
        under = _files_under(root / class_name, owners, wanted)
        class_files = sorted(p for p in under if p.suffix.lower() in wanted)
        for path in class_files:
            _refuse_a_special_file(path, kind)
        if not class_files and len(classes) > 1:  # refused, as ImageFolder does: a class never seen
            listed = ", ".join(sorted(wanted))
            raise UsageError(f"data set folder {one_line(root)}: class folder {one_line(class_name)!r} holds "
                             f"no {kind} files ({listed}); a class without samples changes the model's "
                             "classes: move the folder out of the data set")  # fmt: skip
        files.extend(class_files)
        labels.extend([label] * len(class_files))
    if not files:
        raise UsageError(f"data set folder {root} has no {kind} files ({', '.join(sorted(wanted))})")
    return classes, files, labels


def _looked_at(path: Path, test) -> bool:
    """`test()` of `path` (exists, is_dir); a path that cannot be looked at (a link into a folder this user
    may not enter) is refused in one line, as a folder that cannot be listed is."""
    try:
        return test()
    except OSError as exc:
        raise _cannot_list(path, exc) from exc


def _a_file(path: Path) -> bool:
    """Any name but a folder: a regular file, a pipe, a device or socket (refused by name where it holds a
    sample's suffix), or a name that cannot be looked at (a link into a folder this user may not enter, a
    link that leads nowhere): kept, so that the checks name it rather than drop it without a word."""
    try:
        return not path.is_dir()
    except PermissionError:
        return True


def _refuse_a_special_file(path: Path, kind: str) -> None:
    """A pipe, device or socket named like a sample is refused: opening one blocks or reads forever, and
    skipping it would change the data set without a word."""
    try:
        special = path.exists() and not path.is_file()
    except PermissionError:
        return  # the image check names it unreadable
    if special:
        raise UsageError(f"data set file {one_line(path)} is not a regular file (a pipe, device or socket) "
                         f"and cannot be read as {kind} data: move it out of the data set")  # fmt: skip


def _cannot_list(folder: Path | str, exc: OSError) -> UsageError:
    reason = (exc.strerror or str(exc)).lower()
    return UsageError(f"cannot list data set folder {one_line(folder)}: {reason}")


def _listed(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError as exc:
        raise _cannot_list(folder, exc) from exc


def _files_under(folder: Path, owners: dict[str, str], wanted: set[str]) -> list[Path]:
    """Every file under `folder`, at any depth, links to folders followed (as torchvision's ImageFolder
    and --data-dir's walk follow them), each real folder once (a loop is not walked round). A sub-folder
    that cannot be listed is refused: skipped quietly (as rglob does), its images would vanish while its
    class still counts. A real folder with samples (`wanted` suffixes) that another class folder already
    holds (`owners`: real folder -> class folder) is refused: a link back to the data set gave one class
    another's images, counted twice. One without samples (shared notes, an empty folder) is taken."""

    def refuse(exc: OSError) -> None:
        raise _cannot_list(exc.filename or folder, exc) from exc

    found, seen = [], set()
    for parent, folders, names in os.walk(folder, onerror=refuse, followlinks=True):
        real = os.path.realpath(parent)
        if real in seen:
            folders[:] = []  # a loop, or a folder linked twice: its files are counted once
            continue
        samples = any(Path(name).suffix.lower() in wanted for name in names)
        if owners.setdefault(real, folder.name) != folder.name and samples:
            raise UsageError(f"folder {one_line(parent)} of the data set is in class folder "
                             f"{one_line(folder.name)!r} and in {one_line(owners[real])!r} (through a link): "
                             "a sample has one class; remove the link")  # fmt: skip
        seen.add(real)
        found += [Path(parent) / name for name in names if _a_file(Path(parent) / name)]
    return found


def total_size_bytes(files: Iterable[Path]) -> int:
    """Bytes of the files; one that cannot be looked at counts 0 (the check of the data set names it)."""
    return sum(_size_bytes(path) for path in files)


def _size_bytes(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def unreadable_files(files: Iterable[Path]) -> list[tuple[Path, str]]:
    """(file, why) of each file that cannot be opened for reading (its permissions, a link into a folder this
    user may not enter), found before the runs rather than by a worker in the middle of one."""
    found = []
    for path in files:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            found.append((path, (exc.strerror or str(exc)).lower()))
    return found


def read_file_bytes(path: Path, evict_after_read: bool) -> bytes:
    """The whole file; with `evict_after_read` its pages are dropped from the page cache right after,
    so every epoch of a cold run reads from the device again."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        chunks = []
        remaining = size
        while True:
            chunk = os.read(fd, max(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if evict_after_read:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
