"""Scanning a folder-per-class tree: a folder that cannot be listed is refused, never skipped in silence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import ended_pid

from stash_core.data.dataset_dir import scan_class_folders
from stash_core.errors import UsageError


def _tree(root: Path) -> Path:
    for class_name in ("cats", "dogs"):
        (root / class_name / "inner").mkdir(parents=True)
        (root / class_name / "a.jpg").write_bytes(b"x")
        (root / class_name / "inner" / "b.jpg").write_bytes(b"x")
    return root


def _locked(monkeypatch: pytest.MonkeyPatch, locked: Path) -> None:
    """Listing `locked` fails as it does for a user without read permission on it (root can list anything)."""
    real_scandir = os.scandir

    def scandir(path=".", *args):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *args)

    monkeypatch.setattr(os, "scandir", scandir)
    real_iterdir = Path.iterdir

    def iterdir(self):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)


def test_every_file_of_every_class_at_any_depth(tmp_path: Path) -> None:
    classes, files, labels = scan_class_folders(_tree(tmp_path), [".jpg"], "image")
    assert classes == ["cats", "dogs"] and labels == [0, 0, 1, 1]
    assert [p.relative_to(tmp_path).as_posix() for p in files] == [
        "cats/a.jpg", "cats/inner/b.jpg", "dogs/a.jpg", "dogs/inner/b.jpg",
    ]  # fmt: skip


@pytest.mark.parametrize("where", ["dogs", "dogs/inner", "."])
def test_a_folder_that_cannot_be_listed_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    root = _tree(tmp_path)
    locked = (root / where).resolve() if where != "." else root
    _locked(monkeypatch, locked)
    with pytest.raises(UsageError) as caught:
        scan_class_folders(root, [".jpg"], "image")
    assert str(caught.value) == f"cannot list data set folder {locked}: permission denied"


def test_a_linked_sub_folder_of_a_class_is_followed_once_and_a_loop_not_walked_round(tmp_path: Path) -> None:
    """Its images were dropped without a word (the epoch too small), where ImageFolder and --data-dir
    follow such links."""
    root = _tree(tmp_path / "set")
    elsewhere = tmp_path / "more"
    elsewhere.mkdir()
    for index in range(3):
        (elsewhere / f"m{index}.jpg").write_bytes(b"x")
    (root / "dogs" / "linked").symlink_to(elsewhere)
    (root / "dogs" / "again").symlink_to(elsewhere)  # the same folder twice: its files once
    (root / "cats" / "inner" / "loop").symlink_to(root / "cats")  # a loop back up
    _, files, labels = scan_class_folders(root, [".jpg"], "image")
    dogs = [p.name for p, label in zip(files, labels, strict=True) if label == 1]
    cats = [p.name for p, label in zip(files, labels, strict=True) if label == 0]
    assert sorted(dogs) == ["a.jpg", "b.jpg", "m0.jpg", "m1.jpg", "m2.jpg"]
    assert sorted(cats) == ["a.jpg", "b.jpg"]


def test_a_folder_without_samples_linked_from_two_classes_is_taken(tmp_path: Path) -> None:
    """Shared notes linked into every class folder were refused as if one class held another's images."""
    root = _tree(tmp_path / "set")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.txt").write_text("how the images were taken")
    for class_name in ("cats", "dogs"):
        (root / class_name / "notes").symlink_to(notes)
    _, files, _ = scan_class_folders(root, [".jpg"], "image")
    assert sorted(p.name for p in files) == ["a.jpg", "a.jpg", "b.jpg", "b.jpg"]


@pytest.mark.parametrize("into", ["the set", "another class"])
def test_a_link_into_another_class_is_refused_not_counted_twice(tmp_path: Path, into: str) -> None:
    """A link in cats/ to the data set's own folder took the dogs' images in as cats too: "epoch of 112
    images" where the set held 64."""
    root = _tree(tmp_path / "set")
    (root / "cats" / "loop").symlink_to(root if into == "the set" else root / "dogs")
    with pytest.raises(UsageError, match=r"class folder '(cats|dogs)' and in '(cats|dogs)' \(through a link"):
        scan_class_folders(root, [".jpg"], "image")


def test_a_link_that_leads_nowhere_is_kept_for_the_check_to_name(tmp_path: Path) -> None:
    root = _tree(tmp_path / "set")
    (root / "cats" / "gone.jpg").symlink_to(tmp_path / "nothing.jpg")
    _, files, _ = scan_class_folders(root, [".jpg"], "image")
    assert root / "cats" / "gone.jpg" in files


def test_a_generated_set_on_a_full_disk_fails_as_the_machine_did(tmp_path: Path) -> None:
    import errno

    from stash_core.data.dataset_dir import build_dataset_dir
    from stash_core.errors import DiskFull

    def full(folder: Path) -> dict:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFull, match=r"cannot write data set .*: No space left on device$"):
        build_dataset_dir(tmp_path / "synthetic", {}, full)
    assert list(tmp_path.iterdir()) == []


