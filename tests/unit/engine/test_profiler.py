"""Preparing a profile's data: sizes, corrupt files, and data sets that cannot be cached."""

from __future__ import annotations

import pytest

from stash_core.data import pagecache
from stash_core.data.jpeg_dataset import generate_synthetic_jpegs
from stash_core.engine.data_setup import DataSetup, iterations_per_epoch, prepare_data
from stash_core.engine.plan import PhasePlan, plan_phases
from stash_core.engine.progress import Reporter
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec


def spec_for(root, **overrides) -> ProfileSpec:
    return ProfileSpec(model="resnet10", batch_size=4, workers_per_node=2, dataset=str(root), **overrides)


def test_a_data_set_that_does_not_fit_in_memory_is_not_separable(tmp_path, monkeypatch):
    root = generate_synthetic_jpegs(24, image_px=32, root=tmp_path / "data")
    monkeypatch.setattr(pagecache, "fits_in_memory", lambda total_bytes, safety=0.7: False)
    data = prepare_data(spec_for(root), "image", Reporter())
    assert data.images == 24
    assert "does not fit in available memory" in data.not_separable_reason


def test_corrupt_files_are_counted_and_left_out(tmp_path):
    root = generate_synthetic_jpegs(40, image_px=32, root=tmp_path / "data")
    victim = next(root.rglob("*.jpg"))
    victim.write_bytes(b"garbage")
    data = prepare_data(spec_for(root), "image", Reporter())
    assert data.bad_files == [str(victim)]
    assert data.images == 39


def test_too_few_samples_for_the_workers_and_batch_is_refused(tmp_path):
    root = generate_synthetic_jpegs(6, image_px=32, root=tmp_path / "data")
    with pytest.raises(UsageError, match="too few"):
        prepare_data(spec_for(root), "image", Reporter())


def test_epoch_length_follows_the_sharded_sampler():
    spec = ProfileSpec(model="resnet10", batch_size=32, workers_per_node=2)
    # 1000 samples per rank / 32, last partial batch dropped
    assert iterations_per_epoch(spec, {"spec": {"dataset_images": 2000}}) == 31
    assert iterations_per_epoch(spec, {"spec": {"dataset_images": None}}) is None


def test_a_scripts_epoch_is_what_its_loader_gave_with_all_the_jobs_workers():
    """R0 (one worker) reads an unsharded epoch: only runs of all the job's workers say the job's epoch."""
    spec = ProfileSpec(model="script:train", script="train.py", batch_size=None, workers_per_node=2, nodes=2)

    def run(name, workers_per_node, nodes, steps, status="completed"):
        record = PhasePlan(name, workers_per_node, nodes, "synthetic").to_dict()  # as the profile keeps it
        return {**record, "status": status, "script": {"iterations_per_epoch": steps}}

    # R1 with one machine's worth of workers (the first host cannot hold them all): a share of its own
    phases = [run("R0", 1, 1, 400), run("R1", 2, 1, 200), run("R1n", 2, 2, 100), run("R3", 2, 2, None)]
    assert iterations_per_epoch(spec, {"spec": {}, "phases": phases}) == 100
    assert iterations_per_epoch(spec, {"spec": {}, "phases": phases[:2]}) is None
    assert iterations_per_epoch(spec, {"spec": {}, "phases": [run("R1n", 2, 2, 100, "failed")]}) is None


def test_plan_measures_what_the_stalls_need():
    spec = ProfileSpec(model="resnet10", batch_size=4, workers_per_node=2, synthetic_images=10)
    _, plans = plan_phases(spec)
    assert [(p.name, p.workers, p.data) for p in plans] == [
        ("R0", 1, "synthetic"), ("R1", 2, "synthetic"), ("R3", 2, "cached"), ("R2", 2, "cold"),
    ]  # fmt: skip
    spec.stalls = ["disk"]
    assert [p.name for p in plan_phases(spec)[1]] == ["R3", "R2"]


def test_a_run_whose_launch_never_got_under_way_is_not_said_interrupted(monkeypatch):
    """A failure raised while a run was being prepared left its record 'interrupted', though nobody
    interrupted it: it is a run not run, with the reason."""
    from stash_core.engine import profiler
    from stash_core.errors import MeasurementError, ProfileEnded

    def run_phase(*args, **kwargs):
        raise MeasurementError("the machine went away")

    monkeypatch.setattr(profiler, "run_phase", run_phase)
    spec = ProfileSpec(model="m", batch_size=2, stalls=["compute"])
    with pytest.raises(ProfileEnded) as ended:
        profiler.run_profile(spec, {}, DataSetup())
    doc = ended.value.doc
    assert doc["status"] == "failed" and isinstance(ended.value.cause, MeasurementError)
    assert [(r["name"], r["status"], r["error"]) for r in doc["phases"]] == [
        ("R0", "skipped", "not run: the machine went away")
    ]


