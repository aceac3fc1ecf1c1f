"""A rank that hangs in the timed loop ends its launch soon after the loop's limit, said as a hung rank, not
after the start-up allowance (180 s past a 4 s limit before the hang watch)."""

from __future__ import annotations

import json

import pytest
from support import stash_main

from stash_core.engine.phase import STARTUP_ALLOWANCE_S
from stash_core.launch.hang_watch import grace_s

HANGS = '''
import time

import torch
import torch.distributed as dist


class HangsOnRankOne(torch.nn.Module):
    """Trains normally, but rank 1 sleeps for an hour in its 12th forward (in the timed loop, whether R0
    and R1 are timed apart or together): a hung rank. Timed apart, the loop checks its clock after its first 10
    steps, so the limit leaves a starved machine (CI's idle tier: 0.6 s a step) time to reach the 12th."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.fc = torch.nn.Linear(3 * 8 * 8, num_classes)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if dist.is_initialized() and dist.get_rank() == 1 and self.calls == 12:
            time.sleep(3600)
        return self.fc(x.flatten(1))


def make(num_classes=10):
    return HangsOnRankOne(num_classes)
'''


@pytest.mark.launches
@pytest.mark.quiet  # its 10 steps must beat the loop's wall-clock limit: CI's idle tier starved them past it
def test_a_hung_rank_ends_its_launch_soon_after_the_loop_s_limit(tmp_path):
    model = tmp_path / "hangs.py"
    model.write_text(HANGS)
    done = stash_main(
        "profile", "--model", f"{model}:make", "--batch-size", "4", "--input-shape", "3,8,8",
        "--workers", "2", "--stalls", "compute,interconnect", "--max-phase-seconds", "10", "--launches", "1",
        "--no-probes", "--db", str(tmp_path / "runs.duckdb"), "--out", str(tmp_path / "result.json"),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert "a rank is hung" in done.stderr and "Traceback" not in done.stderr, done.stderr
    doc = json.loads((tmp_path / "result.json").read_text())
    hung = {phase["name"]: phase for phase in doc["phases"]}["R1"]
    assert hung["status"] == "failed" and "a rank is hung" in hung["error"]
    # Start-up and the hang watch's budget, well inside the allowance a hung launch used to wait out.
    assert hung["wall_s"] < STARTUP_ALLOWANCE_S, hung["wall_s"]
    assert 10 + grace_s(10) < hung["wall_s"]
    # Which rank was where, from their stacks, dumped before the launch was stopped and kept in the record:
    # rank 1 in the model's forward, rank 0 waiting for it (it was rank 0's collective timing out that said
    # so, with no stack, when the loop's limit was long).
    where = f"rank 1 was in forward ({model}, line 21); rank 0 was waiting in a collective"
    assert where in hung["error"], hung["error"]
    tail = "\n".join(hung["stderr_tail"])
    assert "rank 0:" in tail and f'File "{model}", line 21 in forward' in tail, tail