def test_a_link_to_a_pipe_is_refused_not_opened(tmp_path: Path) -> None:
    """Kept as a link, it was opened by the check of unreadable files, which waited forever on the pipe;
    then dropped without a word. It is refused by name, without being opened."""
    root = _tree(tmp_path / "set")
    os.mkfifo(tmp_path / "pipe")
    (root / "cats" / "p.jpg").symlink_to(tmp_path / "pipe")
    with pytest.raises(UsageError, match="is not a regular file"):
        scan_class_folders(root, [".jpg"], "image")


def test_a_killed_build_of_any_set_is_removed_by_the_next_build_and_a_live_one_kept(tmp_path: Path) -> None:
    """A build killed hard left .tmp-<set>-<pid>; only the build of that same set removed it, and the set
    killed (too big) is seldom the one asked for next: 20 MB were left for good."""
    from stash_core.data.dataset_dir import build_dataset_dir

    killed = tmp_path / f".tmp-synthetic-20000-128px-s0-{ended_pid()}"
    (killed / "class_000").mkdir(parents=True)
    alive = tmp_path / f".tmp-synthetic-64-32px-s0-{os.getpid()}"  # a build under way in this process
    alive.mkdir()
    built = build_dataset_dir(tmp_path / "synthetic-8-32px-s0", {}, lambda folder: {})
    assert built.is_dir() and not killed.exists() and alive.exists()
    (killed / "class_000").mkdir(parents=True)
    build_dataset_dir(tmp_path / "synthetic-8-32px-s0", {}, lambda folder: {})  # already there: swept too
    assert not killed.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_another_users_killed_build_in_a_shared_cache_is_theirs_to_remove(tmp_path: Path) -> None:
    from stash_core.data.dataset_dir import build_dataset_dir

    theirs = tmp_path / f".tmp-synthetic-64-32px-s0-{ended_pid()}"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    build_dataset_dir(tmp_path / "synthetic-8-32px-s0", {}, lambda folder: {})
    assert theirs.exists()


@pytest.mark.parametrize("kind", ["jpeg", "text"])
def test_a_data_set_the_disk_has_no_room_for_is_refused_before_a_file_is_written(
    tmp_path, monkeypatch, kind
):
    """--synthetic-images 10**9 used to start writing: the disk filled part way, minutes later."""
    import collections

    from stash_core.data import dataset_dir
    from stash_core.data.jpeg_dataset import generate_synthetic_jpegs
    from stash_core.data.text_dataset import generate_synthetic_text

    usage = collections.namedtuple("usage", "total used free")
    free = usage(10**9, 10**9 - 2 * 10**6, 2 * 10**6)
    monkeypatch.setattr(dataset_dir.shutil, "disk_usage", lambda path: free)
    make = (lambda n: generate_synthetic_jpegs(n, root=tmp_path)) if kind == "jpeg" else (
        lambda n: generate_synthetic_text(n, root=tmp_path))  # fmt: skip
    with pytest.raises(UsageError, match=r"would take about [0-9.]+ MiB and .* has 1\.91 MiB free: ask for"):
        make(10_000)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temporary folder
    assert make(64).is_dir()  # a set that fits is made as before


def test_a_data_set_already_made_is_reused_without_estimating_its_size(tmp_path, monkeypatch):
    from stash_core.data import jpeg_dataset

    made = jpeg_dataset.generate_synthetic_jpegs(16, image_px=32, root=tmp_path)

    def estimate(*args):
        raise AssertionError("an image encoded again for a set that exists")

    monkeypatch.setattr(jpeg_dataset, "_estimated_bytes", estimate)
    assert jpeg_dataset.generate_synthetic_jpegs(16, image_px=32, root=tmp_path) == made


def test_a_pipe_named_like_an_image_is_refused_and_one_named_otherwise_left_alone(tmp_path: Path) -> None:
    """A FIFO named cat.jpg in a class folder was skipped without a word (opening it would block)."""
    root = _tree(tmp_path / "set")
    os.mkfifo(root / "cats" / "notes.txt")  # not a sample's name: not read, not refused
    assert len(scan_class_folders(root, [".jpg"], "image")[1]) == 4
    os.mkfifo(root / "cats" / "pipe.jpg")
    with pytest.raises(UsageError) as caught:
        scan_class_folders(root, [".jpg"], "image")
    assert str(caught.value).startswith(f"data set file {root / 'cats' / 'pipe.jpg'} is not a regular file")


def test_a_refused_set_leaves_no_folder_made_for_it(tmp_path, monkeypatch):
    """$STASH_CACHE_DIR on a full disk: the refusal left an empty datasets/ folder behind."""
    import collections

    from stash_core.data import dataset_dir
    from stash_core.data.jpeg_dataset import generate_synthetic_jpegs

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(dataset_dir.shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10**6, 10**6))
    (tmp_path / "cache" / "other").mkdir(parents=True)  # there before: kept
    with pytest.raises(UsageError, match="would take about"):
        generate_synthetic_jpegs(10_000, root=tmp_path / "cache" / "datasets" / "more")
    assert [path.name for path in (tmp_path / "cache").iterdir()] == ["other"]
