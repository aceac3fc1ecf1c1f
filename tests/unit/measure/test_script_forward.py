"""The forward/backward split of a user's script: the outermost module call of each step is the forward pass,
module calls inside a loader are not, the global module hooks give way to hooks on the model alone after the
first iteration, and every hook is gone afterwards."""

from __future__ import annotations

import time
from statistics import median

import pytest
import torch
from torch.nn.modules import module as module_hooks
from torch.utils.data import DataLoader, Dataset

from stash_core.measure.script_hooks import StepClock, install


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Spin(torch.nn.Module):
    """A layer whose forward costs `cost_s` of busy CPU."""

    def __init__(self, cost_s: float) -> None:
        super().__init__()
        self.cost_s = cost_s
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        spin(self.cost_s)
        return self.linear(x)


class Samples(Dataset):
    """Samples made by a module (as a transform that is an nn.Module), `cost_s` each."""

    def __init__(self, count: int, cost_s: float) -> None:
        self.count, self.transform = count, Spin(cost_s)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int):
        with torch.no_grad():
            return self.transform(torch.ones(4)), torch.tensor(index % 2)


def train(model, loader, epochs: int = 1, fail_at: int | None = None) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        for step, (x, y) in enumerate(loader):
            if step == fail_at:
                try:
                    model(None)  # the script catches a failing forward and goes on
                except (TypeError, AttributeError):
                    pass
            loss = torch.nn.functional.cross_entropy(model(x)[:, :2], y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


def timed(model, loader, **kwargs) -> StepClock:
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        train(model, loader, **kwargs)
    finally:
        remove()
    clock.settle()
    return clock


def test_the_forward_is_the_outermost_call_and_loader_modules_are_not_forward() -> None:
    layer_s, sample_s = 0.001, 0.005
    model = torch.nn.Sequential(Spin(layer_s), Spin(layer_s))  # nested modules: one outermost call
    clock = timed(model, DataLoader(Samples(32, sample_s), batch_size=4), fail_at=3)
    parts = clock.parts
    assert clock.forward_seen and len(clock.iteration_s) == 7
    assert min(parts["forward_s"]) >= 2 * layer_s and min(parts["data_s"]) >= 4 * sample_s
    # Counting the loader's module calls (20 ms a batch) as forward would make it 22 ms or more; a median and
    # a wide margin, since other processes on the machine slow some iterations down.
    assert median(parts["forward_s"]) < 2 * layer_s + 2 * sample_s, parts["forward_s"]
    for index, total_s in enumerate(clock.iteration_s):
        named_s = sum(parts[part][index] for part in ("data_s", "forward_s", "optimizer_s"))
        assert parts["backward_s"][index] >= 0 and named_s <= total_s
        assert abs(named_s + parts["backward_s"][index] - total_s) < 1e-9
    steps = zip(parts["optimizer_s"], clock.iteration_s, strict=True)
    assert all(0 < optimizer_s < total_s for optimizer_s, total_s in steps)


def test_the_global_hooks_give_way_to_hooks_on_the_model_and_all_are_removed() -> None:
    global_pre = len(module_hooks._global_forward_pre_hooks)
    global_post = len(module_hooks._global_forward_hooks)
    model = Spin(0.0)
    loss_module = torch.nn.MSELoss()
    clock = StepClock()
    remove = install(clock, replay=False)
    seen: list[tuple[int, int]] = []
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            loss_module(model(torch.ones(2, 4)), torch.zeros(2, 4)).backward()
            optimizer.step()
            seen.append((len(module_hooks._global_forward_pre_hooks), len(model._forward_pre_hooks)))
    finally:
        remove()
    assert seen[0] == (global_pre + 1, 0)  # the first step: the global hooks look for the outermost modules
    assert seen[-1] == (global_pre, 1)  # then only the model (and the loss module) carry a hook
    assert len(loss_module._forward_pre_hooks) == 0 and not model._forward_pre_hooks
    assert not model._forward_hooks and not model.linear._forward_pre_hooks
    assert len(module_hooks._global_forward_pre_hooks) == global_pre
    assert len(module_hooks._global_forward_hooks) == global_post


def test_a_script_that_calls_no_module_has_no_forward() -> None:
    weight = torch.zeros(4, requires_grad=True)
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        optimizer = torch.optim.SGD([weight], lr=0.1)
        for _ in range(5):
            (weight * torch.ones(4)).sum().backward()
            optimizer.step()
    finally:
        remove()
    clock.settle()
    assert not clock.forward_seen and len(clock.iteration_s) == 4
    assert clock.parts["forward_s"] == [0.0] * 4


def _user_hook(module, args: tuple[torch.Tensor], output: torch.Tensor) -> None:
    """A hook of the script's own, kept in what it saves (typed: TorchScript compiles it with the module)."""


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_what_the_script_saves_or_exports_of_its_model_holds_none_of_stashs_hooks(tmp_path) -> None:
    """torch.save(model) failed on the timer's clock ("cannot pickle 'weakref.ReferenceType' object") and
    torch.jit.script(model) on its hooks ("Hook 'after' ... expected to only have exactly 3 inputs"): a script
    that checkpoints its whole model or exports it ran without Stash and failed with it."""
    import copy
    import pickle

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    model.register_forward_hook(_user_hook)
    original_state, original_script = torch.nn.Module.__getstate__, torch.jit.script
    clock = StepClock()
    remove = install(clock, replay=False)
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(6):
            model(torch.ones(2, 4)).sum().backward()
            optimizer.step()
            if step >= 2:  # Stash's hooks are on the model now (narrowed after the first iteration)
                assert len(model._forward_hooks) == 2
                torch.save(model, tmp_path / "model.pt")
                assert b"stash_core" not in pickle.dumps(model)
                assert list(copy.deepcopy(model)._forward_hooks.values()) == [_user_hook]
                scripted = torch.jit.script(model)
                assert torch.equal(scripted(torch.ones(1, 4)), model(torch.ones(1, 4)))
    finally:
        remove()
    clock.settle()
    assert clock.forward_seen and all(seconds > 0 for seconds in clock.parts["forward_s"][-3:])
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    assert list(loaded._forward_hooks.values()) == [_user_hook] and not loaded._forward_pre_hooks
    assert list(model._forward_hooks.values()) == [_user_hook]  # Stash's own are gone, the script's kept
    assert torch.nn.Module.__getstate__ is original_state and torch.jit.script is original_script
