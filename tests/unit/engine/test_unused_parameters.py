"""A model that uses some parameters on some steps only (a branch taken every other step): DDP, which Stash
wraps the model in for several workers, fails on it unless told to find the unused parameters every step, as
the model's own training would be. `--find-unused-parameters` tells it; without it the failure says so (it
said to freeze the parameters or leave them out, which such a model cannot)."""

from __future__ import annotations

import pytest
from support import profile_two_workers

EVERY_OTHER_STEP = """
import torch


class EveryOtherStep(torch.nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.fc = torch.nn.Linear(12, num_classes)
        self.refine = torch.nn.Linear(num_classes, num_classes)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = self.fc(x.flatten(1))
        return self.refine(out) if self.calls % 2 == 0 else out


def make(num_classes=4):
    return EveryOtherStep(num_classes)
"""


@pytest.mark.launches
def test_a_parameter_used_on_some_steps_needs_the_flag_and_the_failure_says_so(tmp_path):
    failed = profile_two_workers(tmp_path, EVERY_OTHER_STEP, progress="none")
    assert failed.returncode != 0
    said = failed.stderr
    assert "give --find-unused-parameters" in said and "Traceback" not in said, said
    done = profile_two_workers(tmp_path, EVERY_OTHER_STEP, "--find-unused-parameters", progress="none")
    assert done.returncode == 0, done.stderr
