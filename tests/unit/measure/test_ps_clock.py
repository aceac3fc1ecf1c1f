"""The times the PS and its workers compare come from the monotonic clock where they share a machine: on the
wall clock a step by NTP during a spot-profile made an exchange last -0.98 s and the PS bandwidth 0."""

from __future__ import annotations

import time
import types

import torch
from torch import nn

from stash_core.launch.ps import ps_argv, ps_module_args
from stash_core.measure import ps_worker


class _OneWorker:
    """torch.distributed as the PS sees one worker that pushes twice, then stops."""

    def __init__(self, size: int) -> None:
        self.pushes = [torch.zeros(size + 1), torch.zeros(size + 1), torch.full((size + 1,), ps_worker.STOP)]

    def recv(self, tensor, src=None):
        tensor.copy_(self.pushes.pop(0))
        return 1

    def send(self, tensor, dst):
        pass


def test_the_ps_times_its_services_on_the_clock_it_is_given(monkeypatch):
    model = nn.Linear(2, 2)
    size = sum(p.numel() for p in model.parameters())
    monkeypatch.setattr(torch, "distributed", _OneWorker(size))  # what `import torch.distributed` binds
    ticks = iter(range(100))
    served = ps_worker.serve(model, workers=1, lr=0.1, clock=lambda: float(next(ticks)))
    assert served["updates"] == 2 and served["services"] == [[1, 0.0, 1.0, 2.0], [1, 3.0, 4.0, 5.0]]


def test_one_machine_uses_the_monotonic_clock_and_several_the_wall_clock():
    assert ps_worker._CLOCKS == {"monotonic": time.monotonic, "wall": time.time}
    local = ps_argv([1, 2], "m", 4, 2.0)
    assert local[local.index("--clock") + 1] == "monotonic"
    assert ps_worker._args(ps_module_args([1], "m", 4, 2.0)).clock == "monotonic"
    remote = ps_module_args([1], "m", 4, 2.0, clock="wall")
    assert ps_worker._args(remote).clock == "wall" and ps_worker._args(remote).counts == [1]


class _PullsOfOthers:
    """torch.distributed as a worker sees the PS: each pull brings the server's parameters after this push and
    one of another worker's, so its update count goes 2, 4, 6..."""

    def __init__(self, params: torch.Tensor) -> None:
        self.params, self.pulls = params, 0

    def send(self, tensor, dst):
        pass

    def recv(self, tensor, src=None):
        self.pulls += 1
        tensor[:-1] = self.params
        tensor[-1] = 2.0 * self.pulls


def test_a_workers_loss_is_paired_with_the_updates_in_the_parameters_it_was_taken_on(monkeypatch):
    """Each loss row carried the update count of the pull after it: a loss of untrained parameters stood at
    update 2 (n updates late with n workers), and the loss curves spot-profile writes were shifted by it."""
    from support import TINY_CNN

    from stash_core.zoo.build import build_model

    model, info = build_model(TINY_CNN, 10, (3, 32, 32))
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    monkeypatch.setattr(torch, "distributed", _PullsOfOthers(params))
    # A worker's duration on a clock that moves 0.1 s a look: three steps however loaded the machine (a real
    # 0.3 s made one step on a busy one)
    ticks = iter(step / 10 for step in range(100))
    clock = types.SimpleNamespace(monotonic=lambda: next(ticks), perf_counter=time.perf_counter)
    monkeypatch.setattr(ps_worker, "time", clock)
    trained = ps_worker.train(model, info, rank=1, batch=2, duration_s=0.35)
    counts = [record[4] for record in trained["records"]]
    assert counts == [0.0, 2.0, 4.0]
