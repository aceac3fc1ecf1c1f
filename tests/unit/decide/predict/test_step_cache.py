"""Counted steps kept on disk: read back identical, counted again when the file is bad or unwritable."""

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from stash_core.decide.predict import step_cache
from stash_core.decide.predict import step_cost as step_cost_module
from stash_core.decide.predict.step_cache import cache_dir
from stash_core.decide.predict.step_cost import step_cost


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "steps"
    monkeypatch.setenv("STASH_CACHE_DIR", str(folder))
    step_cost_module._traced.cache_clear()
    yield folder
    step_cost_module._traced.cache_clear()


def _count_traces(monkeypatch) -> list:
    calls = []
    original = step_cost_module._counted

    def counting(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(step_cost_module, "_counted", counting)
    return calls


def test_a_second_count_is_read_back_identical_without_tracing(cache, monkeypatch):
    calls = _count_traces(monkeypatch)
    first = step_cost("resnet18", 8, (3, 32, 32))
    assert cache_dir() == cache and len(list(cache.glob("*.json"))) == 1
    step_cost_module._traced.cache_clear()
    second = step_cost("resnet18", 8, (3, 32, 32))
    assert len(calls) == 1
    assert second == first and second.ops[0].gemm == first.ops[0].gemm
    # Another batch or attention is another count.
    step_cost("resnet18", 16, (3, 32, 32))
    assert len(calls) == 2


def test_a_damaged_file_is_counted_again_and_an_unwritable_folder_only_costs_time(cache, monkeypatch):
    calls = _count_traces(monkeypatch)
    expected = step_cost("bert_tiny", 2, (16,))
    (path,) = cache.glob("*.json")
    path.write_text('{"ops": [')
    step_cost_module._traced.cache_clear()
    assert step_cost("bert_tiny", 2, (16,)) == expected and len(calls) == 2
    blocked = cache.parent / "blocked"
    blocked.write_text("a file where the folder should be")
    monkeypatch.setenv("STASH_CACHE_DIR", str(blocked / "steps"))
    step_cost_module._traced.cache_clear()
    assert step_cost("bert_tiny", 2, (16,)) == expected and len(calls) == 3
    assert not list(cache.parent.glob("**/*.tmp"))


def test_a_model_outside_the_zoo_is_never_kept(cache, tmp_path):
    model_file = tmp_path / "tiny_model.py"
    model_file.write_text(
        "import torch\n"
        "def build_model(num_classes=10):\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, num_classes))\n"
    )
    cost = step_cost(f"{model_file}:build_model", 4, (3, 8, 8))
    assert cost.total_flops > 0
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_a_user_models_file_edited_in_a_process_that_lives_on_is_counted_afresh(cache, tmp_path):
    from stash_core.decide.fit.counts import model_counts

    model_file = tmp_path / "grows.py"
    layer = "torch.nn.Linear(3 * 8 * 8, {width}), torch.nn.Linear({width}, num_classes)"
    source = (
        "import torch\ndef make(num_classes=10):\n    return torch.nn.Sequential(torch.nn.Flatten(), {})\n"
    )
    model_file.write_text(source.format(layer.format(width=4)))
    ref = f"{model_file}:make"
    small_flops, small_bytes = step_cost(ref, 4, (3, 8, 8)).total_flops, model_counts(ref)["grad_bytes"]
    model_file.write_text(source.format(layer.format(width=400)))  # a new size: a new stamp
    assert step_cost(ref, 4, (3, 8, 8)).total_flops > 50 * small_flops  # the dashboard kept the old count
    assert model_counts(ref)["grad_bytes"] > 50 * small_bytes


def test_a_models_input_is_kept_beside_its_steps_and_a_bad_shape_is_refused_every_time(cache, monkeypatch):
    from stash_core.decide.predict.step_cost import ModelInput, model_input
    from stash_core.errors import UsageError

    described = []
    original = step_cost_module._described_input

    def describing(*args):
        described.append(args)
        return original(*args)

    monkeypatch.setattr(step_cost_module, "_described_input", describing)
    assert model_input("gpt2") == ModelInput("tokens", (1024,))  # a decoder's default is its context
    assert model_input(" GPT2 ", [64]) == ModelInput("tokens", (64,))
    assert model_input("resnet18") == ModelInput("image", (3, 224, 224))
    assert len(described) == 3 and len(list(cache.glob("*.json"))) == 3
    assert model_input("gpt2") == ModelInput("tokens", (1024,)) and len(described) == 3  # read back
    for _ in range(2):  # a refusal is never kept: it is said again, in the zoo's words
        with pytest.raises(UsageError, match="needs images of at least 32x32"):
            model_input("vgg11", (3, 8, 8))
    assert len(described) == 5 and len(list(cache.glob("*.json"))) == 3


@dataclass(frozen=True)
class _Count:
    n: int


def test_the_folder_keeps_the_counts_used_last_and_no_interrupted_write(cache, monkeypatch):
    """Every upgrade of torch or Stash starts a new set of counts: the folder grew without end."""
    monkeypatch.setattr(step_cache, "MAX_KEPT", 3)
    cache.mkdir()
    interrupted, recent = cache / "a.tmp", cache / "b.tmp"
    interrupted.write_text("{")
    recent.write_text("{")  # a write under way in another process
    os.utime(interrupted, (1, 1))

    def count_one(number: int) -> Path:
        step_cache.cached((f"model{number}", 1, None, "fused"), lambda: _Count(number), lambda d: _Count(**d))
        path = max(cache.glob("*.json"), key=os.path.getmtime)
        os.utime(path, (1000 + number, 1000 + number))  # file times that order without sleeping
        return path

    paths = [count_one(number) for number in range(3)]
    again = step_cache.cached(("model0", 1, None, "fused"), lambda: _Count(-1), lambda d: _Count(**d))
    assert again == _Count(0)  # read back, and so used last
    count_one(3)
    left = set(cache.glob("*.json"))
    assert len(left) == 3 and paths[0] in left and paths[1] not in left  # the least recently used went
    assert not interrupted.exists() and recent.exists()


def test_every_module_the_tracer_imports_is_in_the_digest():
    """An edit of any counting module starts afresh: rnn.py and rnn_costs.py were missing when they came."""
    import re

    folder = Path(step_cache.__file__).resolve().parent
    seen, todo = set(), ["step_cost.py", "step_trace.py"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        text = (folder / name).read_text(encoding="utf-8")
        modules = re.findall(r"from stash_core\.decide\.predict\.(\w+) import", text)
        todo += [f"{module}.py" for module in modules]
    imported = seen - {"step_cache.py"}
    assert imported <= set(step_cache._COUNTING_CODE), imported - set(step_cache._COUNTING_CODE)
