"""A rank that hangs inside the timed loop ends its launch soon after the loop's cap, not after the start-up
allowance: the launcher times the loop from the worker's first progress line (engine/phase.py)."""

from __future__ import annotations

import time

import pytest
from support import stash_main

HANGING_MODEL = '''
import os, time
from torch import nn


class HangsOnRankOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if os.environ.get("RANK") == "1" and self.calls > 6:
            time.sleep(3600)  # a rank that stops answering, its peer left waiting in the all-reduce
        return self.net(x)


def make(num_classes=4):
    return HangsOnRankOne()
'''


@pytest.mark.launches
def test_a_hung_rank_ends_its_launch_within_the_loop_cap_and_its_grace(tmp_path) -> None:
    model = tmp_path / "hangs.py"
    model.write_text(HANGING_MODEL)
    started = time.monotonic()
    result = stash_main(
        "profile", "--model", f"{model}:make", "--input-shape", "3,8,8", "--batch-size", "2", "--workers", "2",
        "--stalls", "interconnect", "--launches", "1", "--max-phase-seconds", "4", "--no-probes",
        "--no-store", "--out", str(tmp_path / "run.json"), "--progress", "none",
    )  # fmt: skip
    elapsed_s = time.monotonic() - started
    assert result.returncode != 0
    assert "the timed loop ran more than 34 s past its 4 s cap (a rank stopped answering)" in result.stderr
    # R0 (one worker) and R1's start-up, then 4 s of loop and 34 s of grace: far from the 184 s allowance
    assert elapsed_s < 100, elapsed_s
