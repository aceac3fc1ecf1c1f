"""A local launch past its time limit is stopped with where each rank was, when a hang watch looks after it
(its ranks dump their stacks on request): a rank that hangs before the timed loop, which the watch does not
time, is named there, not only said to have run out of time."""

from __future__ import annotations

import sys

import pytest

from stash_core import PACKAGE_PARENT
from stash_core.errors import MeasurementError
from stash_core.launch.hang_watch import HangWatch
from stash_core.launch.local import run_local

# A launcher (torchrun's place) whose one worker registers for its stacks and hangs before any progress line.
WORKER = f"""
import sys, time
sys.path.insert(0, {str(PACKAGE_PARENT)!r})
from stash_core.measure.stacks import dump_on_signal


def warm_up_forever():
    time.sleep(60)


dump_on_signal(0)
print("ready", flush=True)
warm_up_forever()
"""
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', sys.argv[1]]))"


def launch(watch: HangWatch | None, timeout_s: float) -> tuple[MeasurementError, list[str]]:
    lines: list[str] = []
    with pytest.raises(MeasurementError) as raised:
        run_local([sys.executable, "-c", LAUNCHER, WORKER], lines.append, timeout_s=timeout_s, watch=watch)
    return raised.value, lines


def test_a_hang_before_the_timed_loop_is_stopped_at_the_limit_with_where_the_rank_was():
    error, lines = launch(HangWatch(60.0), timeout_s=8)  # time to start, on a starved machine too
    assert "ready" in lines  # it had registered before the limit
    assert str(error).startswith("run did not finish within 8 s; stopped it; rank 0 was in warm_up_forever (")
    assert error.stderr_tail[0] == "rank 0:"
    assert any("warm_up_forever" in line for line in error.stderr_tail)


def test_without_a_hang_watch_the_limit_is_said_alone_and_no_rank_is_signalled():
    error, _ = launch(None, timeout_s=2)
    assert str(error) == "run did not finish within 2 s; stopped it"
    assert getattr(error, "stderr_tail", None) is None