def test_a_cold_run_started_cached_where_a_launch_found_more_than_its_warning_allows():
    from stash_core.engine.data_setup import started_cached

    launches = [{"resident_fraction_start": 0.0}, {"resident_fraction_start": 0.3, "pooled": False}]
    assert started_cached({"launches": launches}) is False  # the unpooled launch is not counted
    assert started_cached({"launches": [*launches, {"resident_fraction_start": 0.2}]}) is True
    assert started_cached({"resident_fraction_start": None}) is None


def test_a_text_file_that_cannot_be_read_is_refused_before_any_run(tmp_path):
    from stash_core.engine.data_setup import refuse_unreadable

    (tmp_path / "a").mkdir()
    readable = tmp_path / "a" / "d1.txt"
    readable.write_text("words")
    refuse_unreadable([readable], tmp_path)
    with pytest.raises(UsageError, match=r"1 of 2 text files under .* cannot be read, e.g. a/d2\\nx.txt: "):
        refuse_unreadable([readable, tmp_path / "a" / "d2\nx.txt"], tmp_path)  # gone, as a locked one


def test_a_wall_clock_stepped_back_during_a_profile_leaves_it_ending_after_it_began(monkeypatch):
    """NTP stepping back a clock that ran ahead made finished_at earlier than started_at: the store refused
    the profile's own result file, and `stash ingest` of it too."""
    import datetime
    import time

    from stash_core.engine import profiler
    from stash_core.errors import MeasurementError, ProfileEnded
    from stash_core.results.file import validate_result

    readings = iter([datetime.datetime(2026, 12, 2, 10, tzinfo=datetime.UTC),
                     datetime.datetime(2026, 12, 2, 9, 50, tzinfo=datetime.UTC)])  # fmt: skip
    monkeypatch.setattr(profiler, "utc_now", lambda: next(readings))

    def run_phase(*args, **kwargs):
        time.sleep(0.05)
        raise MeasurementError("the machine went away")

    monkeypatch.setattr(profiler, "run_phase", run_phase)
    with pytest.raises(ProfileEnded) as ended:
        profiler.run_profile(ProfileSpec(model="m", batch_size=2, stalls=["compute"]), {}, DataSetup())
    doc = ended.value.doc
    took_s = (datetime.datetime.fromisoformat(doc["finished_at"])
              - datetime.datetime.fromisoformat(doc["started_at"])).total_seconds()  # fmt: skip
    assert 0.05 <= took_s < 30
    validate_result(doc)


def test_a_generated_data_set_is_said_where_it_is_kept(tmp_path, monkeypatch):
    """Generated sets are kept for good under the cache folder; the profile said only "preparing 64 synthetic
    JPEG images", and no doc said where they went."""
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))

    class Said(Reporter):
        lines: list[str] = []

        def message(self, text: str) -> None:
            self.lines.append(text)

    reporter = Said()
    spec = ProfileSpec(model="resnet10", batch_size=2, synthetic_images=8, image_px=16)
    data = prepare_data(spec, "image", reporter)
    where = tmp_path / "cache" / "datasets"
    said = f"preparing 8 synthetic JPEG images (16 px) in {where} (kept for the next profile)"
    assert reporter.lines[0] == said
    assert data.root.parent == where


def test_hosts_that_take_away_the_only_run_asked_for_are_refused_not_a_completed_run_of_nothing():
    """--workers 1 --nodes 2 --stalls interconnect on a first node of one core: R1 was left out, nothing ran,
    and the run was stored as completed with no breakdown (then a traceback printing it)."""
    from stash_core.engine.plan import refuse_nothing_to_run

    spec = ProfileSpec(model="resnet10", batch_size=4, workers_per_node=1, nodes=2, stalls=["interconnect"])
    chain, plans = plan_phases(spec, reference_workers=1)
    assert "R1" not in chain and plans == []
    with pytest.raises(UsageError, match="nothing to measure on these hosts: the first machine holds one"):
        refuse_nothing_to_run(spec, plans)
    refuse_nothing_to_run(spec, plan_phases(spec, reference_workers=2)[1])  # R1 there: nothing to say
