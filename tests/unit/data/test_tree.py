"""The files under a data folder as a script reaches them: links followed, each file once."""

from __future__ import annotations

from pathlib import Path

from stash_core.data.tree import files_under


def test_a_data_dir_of_links_gives_the_files_they_name_once_and_a_loop_is_walked_once(tmp_path: Path) -> None:
    """A folder of links to the data (a subset) was refused: '--data-dir ...: no files in it'."""
    data = tmp_path / "data" / "a"
    data.mkdir(parents=True)
    (data / "1.jpg").write_bytes(b"x")
    (data / "2.jpg").write_bytes(b"y")
    linked = tmp_path / "linked"
    (linked / "a").mkdir(parents=True)
    (linked / "a" / "1.jpg").symlink_to(data / "1.jpg")
    (linked / "real").symlink_to(tmp_path / "data")  # a linked folder: 1.jpg again, and 2.jpg
    (linked / "loop").symlink_to(linked)
    (linked / "broken.jpg").symlink_to(tmp_path / "nothing.jpg")
    assert files_under(linked) == [(data / "1.jpg").resolve(), (data / "2.jpg").resolve()]


def test_an_open_through_a_link_is_counted_on_the_folder_the_file_is_in(tmp_path: Path) -> None:
    """The watch of the script's opens watched the link's folder: an open through a link went unseen, and the
    profile would say the script opened no file under --data-dir."""
    from stash_core.data.open_watch import OpenWatch

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "1.jpg").write_bytes(b"x")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "1.jpg").symlink_to(tmp_path / "data" / "1.jpg")
    watch = OpenWatch(tmp_path / "linked")
    (tmp_path / "linked" / "1.jpg").read_bytes()
    assert watch.close() == 1
