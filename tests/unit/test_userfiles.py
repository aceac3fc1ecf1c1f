"""The one reader and writer of user files: special files refused by name, sizes bounded, BOMs dropped,
deep JSON refused; writes atomic, through links, never onto a special file, without NaN."""

from __future__ import annotations

import json
import os
import stat

import pytest

from stash_core.engine import jobs
from stash_core.errors import UsageError
from stash_core.userfiles import (
    StagedFile,
    check_output,
    json_depth,
    read_user_bytes,
    read_user_json,
    read_user_text,
    save_model_file,
    write_atomic,
    write_json_atomic,
)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: os.mkfifo(p), "FIFO"),
        (lambda p: p.symlink_to("/dev/zero"), "character device"),
        (lambda p: p.mkdir(), "directory"),
    ],
)
def test_special_files_are_refused_by_what_they_are(tmp_path, make, says):
    path = tmp_path / "input"
    make(path)
    with pytest.raises(UsageError, match=says):
        read_user_bytes(path, "trace")


def test_missing_and_too_large_files(tmp_path):
    with pytest.raises(UsageError, match="trace does not exist"):
        read_user_bytes(tmp_path / "nope", "trace")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(UsageError, match="at most 100 are read"):
        read_user_bytes(big, "trace", max_bytes=100)
    assert read_user_bytes(big, "trace", max_bytes=101) == b"x" * 101


def test_text_drops_a_bom_and_refuses_other_encodings_and_nul(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes("\ufeffa,b\n".encode())
    assert read_user_text(path) == "a,b\n"
    path.write_bytes(b"caf\xe9")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_user_text(path)
    path.write_bytes(b"a\x00b")
    with pytest.raises(UsageError, match="NUL"):
        read_user_text(path)


@pytest.mark.parametrize("depth", [65, 2000, 200_000])
def test_json_nested_too_deeply_is_refused(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    with pytest.raises(UsageError, match="deeper than 64"):
        read_user_json(path, "workload file")


def test_json_depth_counts_lists_and_objects():
    assert json_depth(1) == 0 and json_depth([]) == 1 and json_depth({"a": [{"b": 1}]}) == 3


def test_writes_go_through_links_and_keep_the_mode(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_json_atomic(link, {"x": float("nan"), "y": [1.5, float("inf")]})
    assert link.is_symlink() and json.loads(target.read_text()) == {"x": None, "y": [1.5, None]}
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_a_new_file_gets_the_umask_s_mode_without_the_umask_being_changed(tmp_path, monkeypatch):
    # setting the umask to read it would open, for a moment, every file another thread creates
    previous = os.umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", lambda *_: pytest.fail("the umask was changed"))
        write_atomic(tmp_path / "new.csv", "a,b\n")
        write_json_atomic(tmp_path / "sub" / "new.json", {"a": 1})
    finally:
        monkeypatch.undo()
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "sub" / "new.json").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.csv", "sub"]


def test_a_replaced_private_file_is_never_more_open_while_it_is_written(tmp_path, monkeypatch):
    target = tmp_path / "private.json"
    target.write_text("old")
    os.chmod(target, 0o600)
    modes = []
    real_write = os.write

    def write(fd, data):
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    previous = os.umask(0o022)
    try:
        monkeypatch.setattr(os, "write", write)
        write_atomic(target, "secret")
    finally:
        monkeypatch.undo()
        os.umask(previous)
    assert modes and all(mode == 0o600 for mode in modes)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "secret"


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_special_target_is_refused_and_never_replaced(tmp_path, kind):
    path = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/null")
    else:
        path.mkdir()
    before = os.stat(path).st_mode
    with pytest.raises(UsageError, match="not a regular file"):
        write_atomic(path, "data")
    with pytest.raises(UsageError, match="not a regular file"):
        check_output(path, "CSV")
    assert os.stat(path).st_mode == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_discarded_stage_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "kept.csv"
    path.write_text("old")
    staged = StagedFile(path, "CSV")
    staged.write("new")
    staged.discard()
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["kept.csv"]


def test_an_output_in_a_folder_that_cannot_be_written_is_refused_first(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("root writes anywhere")
        with pytest.raises(UsageError, match="cannot write"):
            check_output(folder / "x.csv", "CSV")
    finally:
        os.chmod(folder, 0o700)


def test_uploaded_model_files_are_checked_and_kept_by_content(tmp_path):
    """Beside the dashboard's job folders (engine/jobs.py), named by their content; never run to check."""
    db = tmp_path / "results.duckdb"
    source = b"from torch import nn\n\ndef make(num_classes=10):\n    return nn.Linear(4, num_classes)\n"
    first = save_model_file(db, "my net.py", source)
    assert first.read_bytes() == source and first.parent == jobs.jobs_dir(db) / "models"
    assert first.name.startswith("my_net_")
    assert save_model_file(db, "my net.py", source) == first
    assert save_model_file(db, "my net.py", source + b"\n# v2\n") != first
    with pytest.raises(UsageError, match="not valid Python"):
        save_model_file(db, "broken.py", b"def make(:\n")
    with pytest.raises(UsageError, match=r"\.py"):
        save_model_file(db, "model.txt", source)


def test_a_path_below_a_file_or_through_a_symlink_loop_is_said_so(tmp_path):
    from stash_core.userfiles import unreachable_reason as reason

    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    os.mkfifo(tmp_path / "fifo")
    assert reason(tmp_path / "run.json" / "x.duckdb") == f"{tmp_path}/run.json is a file, not a folder"
    assert reason(tmp_path / "fifo" / "x") == f"{tmp_path}/fifo is a FIFO (named pipe), not a folder"
    assert reason(tmp_path / "loop1").startswith(f"{tmp_path}/loop1 is a symlink loop")
    assert reason(tmp_path / "loop2" / "a" / "b").startswith(f"{tmp_path}/loop2 is a symlink loop")
    for fine in (tmp_path / "run.json", tmp_path / "new" / "x.duckdb", tmp_path):  # there, or to be made
        assert reason(fine) is None
