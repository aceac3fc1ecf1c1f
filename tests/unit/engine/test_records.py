"""What a result file keeps of a profile's inputs (engine/records.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from stash_core.engine.data_setup import DataSetup
from stash_core.engine.records import spec_record
from stash_core.spec import ProfileSpec


def test_a_user_model_file_is_kept_by_one_name_and_its_contents_hash(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "m.py").write_text("def make():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    record = spec_record(ProfileSpec(model="./m.py:make", batch_size=4), DataSetup(), None)
    assert record["model"] == "m.py:make"
    assert record["model_sha256"] == hashlib.sha256((tmp_path / "m.py").read_bytes()).hexdigest()


def test_a_zoo_model_has_no_file_hash_and_its_name_as_the_zoo_has_it() -> None:
    record = spec_record(ProfileSpec(model="ResNet18", batch_size=4), DataSetup(images=10), None)
    assert (record["model"], record["model_sha256"], record["dataset_images"]) == ("resnet18", None, 10)
