"""A user's model file is one model by its contents: `./m.py:make` and `m.py:make` are one, an edited file or
another folder's file of the same name is another (zoo_names.canonical_model, model_file_sha256; the profiles
predict, recommend, spot and the Compare page take: profile_checks.other_code)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from result_docs import result_doc

from stash_core import store, views
from stash_core.catalog import add_instance, confirm_label
from stash_core.decide.predict import predict_instances
from stash_core.decide.recommend import recommend
from stash_core.store import ingest_result
from stash_core.store.reads import latest_compute_s
from stash_core.zoo_names import canonical_model, model_file_sha256

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "models" / "tiny_cnn.py"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with m.py (the tiny CNN) and a CPU instance catalog in r.duckdb."""
    shutil.copy(EXAMPLE, tmp_path / "m.py")
    monkeypatch.chdir(tmp_path)
    add_instance(tmp_path / "r.duckdb", name="cpu4", accelerator_count=0, vcpus=4, network_gbps=10,
                 on_demand_usd_per_h=0.2)  # fmt: skip
    return tmp_path


def _profile(db: Path, model: str, sha256: str | None, compute_s: float = 0.3) -> dict:
    spec = {"input_shape": [3, 32, 32], "model_sha256": sha256}
    doc = result_doc(model, instance="cpu4", workers=1, batch_size=8, cpu_cores=4,
                     stalls={"compute": compute_s}, spec_extra=spec)  # fmt: skip
    doc["model"]["name"] = model  # as the profile typed it
    assert ingest_result(db, doc)
    return doc


def _predicted(model: str):
    return predict_instances("r.duckdb", model, 8, instances=["cpu4"], input_shape=(3, 32, 32))


def test_one_file_written_two_ways_is_one_model_and_the_store_keeps_one_name():
    assert canonical_model("./m.py:make") == canonical_model("m.py:make") == "m.py:make"
    assert canonical_model(" sub/../m.py:make ") == "m.py:make"
    assert canonical_model("ResNet18") == "resnet18" and canonical_model("pkg.mod:make") == "pkg.mod:make"


def test_the_hash_is_of_the_file_s_contents_and_only_of_a_readable_regular_file(folder: Path):
    assert model_file_sha256("./m.py:make") == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert model_file_sha256("resnet18") is None and model_file_sha256("pkg.mod:make") is None
    assert model_file_sha256("gone.py:make") is None
    os.mkfifo(folder / "pipe.py")
    assert model_file_sha256("pipe.py:make") is None  # never blocks on a pipe


def test_a_profile_typed_with_dot_slash_is_found_without_it_and_stored_under_one_name(folder: Path):
    _profile(folder / "r.duckdb", "./m.py:make", model_file_sha256("m.py:make"))
    stored = store.query_readonly(folder / "r.duckdb", "SELECT model FROM runs")
    assert stored["model"].tolist() == ["m.py:make"]
    rows = _predicted("m.py:make").frame
    assert rows["source"].tolist() == ["measured"]
    assert rows["compute_s"].tolist() == [pytest.approx(0.3)]


def test_a_profile_of_the_file_before_an_edit_is_set_aside_with_the_reason(folder: Path):
    _profile(folder / "r.duckdb", "m.py:make", model_file_sha256("m.py:make"))
    (folder / "m.py").write_text((folder / "m.py").read_text() + "\n# wider now\n")
    answer = _predicted("./m.py:make")
    assert answer.frame.empty
    [line] = [line for line in answer.profiles_set_aside if "other code" in line]
    assert line.startswith("profile ") and "under the name m.py:make" in line and "edited since" in line
    assert latest_compute_s("r.duckdb", "m.py:make", "cpu4", 8, 1) is None


def test_another_folder_s_file_of_one_name_is_another_model_in_recommend(folder: Path):
    other = folder / "other"
    other.mkdir()
    (other / "m.py").write_text(EXAMPLE.read_text() + "\n# another model\n")
    _profile(folder / "r.duckdb", "m.py:make", model_file_sha256(f"{other}/m.py:make"))  # made over there
    result = recommend(folder / "r.duckdb", "m.py:make", 8, 1, 1000, budget_hours=1000.0, instances=["cpu4"],
                       max_instances=1, input_shape=(3, 32, 32))  # fmt: skip
    assert result.options.empty
    assert any("ran other code under the name m.py:make" in line for line in result.profiles_set_aside)


def test_a_profile_stored_before_hashes_were_kept_still_stands(folder: Path):
    _profile(folder / "r.duckdb", "m.py:make", None)
    assert _predicted("m.py:make").frame["source"].tolist() == ["measured"]
    assert latest_compute_s("r.duckdb", "m.py:make", "cpu4", 8, 1) == pytest.approx(0.3)


def test_two_files_of_one_name_are_two_jobs_on_the_compare_page(folder: Path):
    for sha, compute_s in (("c" * 64, 0.5), ("d" * 64, 0.07)):
        _profile(folder / "r.duckdb", "m.py:make", sha, compute_s)
    choices = views.compare.compare_choices(folder / "r.duckdb")
    assert sorted(choices["code"]) == ["cccccccccccc", "dddddddddddd"] and set(choices["runs"]) == {1}
    assert f" · model file {choices.iloc[0]['code']} · " in choices.iloc[0]["job_label"]


def test_one_file_profiled_by_its_absolute_path_is_found_by_a_relative_one(folder: Path):
    """The Run page keeps absolute paths, the terminal takes relative ones, another machine its own checkout:
    one file's contents and factory are one model, in predict, recommend and spot."""
    _profile(folder / "r.duckdb", "/elsewhere/checkout/m.py:make", model_file_sha256("m.py:make"))
    _profile(folder / "r.duckdb", "/elsewhere/checkout/m.py:build", model_file_sha256("m.py:make"), 0.9)
    rows = _predicted("./m.py:make").frame
    assert rows["source"].tolist() == ["measured"] and rows["compute_s"].tolist() == [pytest.approx(0.3)]
    result = recommend(folder / "r.duckdb", "m.py:make", 8, 1, 1000, budget_hours=1000.0, instances=["cpu4"],
                       max_instances=1, input_shape=(3, 32, 32))  # fmt: skip
    assert result.options["source"].tolist() == ["measured"]
    assert latest_compute_s("r.duckdb", "m.py:make", "cpu4", 8, 1) == pytest.approx(0.3)


def test_a_gpu_profile_of_the_file_by_another_path_anchors_its_instance(folder: Path):
    db = folder / "r.duckdb"
    add_instance(db, name="t4box", accelerator="NVIDIA T4 16 GB", accelerator_count=1, vcpus=8,
                 network_gbps=10, on_demand_usd_per_h=0.5)  # fmt: skip
    spec = {"input_shape": [3, 32, 32], "model_sha256": model_file_sha256("m.py:make")}
    doc = result_doc("/elsewhere/m.py:make", instance="t4box", workers=1, batch_size=8, device="cuda",
                     stalls={"compute": 0.05}, spec_extra=spec)  # fmt: skip
    doc["model"]["name"] = "/elsewhere/m.py:make"
    assert ingest_result(db, doc)
    confirm_label(db, doc["run_id"])  # the test's machine has no T4
    answer = predict_instances(db, "./m.py:make", 8, instances=["t4box"], input_shape=(3, 32, 32))
    assert answer.frame["path"].tolist() == ["measured"], answer.profiles_set_aside
