"""The model zoo: published parameter counts, forwards of small models, user models and every user mistake."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
import torch
from torch import nn

from stash_core import spec_parse
from stash_core.errors import UsageError
from stash_core.zoo import (
    ModelInfo,
    build_model,
    describe_model,
    list_models,
    loss_fn,
    parse_input_shape,
    synthetic_batch,
)
from stash_core.zoo.registry import ZOO
from stash_core.zoo.user import USER_MODULE_PREFIX, user_module_name

REPO = Path(__file__).resolve().parents[3]
TINY_CNN = REPO / "examples" / "models" / "tiny_cnn.py"

# torchvision's published figures for 1000 classes: (parameters, gradient tensors).
PUBLISHED = {
    "resnet18": (11_689_512, 62),
    "resnet50": (25_557_032, 161),
    "resnet152": (60_192_808, 467),
    "vgg11": (132_863_336, 22),
    "vgg16": (138_357_544, 32),
    "vgg19": (143_667_240, 38),
}
TORCHVISION_PARAMS = {
    "resnet34": 21_797_672,
    "resnet101": 44_549_160,
    "vgg13": 133_047_848,
    "alexnet": 61_100_840,
    "mobilenet_v2": 3_504_872,
    "shufflenet_v2": 2_278_604,
    "shufflenet_v2_x1_0": 2_278_604,
    "shufflenet_v2_x0_5": 1_366_792,
    "squeezenet1_0": 1_248_424,
}


def usage_error(excinfo: pytest.ExceptionInfo[UsageError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


# --- counts ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_param_and_gradient_tensor_counts(name: str) -> None:
    # Built on the meta device: the same modules, without allocating and initialising 140M weights.
    info = describe_model(name, num_classes=1000)
    assert (info.param_count, info.grad_tensor_count) == PUBLISHED[name]
    assert info.grad_bytes == 4 * info.param_count  # float32, all trainable


@pytest.mark.parametrize("name", sorted(TORCHVISION_PARAMS))
def test_torchvision_param_counts(name: str) -> None:
    assert describe_model(name).param_count == TORCHVISION_PARAMS[name]


def test_meta_description_equals_a_real_build() -> None:
    model, info = build_model("resnet50")
    assert info == describe_model("resnet50")
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED["resnet50"][0]
    assert next(model.parameters()).device.type == "cpu"


def test_resnet18_layer_count_is_convs_norms_and_fc() -> None:
    model, info = build_model("resnet18", num_classes=10, input_shape=(3, 64, 64))
    convs = sum(isinstance(m, nn.Conv2d) for m in model.modules())
    norms = sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert (convs, norms) == (20, 20)
    assert info.layer_count == convs + norms + 1


def test_nonstandard_resnet_depths_use_documented_block_layouts() -> None:
    layouts = {
        "resnet10": [1, 1, 1, 1],
        "resnet12": [2, 1, 1, 1],
        "resnet16": [2, 2, 2, 1],
        "resnet18": [2, 2, 2, 2],
    }
    counts = []
    for name, layout in layouts.items():
        with torch.device("meta"):
            model, info = build_model(name)
        assert [len(model.layer1), len(model.layer2), len(model.layer3), len(model.layer4)] == layout
        convs = sum(isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3) for m in model.modules())
        assert convs + 2 == int(name.removeprefix("resnet"))  # 3x3 convs + stem + fc = the name's depth
        counts.append(info.param_count)
    assert counts == sorted(counts) and len(set(counts)) == len(counts)


@pytest.mark.parametrize(
    "name,layers,hidden", [("bert_tiny", 2, 128), ("bert_base", 12, 768), ("bert_large", 24, 1024)]
)
def test_bert_counts_follow_the_documented_formula(name: str, layers: int, hidden: int) -> None:
    info = describe_model(name, num_classes=3)
    embeddings = 30522 * hidden + 512 * hidden + 2 * hidden + 2 * hidden
    per_layer = 12 * hidden * hidden + 13 * hidden
    head = hidden * hidden + hidden + hidden * 3 + 3
    assert info.param_count == embeddings + layers * per_layer + head
    assert info.grad_tensor_count == 5 + 12 * layers + 4
    assert (info.kind, info.input_shape, info.vocab_size, info.num_classes) == ("tokens", (128,), 30522, 3)


def test_bert_base_matches_hugging_face_sequence_classifier_count() -> None:
    assert describe_model("bert_base").param_count == 109_483_778  # BertForSequenceClassification, 2 labels


# --- every name builds, forwards -------------------------------------------------------------------------


def test_list_models_is_sorted_and_complete() -> None:
    names = list_models()
    assert names == sorted(names)
    expected = {
        "resnet10",
        "resnet12",
        "resnet16",
        "resnet18",
        "resnet34",
        "resnet50",
        "resnet101",
        "resnet152",
        "vgg11",
        "vgg13",
        "vgg16",
        "vgg19",
        "alexnet",
        "mobilenet_v2",
        "shufflenet_v2",
        "shufflenet_v2_x0_5",
        "shufflenet_v2_x1_0",
        "squeezenet1_0",
        "bert_tiny",
        "bert_base",
        "bert_large",
        "gpt2_tiny",
        "llama_tiny",
        "gpt2",
        "gpt2_medium",
        "gpt2_large",
        "gpt2_xl",
        "tinyllama_1b",
        "llama2_7b",
    }
    assert set(names) == expected


@pytest.mark.parametrize("name", list_models())
def test_every_zoo_model_builds_with_consistent_info(name: str) -> None:
    language_model = ZOO[name].causal_lm  # predicts over its vocabulary: no classes to choose
    with torch.device("meta"):  # runs every factory; the real allocation is covered by the tests above/below
        model, info = build_model(name, num_classes=None if language_model else 17)
    assert isinstance(model, nn.Module) and info.name == name
    assert info.num_classes == (ZOO[name].vocab_size if language_model else 17)
    assert info.param_count == sum(p.numel() for p in model.parameters())
    assert 0 < info.layer_count <= info.grad_tensor_count
    assert info.kind == ("tokens" if name.startswith(("bert", "gpt2", "llama", "tinyllama")) else "image")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "shufflenet_v2", "squeezenet1_0", "alexnet"])
def test_small_image_models_forward_and_backward(name: str) -> None:
    model, info = build_model(name, num_classes=10, input_shape=(3, 64, 64))
    inputs, targets = synthetic_batch(info, batch_size=2, device="cpu")
    logits = model(inputs)
    assert logits.shape == (2, 10)
    loss = loss_fn(info)(logits, targets)
    loss.backward()
    assert torch.isfinite(loss)
    assert sum(p.grad is not None for p in model.parameters()) == info.grad_tensor_count


def test_bert_tiny_forward_on_token_ids() -> None:
    model, info = build_model("bert_tiny", num_classes=5, input_shape=(16,))
    inputs, targets = synthetic_batch(info, batch_size=3, device="cpu")
    assert inputs.dtype == torch.long and inputs.shape == (3, 16)
    logits = model(inputs)
    assert logits.shape == (3, 5)
    loss_fn(info)(logits, targets).backward()
    assert model.word_embeddings.weight.grad is not None


def test_input_channels_follow_the_input_shape() -> None:
    model, info = build_model("resnet18", num_classes=10, input_shape=(1, 28, 28))
    assert model.conv1.weight.shape == (64, 1, 7, 7)
    assert info.param_count == PUBLISHED["resnet18"][0] - 2 * 64 * 7 * 7 - 990 * 513
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_zoo_names_are_case_insensitive_and_aliases_agree() -> None:
    assert describe_model(" ResNet18 ").name == "resnet18"
    assert describe_model("shufflenet_v2").param_count == describe_model("shufflenet_v2_x1_0").param_count


@pytest.mark.parametrize("build", [build_model, describe_model])
def test_a_profiled_scripts_name_is_refused_as_a_model_in_one_line(build) -> None:
    # runs.model of a --script profile: no module `script` to import, whichever command names it
    with pytest.raises(UsageError, match=r"^script:train.py is a profiled script, not a model: profile a"):
        build(" script:train.py")


# --- user models -------------------------------------------------------------------------------------------


def test_user_model_from_file_path_gets_num_classes() -> None:
    model, info = build_model(f"{TINY_CNN}:make", num_classes=10, input_shape=(3, 32, 32))
    assert (info.kind, info.num_classes, info.input_shape, info.vocab_size) == (
        "image",
        10,
        (3, 32, 32),
        None,
    )
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    # without a class count the factory keeps its own default (it got 1000, and a 7x larger gradient)
    _, default_info = build_model(f"{TINY_CNN}:make")
    assert (default_info.num_classes, default_info.input_shape) == (10, (3, 224, 224))


def test_a_factory_whose_num_classes_has_no_default_gets_the_image_default(tmp_path: Path) -> None:
    path = write(
        tmp_path / "needs.py",
        """
        from torch import nn
        def make(num_classes):
            return nn.Sequential(nn.Flatten(), nn.Linear(12, num_classes))
    """,
    )
    assert build_model(f"{path}:make", input_shape=(3, 2, 2))[1].num_classes == 1000


def test_user_model_from_module_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "stash_test_pkg" / "__init__.py", "")
    write(
        tmp_path / "stash_test_pkg" / "nets.py",
        """
        from torch import nn
        def make(num_classes):
            return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))
    """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    model, info = build_model("stash_test_pkg.nets:make", num_classes=4, input_shape=(3, 8, 8))
    assert info.param_count == 3 * 8 * 8 * 4 + 4 and info.layer_count == 1
    assert model(torch.randn(2, 3, 8, 8)).shape == (2, 4)


def test_factory_without_num_classes_reports_its_own_class_count(tmp_path: Path) -> None:
    path = write(
        tmp_path / "fixed.py",
        """
        from torch import nn
        def make():
            return nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
    """,
    )
    _, info = build_model(f"{path}:make", input_shape=(3, 2, 2))
    assert info.num_classes == 5
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:make", num_classes=3, input_shape=(3, 2, 2))
    assert "returns 5 classes" in usage_error(excinfo)


def test_user_token_model_uses_its_vocab_size(tmp_path: Path) -> None:
    path = write(
        tmp_path / "tokens.py",
        """
        import torch
        from torch import nn
        class Bag(nn.Module):
            vocab_size = 100
            def __init__(self, num_classes):
                super().__init__()
                self.embed = nn.EmbeddingBag(self.vocab_size, 8)
                self.head = nn.Linear(8, num_classes)
            def forward(self, ids):
                return self.head(self.embed(ids))
    """,
    )
    model, info = build_model(f"{path}:Bag", input_shape=(16,))
    assert (info.kind, info.vocab_size, info.num_classes) == ("tokens", 100, 2)
    inputs, targets = synthetic_batch(info, batch_size=64, device="cpu")
    assert int(inputs.max()) < 100 and int(targets.max()) < 2
    assert model(inputs).shape == (64, 2)


def test_frozen_parameters_are_counted_but_not_as_gradients(tmp_path: Path) -> None:
    path = write(
        tmp_path / "frozen.py",
        """
        from torch import nn
        def make(num_classes=10):
            body = nn.Linear(6, 6)
            body.requires_grad_(False)
            return nn.Sequential(nn.Flatten(), body, nn.Linear(6, num_classes))
    """,
    )
    _, info = build_model(f"{path}:make", num_classes=2, input_shape=(6, 1))
    assert info.param_count == 42 + 14
    assert (info.grad_tensor_count, info.grad_bytes) == (2, 14 * 4)


def test_user_files_do_not_collide_in_sys_modules(tmp_path: Path) -> None:
    body = """
        from torch import nn
        def make(num_classes):
            return nn.Sequential(nn.Flatten(), nn.Linear({width}, num_classes))
    """
    first = write(tmp_path / "a" / "json.py", body.format(width=4))  # named like a standard module
    second = write(tmp_path / "b" / "json.py", body.format(width=9))
    _, info_a = build_model(f"{first}:make", num_classes=2, input_shape=(4, 1))
    _, info_b = build_model(f"{second}:make", num_classes=2, input_shape=(9, 1))
    assert (info_a.param_count, info_b.param_count) == (10, 20)
    assert sys.modules["json"].dumps is json.dumps
    module_a, module_b = (sys.modules[user_module_name(path.resolve())] for path in (first, second))
    assert module_a is not module_b and module_a.make is not module_b.make
    assert module_a.__name__.startswith(USER_MODULE_PREFIX)
    assert str(tmp_path / "a") not in sys.path


def test_user_file_can_import_its_neighbours_and_nothing_is_written_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "blocks_for_stash_test.py", "from torch import nn\nWIDTH = 5\n")
    path = write(
        tmp_path / "net.py",
        """
        from torch import nn
        import blocks_for_stash_test
        def make(num_classes):
            return nn.Sequential(nn.Flatten(), nn.Linear(blocks_for_stash_test.WIDTH, num_classes))
    """,
    )
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as Python runs where nothing says otherwise
    _, info = build_model(f"{path}:make", num_classes=2, input_shape=(5, 1))
    assert info.param_count == 12
    assert sorted(child.name for child in tmp_path.iterdir()) == ["blocks_for_stash_test.py", "net.py"]
    assert sys.dont_write_bytecode is False  # (no __pycache__ written beside the user's files)


def test_user_model_that_cannot_run_on_meta_is_checked_with_a_real_forward(tmp_path: Path) -> None:
    path = write(
        tmp_path / "plain_tensor.py",
        """
        import torch
        from torch import nn
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 6)
                self.scale = torch.ones(4)  # not a buffer: stays on the CPU when a meta forward runs
            def forward(self, x):
                return self.fc(x.flatten(1) * self.scale)
    """,
    )
    _, info = build_model(f"{path}:Scaled", input_shape=(4, 1))
    assert info.num_classes == 6
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:Scaled", input_shape=(5, 1))
    assert "fails on input shape 5,1" in usage_error(excinfo)


# --- mistakes a user can make ---------------------------------------------------------------------------


def test_unknown_name_suggests_close_names() -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model("resnet19")
    message = usage_error(excinfo)
    assert "'resnet19'" in message and "did you mean resnet18" in message and "file.py:FACTORY" in message
    with pytest.raises(UsageError) as excinfo:
        build_model("qqqq")
    assert "did you mean" not in usage_error(excinfo)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{tmp_path / 'nope.py'}:make")
    assert "not found" in usage_error(excinfo) and "nope.py" in str(excinfo.value)


def test_file_without_the_factory_lists_what_it_defines() -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{TINY_CNN}:build")
    message = usage_error(excinfo)
    assert "'build'" in message and "make" in message


def test_factory_that_raises_reports_its_message(tmp_path: Path) -> None:
    path = write(
        tmp_path / "broken.py",
        """
        def make(num_classes):
            raise ValueError("width must be even\\nsecond line")
    """,
    )
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:make")
    assert "ValueError: width must be even second line" in usage_error(excinfo)


def test_file_that_fails_to_import(tmp_path: Path) -> None:
    path = write(tmp_path / "syntax.py", "def make(:\n")
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:make")
    assert "SyntaxError" in usage_error(excinfo)
    assert user_module_name(path.resolve()) not in sys.modules


def test_module_that_cannot_be_imported() -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model("no_such_package_for_stash.models:make")
    assert "no_such_package_for_stash" in usage_error(excinfo)


def test_factory_returning_a_non_module(tmp_path: Path) -> None:
    path = write(tmp_path / "notmodule.py", "def make():\n    return {'layers': 3}\n")
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:make")
    assert "dict" in usage_error(excinfo) and "torch.nn.Module" in str(excinfo.value)


def test_model_returning_wrong_output_shape(tmp_path: Path) -> None:
    path = write(
        tmp_path / "conv_only.py", "from torch import nn\ndef make():\n    return nn.Conv2d(3, 4, 3)\n"
    )
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:make", input_shape=(3, 8, 8))
    assert "(batch, classes)" in usage_error(excinfo)


def test_folder_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{tmp_path}:make")
    assert "is a folder" in usage_error(excinfo)


def test_a_device_instead_of_a_file_is_no_missing_file() -> None:
    # /dev/null exists: "model file not found" sent the user looking for a file that is there
    with pytest.raises(UsageError) as excinfo:
        build_model("/dev/null:make")
    assert usage_error(excinfo) == "model file /dev/null is not a regular file; give a .py file"


def test_input_shape_may_be_given_as_text() -> None:
    assert describe_model("resnet18", input_shape="3, 32, 32").input_shape == (3, 32, 32)  # type: ignore[arg-type]


def test_model_file_without_factory_name() -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model(str(TINY_CNN))
    assert "tiny_cnn.py:FACTORY" in usage_error(excinfo)


@pytest.mark.parametrize("shape", [(3, 0, 224), (-1,), (), (3, 2.5, 4)])
def test_bad_input_shapes(shape: tuple) -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model("resnet18", input_shape=shape)
    assert "input shape" in usage_error(excinfo)


@pytest.mark.parametrize("num_classes", [0, -3, True, 2.0])
def test_bad_num_classes(num_classes: object) -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model("resnet18", num_classes=num_classes)  # type: ignore[arg-type]
    assert "num_classes" in usage_error(excinfo)


@pytest.mark.parametrize(
    "name,shape,expected",
    [
        ("bert_tiny", (3, 32, 32), "token ids"),
        ("bert_tiny", (513,), "at most 512"),
        ("resnet18", (128,), "C,H,W"),
        ("alexnet", (3, 32, 32), "at least 63x63 pixels; got input shape 3,32,32"),
    ],
)
def test_shape_that_does_not_fit_the_model(name: str, shape: tuple[int, ...], expected: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        build_model(name, input_shape=shape)
    assert expected in usage_error(excinfo)


@pytest.mark.parametrize(
    "name",
    [
        "alexnet",
        "squeezenet1_0",
        "vgg11",
        "vgg13",
        "vgg16",
        "vgg19",
        "resnet18",
        "resnet50",
        "mobilenet_v2",
        "shufflenet_v2_x0_5",
    ],
)
def test_documented_minimum_image_side_is_exact(name: str) -> None:
    side = ZOO[name].min_image_side
    with torch.device("meta"):  # a meta forward computes every shape without the arithmetic
        model, _ = build_model(name, num_classes=10, input_shape=(3, side, side))
        assert model(torch.empty(2, 3, side, side)).shape == (2, 10)
        if side > 1:
            with pytest.raises(RuntimeError):
                model(torch.empty(2, 3, side - 1, side))
            with pytest.raises(UsageError) as excinfo:
                build_model(name, input_shape=(3, side, side - 1))
            assert f"at least {side}x{side}" in usage_error(excinfo)


def test_minimum_image_side_holds_for_real_tensors() -> None:
    model, _ = build_model("squeezenet1_0", num_classes=10, input_shape=(3, 21, 21))
    assert model(torch.randn(2, 3, 21, 21)).shape == (2, 10)
    with pytest.raises(RuntimeError):
        model(torch.randn(2, 3, 20, 20))


# --- shapes, batches, loss, info -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("3,224,224", [3, 224, 224]),
        ("128", [128]),
        (" 3 x 32 x 32 ", [3, 32, 32]),
        ("(1, 28, 28)", [1, 28, 28]),
    ],
)
def test_parse_input_shape(text: str, expected: list[int]) -> None:
    """The zoo names the spec's parser (one parser of an input shape), and a model takes its text too."""
    assert parse_input_shape(text) == expected
    assert parse_input_shape is spec_parse.parse_input_shape


