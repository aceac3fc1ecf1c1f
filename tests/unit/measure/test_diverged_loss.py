"""A job whose loss is NaN or infinite is timed as if it trained: the run says so. The loss is read once at a
run's end, never each step."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from support import stash_main

from stash_core.measure.device_clock import HostClock
from stash_core.measure.timed_loop import StepTimes, losses_finite, run_steps


def steps_of(scale: float, count: int = 3) -> StepTimes:
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = iter([(torch.randn(2, 4) * scale, torch.tensor([0, 1]))] * count)
    times = StepTimes()
    run_steps(
        model, optimizer, torch.nn.CrossEntropyLoss(), batches, torch.device("cpu"), count, times, HostClock()
    )
    return times


def test_the_last_loss_of_a_run_says_whether_it_was_finite() -> None:
    cpu = torch.device("cpu")
    assert losses_finite([steps_of(1.0)], cpu) is True
    assert losses_finite([steps_of(math.nan)], cpu) is False
    assert losses_finite([steps_of(1.0), steps_of(math.inf)], cpu) is False  # R1's and R0's of a pair
    assert losses_finite([StepTimes()], cpu) is None  # no step: nothing to say


NAN_MODEL = """
import torch

class Broken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(12, 10)

    def forward(self, x):
        return self.fc(x.flatten(1)) * float("nan")

def make():
    return Broken()
"""


@pytest.mark.launches
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2], ids=["one-worker", "paired"])
def test_a_profile_of_a_model_whose_loss_is_nan_warns(tmp_path: Path, workers: int) -> None:
    (tmp_path / "broken.py").write_text(NAN_MODEL)
    out = tmp_path / "result.json"
    stalls = "compute" if workers == 1 else "compute,interconnect"  # two workers: R0 and R1 in one launch
    done = stash_main("profile", "--model", f"{tmp_path / 'broken.py'}:make", "--batch-size", "4",
                      "--input-shape", "3,2,2", "--workers", str(workers), "--stalls", stalls,
                      "--iterations", "12", "--progress", "none", "--no-store", "--device", "cpu",
                      "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    warnings = json.loads(out.read_text())["breakdown"]["warnings"]
    assert any("the loss was not finite (NaN or inf)" in warning for warning in warnings), warnings
