"""A model that uses some parameters on some steps only (a branch taken every other step): DDP, which Stash
wraps the model in for several workers, fails on it unless told to find the unused parameters every step, as
the model's own training would be. `--find-unused-parameters` tells it; without it the failure says so (it
said to freeze the parameters or leave them out, which such a model cannot)."""

from __future__ import annotations

import pytest
from support import stash_main

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


def _profile(tmp_path, *flags: str):
    model = tmp_path / "m.py"
    model.write_text(EVERY_OTHER_STEP)
    return stash_main(
        "profile", "--model", f"{model}:make", "--batch-size", "4", "--input-shape", "3,2,2",
        "--workers", "2", "--device", "cpu", "--stalls", "interconnect", "--iterations", "3",
        "--launches", "1", "--no-probes", "--progress", "none", "--db", str(tmp_path / "runs.duckdb"),
        *flags, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.launches
def test_a_parameter_used_on_some_steps_needs_the_flag_and_the_failure_says_so(tmp_path):
    failed = _profile(tmp_path)
    assert failed.returncode != 0
    said = failed.stderr
    assert "give --find-unused-parameters" in said and "Traceback" not in said, said
    done = _profile(tmp_path, "--find-unused-parameters")
    assert done.returncode == 0, done.stderr