@pytest.mark.parametrize(
    "text", ["", "abc", "3,,a", "0,224,224", "-1", "3.5,2", "1,1,1,1,1", "3,65536,65536"]
)
def test_parse_input_shape_rejects_garbage(text: str) -> None:
    """Garbage, and shapes beyond the spec's bounds (more than four dimensions, a sample beyond memory)."""
    with pytest.raises(UsageError) as excinfo:
        parse_input_shape(text)
    assert "--input-shape" in usage_error(excinfo)
    with pytest.raises(UsageError):
        build_model("resnet18", input_shape=text)  # type: ignore[arg-type]


def test_synthetic_batch_is_on_device_deterministic_and_in_range() -> None:
    info = describe_model("resnet18", num_classes=7, input_shape=(3, 16, 16))
    inputs, targets = synthetic_batch(info, batch_size=256, device="cpu", seed=3)
    assert inputs.shape == (256, 3, 16, 16) and inputs.dtype == torch.float32 and inputs.device.type == "cpu"
    assert targets.shape == (256,) and targets.dtype == torch.long
    assert 0 <= int(targets.min()) and int(targets.max()) < 7 and len(targets.unique()) > 1
    again, again_targets = synthetic_batch(info, batch_size=256, device=torch.device("cpu"), seed=3)
    assert torch.equal(inputs, again) and torch.equal(targets, again_targets)
    other, _ = synthetic_batch(info, batch_size=256, device="cpu", seed=4)
    assert not torch.equal(inputs, other)
    assert abs(float(inputs.mean())) < 0.05 and 0.9 < float(inputs.std()) < 1.1


