"""A launch that fails on one rank of two says which rank and why, once, in one line: a rank killed by a
signal (as the out-of-memory killer does) is named as the cause, not the lost connection its peer then
reports; a user model that raises on one rank is named with its own error, not as Stash's UsageError about
the input shape."""

from __future__ import annotations

import pytest
from support import profile_two_workers

KILLED_ON_RANK_ONE = '''
import os
import signal

import torch
import torch.distributed as dist


class KilledOnRankOne(torch.nn.Module):
    """Rank 1 is killed in its third forward (inside the loop), as the out-of-memory killer would."""

    def __init__(self, num_classes=4):
        super().__init__()
        self.fc = torch.nn.Linear(12, num_classes)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if dist.is_initialized() and dist.get_rank() == 1 and self.calls == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.fc(x.flatten(1))


def make(num_classes=4):
    return KilledOnRankOne(num_classes)
'''

RAISES_ON_RANK_ONE = """
import os

import torch


class RaisesOnRankOne(torch.nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.fc = torch.nn.Linear(12, num_classes)

    def forward(self, x):
        if int(os.environ.get("RANK", "0")) == 1:
            raise ValueError("boom on rank one")
        return self.fc(x.flatten(1))


def make(num_classes=4):
    return RaisesOnRankOne(num_classes)
"""


@pytest.mark.launches
def test_a_rank_killed_by_a_signal_is_the_cause_not_its_peers_lost_connection(tmp_path):
    done = profile_two_workers(tmp_path, KILLED_ON_RANK_ONE)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "failed: rank 1 (pid " in last and "was killed by SIGKILL (the out-of-memory killer" in last, last
    assert "first worker error" not in done.stderr and "Connection" not in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.launches
def test_a_model_that_raises_on_one_rank_is_said_once_with_its_rank_and_error(tmp_path):
    done = profile_two_workers(tmp_path, RAISES_ON_RANK_ONE)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    said = f"): model {tmp_path / 'm.py'}:make raised ValueError: boom on rank one"
    assert "failed: rank 1 (" in last and last.endswith(said), last  # "rank 1 (HOST): ..."
    assert "UsageError" not in done.stderr and "input shape" not in done.stderr, done.stderr
    assert done.stderr.count("boom on rank one") == 1, done.stderr  # not on the progress line too
