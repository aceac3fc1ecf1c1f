"""The data side of a profile: a cold run that could not be made cold leaves the disk stall not separable."""

from __future__ import annotations

from pathlib import Path

import pytest

from stash_core.engine.data_setup import cold_run_not_separable


def _doc(dataset: str, r2_resident: float | None, remote: bool = False) -> dict:
    """A real-data profile's runs: R0, R3 (cached) and R2 (cold), R2 slower than R3 by 0.2 s."""
    phases = [
        {"name": name, "status": "completed", "workers": 1, "resident_fraction_start": resident,
         "iteration_s": {"mean": mean_s, "ci95": 0.001}}
        for name, mean_s, resident in (("R0", 1.0, None), ("R3", 1.1, 1.0), ("R2", 1.3, r2_resident))
    ]  # fmt: skip
    doc = {"phases": phases, "spec": {"dataset": dataset}}
    if remote:
        doc["hosts"] = []
    return doc


def test_a_cold_run_that_started_cold_leaves_the_disk_stall_measured(tmp_path: Path) -> None:
    assert cold_run_not_separable(_doc(str(tmp_path), 0.02)) == {}
    assert cold_run_not_separable(_doc(str(tmp_path), None)) == {}


def test_a_cold_run_that_started_cached_makes_the_disk_stall_not_separable(tmp_path: Path) -> None:
    from stash_core.engine.profiler import breakdown_of_completed
    from stash_core.spec import ProfileSpec

    doc = _doc(str(tmp_path), 0.98)
    reason = cold_run_not_separable(doc)["disk"]
    assert "98%" in reason and "read from memory" in reason
    spec = ProfileSpec(model="resnet18", batch_size=8, device="cpu", dataset="/data", dataset_images=80)
    result = breakdown_of_completed(doc, ["R0", "R3", "R2"], spec, [])
    disk = result["stalls"]["disk"]
    assert disk["status"] == "not_separable" and disk["seconds"] is None and "98%" in disk["note"]
    assert result["stalls"]["cpu"]["status"] == "measured"
    assert any(w.startswith("disk stall not separable") for w in result["warnings"])


def test_the_reason_names_a_file_system_kept_in_memory() -> None:
    shm = Path("/dev/shm")
    from stash_core.data.pagecache import memory_filesystem

    if not shm.is_dir() or memory_filesystem(shm) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    assert "on tmpfs" in cold_run_not_separable(_doc(str(shm), 1.0))["disk"]
    # Remote machines' file systems are not this one's: the reason stays general.
    remote = cold_run_not_separable(_doc(str(shm), 1.0, remote=True))["disk"]
    assert "tmpfs" not in remote and "could not be evicted" in remote


def test_any_launch_of_the_cold_run_that_started_cached_counts() -> None:
    doc = _doc("/nonexistent", 0.0)
    doc["phases"][2]["launches"] = [
        {"pooled": True, "resident_fraction_start": 0.0},
        {"pooled": True, "resident_fraction_start": 0.9},
        {"pooled": False, "resident_fraction_start": 1.0},
    ]
    assert "90%" in cold_run_not_separable(doc)["disk"]


def test_truncated_images_are_left_out_and_said_in_the_result(tmp_path: Path) -> None:
    from stash_core.data.jpeg_dataset import generate_synthetic_jpegs
    from stash_core.engine.data_setup import prepare_data
    from stash_core.engine.progress import Reporter
    from stash_core.spec import ProfileSpec

    root = generate_synthetic_jpegs(40, image_px=32, root=tmp_path / "data")
    victim = sorted(root.rglob("*.jpg"))[3]
    victim.write_bytes(victim.read_bytes()[:-50])  # its header whole: Image.verify passes it
    said: list[str] = []
    reporter = Reporter()
    reporter.message = said.append
    spec = ProfileSpec(model="resnet10", batch_size=4, workers_per_node=2, dataset=str(root))
    data = prepare_data(spec, "image", reporter)
    assert data.bad_files == [str(victim)] and data.images == 39
    assert data.warnings == said and len(said) == 1
    assert said[0].startswith("skipping 1 of 40 image files: 1 corrupt or truncated (")



@pytest.mark.parametrize(("images", "refused"), [(3, True), (15, True), (16, False)])
def test_a_stated_data_set_without_a_full_step_is_refused(images: int, refused: bool) -> None:
    """--dataset-images 3 with 2 workers at batch 8 was stored as an epoch of one 0.14 s step; each worker's
    shard holds no full batch, so the epoch has none (the real-data path already refused this)."""
    from stash_core.engine.data_setup import prepare_data
    from stash_core.errors import UsageError
    from stash_core.spec import ProfileSpec

    spec = ProfileSpec(model="resnet10", batch_size=8, workers_per_node=2, iterations="auto",
                       stalls=["compute", "interconnect"], dataset_images=images)  # fmt: skip
    if refused:
        with pytest.raises(UsageError, match=f"--dataset-images {images}: too few for 2 worker"):
            prepare_data(spec, "images", reporter=None)
    else:
        assert prepare_data(spec, "images", reporter=None).images == 16


def test_too_few_synthetic_images_are_refused_before_any_is_made(tmp_path: Path, monkeypatch) -> None:
    """--synthetic-images 4 at batch 8 wrote its data set into the cache, then was refused as too small."""
    from stash_core.engine.data_setup import prepare_data
    from stash_core.errors import UsageError
    from stash_core.spec import ProfileSpec

    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    spec = ProfileSpec(model="resnet10", batch_size=8, synthetic_images=4, image_px=32)
    with pytest.raises(UsageError, match="^--synthetic-images 4: too few for 1 worker"):
        prepare_data(spec, "image", reporter=None)
    assert not any(tmp_path.rglob("*.jpg"))


def test_a_data_dir_with_a_folder_it_cannot_look_into_is_one_line_naming_it(tmp_path, monkeypatch) -> None:
    """--data-dir / said "Permission denied: /proc/1/cwd", exit 1, without naming --data-dir."""
    from stash_core.engine import data_setup
    from stash_core.errors import UsageError
    from stash_core.spec import ProfileSpec

    def refused(root):
        raise PermissionError(13, "Permission denied", "/proc/1/cwd")

    monkeypatch.setattr(data_setup, "files_under", refused)
    spec = ProfileSpec("script:train.py", None, script=str(tmp_path / "train.py"), data_dir=str(tmp_path))
    said = rf"^--data-dir {tmp_path}: cannot look at /proc/1/cwd: permission denied$"
    with pytest.raises(UsageError, match=said):
        data_setup.script_data(spec)