def test_synthetic_batch_rejects_bad_batch_size() -> None:
    info = describe_model("bert_tiny")
    with pytest.raises(UsageError):
        synthetic_batch(info, batch_size=0, device="cpu")


def test_loss_is_cross_entropy() -> None:
    info = describe_model("bert_tiny", num_classes=4)
    logits = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]])
    targets = torch.tensor([0, 1])
    assert torch.isclose(loss_fn(info)(logits, targets), nn.functional.cross_entropy(logits, targets))
    assert loss_fn(info)(logits, torch.tensor([0, 3])) < loss_fn(info)(logits, targets)


def test_model_info_round_trips_through_json() -> None:
    info = describe_model("resnet18")
    data = json.loads(json.dumps(info.to_dict()))
    assert data["input_shape"] == [3, 224, 224] and data["grad_bytes"] == 46_758_048
    assert ModelInfo.from_dict({**data, "added_later": 1}) == info
    with pytest.raises(FrozenInstanceError):
        info.name = "other"  # type: ignore[misc]


def test_a_user_model_without_trainable_parameters_is_refused_before_any_run(tmp_path):
    """It was profiled: a new database, a failed run, and torch's 'optimizer got an empty parameter list'."""
    body = "    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())\n"
    (tmp_path / "pool.py").write_text("import torch.nn as nn\ndef make(num_classes=10):\n" + body)
    with pytest.raises(UsageError, match="has no trainable parameters"):
        build_model(f"{tmp_path}/pool.py:make", input_shape=(3, 32, 32))


def test_a_model_file_that_parses_arguments_as_it_loads_sees_none_of_stashs(tmp_path, monkeypatch) -> None:
    """A file with a module-level parse_args() read `stash predict --model ...`'s arguments: "unrecognized
    arguments: predict --model ...", then "cannot import model file ...: SystemExit: 2"."""
    path = write(tmp_path / "toplevel.py", """
        import argparse
        from torch import nn
        parser = argparse.ArgumentParser()
        parser.add_argument("--lr", type=float, default=0.1)
        args = parser.parse_args()
        def make(num_classes):
            return nn.Sequential(nn.Flatten(), nn.Linear(4, num_classes))
    """)
    monkeypatch.setattr(sys, "argv", ["stash", "predict", "--model", f"{path}:make", "--db", "x.duckdb"])
    _, info = build_model(f"{path}:make", num_classes=2, input_shape=(4, 1))
    assert info.param_count == 10 and sys.argv[1] == "predict"  # Stash's own, given back
