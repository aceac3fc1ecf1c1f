"""What a profile runs on (api/profile_inputs.py): the model's classifier sized to its data set's classes,
options the model would not use refused, and the read cap checked where the data set lives."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO

from stash_core.api import profile_flow, profile_inputs
from stash_core.engine.progress import Reporter
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec

TINY_CNN = f"{REPO}/examples/models/tiny_cnn.py:make"


def _model_of(monkeypatch, tmp_path: Path, model: str, classes: int, dataset: bool, num_classes=None):
    """data_and_model over a data set of `classes` class folders (--dataset, else a generated one)."""
    from stash_core.engine.data_setup import DataSetup
    from stash_core.zoo import build_model

    monkeypatch.setattr(
        profile_inputs, "prepare_data", lambda spec, kind, reporter: DataSetup(classes=classes)
    )
    spec = ProfileSpec(model=model, batch_size=2, input_shape=[3, 32, 32], num_classes=num_classes)
    spec.dataset = str(tmp_path) if dataset else None
    info = build_model(model, num_classes, input_shape=(3, 32, 32))[1]
    return profile_inputs.data_and_model(spec, info, Reporter())[1], spec


def test_a_datasets_classes_size_the_classifier_when_none_are_given(monkeypatch, tmp_path: Path) -> None:
    info, spec = _model_of(monkeypatch, tmp_path, TINY_CNN, classes=2, dataset=True)
    # 2 outputs, not the default 1000: the gradients (and the communication) are the data set's model's
    assert info["num_classes"] == 2 and spec.num_classes == 2
    assert info["param_count"] == _model_of(monkeypatch, tmp_path, TINY_CNN, 2, False, 2)[0]["param_count"]


def test_given_classes_and_a_generated_sets_classes_keep_the_model(monkeypatch, tmp_path: Path) -> None:
    assert _model_of(monkeypatch, tmp_path, TINY_CNN, 2, True, num_classes=5)[0]["num_classes"] == 5
    assert _model_of(monkeypatch, tmp_path, TINY_CNN, 2, False)[0]["num_classes"] == 10  # its own default
    with pytest.raises(UsageError, match="the data set has 12 class folders"):
        _model_of(monkeypatch, tmp_path, TINY_CNN, 12, True, num_classes=5)


def test_a_model_that_takes_no_class_count_keeps_its_outputs(monkeypatch, tmp_path: Path) -> None:
    factory = tmp_path / "fixed.py"
    factory.write_text(
        "from torch import nn\n\ndef make():\n    return nn.Sequential(nn.Flatten(), nn.Linear(3072, 7))\n"
    )
    info, spec = _model_of(monkeypatch, tmp_path, f"{factory}:make", classes=2, dataset=True)
    assert info["num_classes"] == 7 and spec.num_classes is None
    with pytest.raises(UsageError, match="9 class folders and model .* returns 7 classes"):
        _model_of(monkeypatch, tmp_path, f"{factory}:make", classes=9, dataset=True)


def test_the_read_cap_is_checked_where_the_generated_data_set_lives(monkeypatch, tmp_path: Path) -> None:
    """--disk-read-mbps was checked on $HOME's file system, so a cache folder on a tmpfs was refused only
    in the middle of the profile, after a failed run was saved."""
    from stash_core.cli.main import parse_command
    from stash_core.data import diskcap

    checked: list[Path] = []
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(diskcap, "disk_cap_unsupported_reason", lambda path: checked.append(path) or "tmpfs")
    argv = ["profile", "--model", "resnet10", "--batch-size", "4", "--synthetic-images", "64"]
    with pytest.raises(UsageError, match="--disk-read-mbps: tmpfs"):
        profile_flow.checked_spec(parse_command([*argv, "--disk-read-mbps", "5"]))
    assert checked == [tmp_path]  # the nearest folder of $STASH_CACHE_DIR/datasets that exists


def test_image_px_is_refused_for_a_token_model() -> None:
    spec = ProfileSpec(model="bert_tiny", batch_size=2, synthetic_images=8, image_px=64)
    with pytest.raises(UsageError, match="bert_tiny takes token ids"):
        profile_inputs.built_model(spec)
    assert profile_inputs.built_model(ProfileSpec(model="bert_tiny", batch_size=2)).kind == "tokens"


def test_the_models_built_in_the_callers_process_leave_its_random_stream_as_it_was(tmp_path):
    """profile() built its model in the caller's process from the global generator: a notebook seeded for
    reproducibility drew other numbers afterwards."""
    import torch

    torch.manual_seed(1)
    expected = torch.rand(3)
    torch.manual_seed(1)
    spec = ProfileSpec(model="resnet10", batch_size=2, input_shape=[3, 32, 32])
    spec.dataset = str(tmp_path)
    info = profile_inputs.built_model(spec)
    assert profile_inputs._sized_to_classes(spec, info, 12).num_classes == 12  # built again for 12 classes
    assert torch.equal(torch.rand(3), expected)


def test_a_model_that_cannot_train_at_the_per_worker_batch_is_refused_before_any_run(tmp_path: Path) -> None:
    """A BatchNorm left one value per channel at --batch-size 1 passed the build's probe (batch 2, in eval
    mode) and failed the first run; `stash predict` refused it already."""
    factory = tmp_path / "norm.py"
    factory.write_text(
        "from torch import nn\n\ndef make():\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(12, 4), nn.BatchNorm1d(4), nn.Linear(4, 3))\n"
    )
    spec = ProfileSpec(model=f"{factory}:make", batch_size=1, input_shape=[3, 2, 2])
    with pytest.raises(UsageError, match=r"cannot take a training step at a batch of 1 per worker"):
        profile_inputs.built_model(spec)
    spec.batch_size = 2
    assert profile_inputs.built_model(spec).num_classes == 3
