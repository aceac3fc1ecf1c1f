"""The ranks' Python stacks when the hang watch stops a launch (measure/stacks.py): each worker that was asked
dumps its own on SIGUSR1, even while blocked, into a file of its own; the launcher signals only its workers,
reads the dumps and says which rank was where."""

from __future__ import annotations

import os
import subprocess
import sys

from stash_core import PACKAGE_PARENT
from stash_core.measure.stacks import dump_on_signal, dump_stacks, stack_tail, where_ranks_were

# faulthandler's dump of two ranks: rank 0 at the end of its backward pass (DDP's all-reduce), rank 1 in the
# user's forward.
TORCH = "/venv/lib/python3.11/site-packages/torch"
STACKS = {
    0: [
        "Current thread 0x00007f0cf683bb80 (most recent call first):",
        f'  File "{TORCH}/autograd/graph.py", line 979 in _engine_run_backward',
        f'  File "{TORCH}/autograd/__init__.py", line 395 in backward',
        '  File "/src/stash_core/measure/timed_loop.py", line 69 in run_steps',
    ],
    1: [
        "Thread 0x00007f0cf0000000 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 331 in wait',
        "",
        "Current thread 0x00007f0cf683bb80 (most recent call first):",
        '  File "/tmp/m.py", line 16 in forward',
        f'  File "{TORCH}/nn/parallel/distributed.py", line 1715 in _run_ddp_forward',
        '  File "/src/stash_core/measure/timed_loop.py", line 66 in run_steps',
    ],
}


def test_the_rank_that_was_elsewhere_is_named_with_its_frame_and_the_waiting_ranks_said_as_such():
    assert where_ranks_were(STACKS) == (
        "rank 1 was in forward (/tmp/m.py, line 16); rank 0 was waiting in a collective"
    )
    both = where_ranks_were({0: STACKS[0], 2: STACKS[0]})
    assert both == "ranks 0, 2 were waiting in a collective"
    assert where_ranks_were({}) is None and where_ranks_were({0: ["nothing"]}) is None


def test_the_stderr_tail_holds_each_rank_s_loop_thread_under_its_name():
    tail = stack_tail(STACKS)
    assert tail[0] == "rank 0:" and tail[1].startswith("Current thread") and "rank 1:" in tail
    rank_1 = tail[tail.index("rank 1:") + 1 :]
    assert rank_1[0].startswith("Current thread") and "threading.py" not in "\n".join(rank_1)


STUCK = """
import sys
import time

sys.path.insert(0, sys.argv[1])
from stash_core.measure.stacks import dump_on_signal

dump_on_signal(1)


def stuck_here():
    print("ready", flush=True)
    time.sleep(60)


stuck_here()
"""


def _dumped(tmp_path, name: str, source: str):
    """Run `source` as a rank that dumps on the signal, once it says "ready"; its script and its stacks."""
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    process = subprocess.Popen(
        [sys.executable, str(script), PACKAGE_PARENT], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    try:
        assert process.stdout.readline().strip() == "ready"
        return script, dump_stacks(str(tmp_path), {process.pid})
    finally:
        process.kill()
        process.wait()


def test_a_worker_dumps_its_stacks_into_its_own_file_and_only_the_launch_s_workers_are_signalled(tmp_path):
    (tmp_path / f"stash-stacks-rank3-pid{os.getpid()}.txt").write_text("")  # not one of the launch's
    script, stacks = _dumped(tmp_path, "stuck", STUCK)
    assert list(stacks) == [1]
    # line 12 when the signal comes while "ready" is still being written (a loaded machine), else 13
    where = where_ranks_were(stacks)
    assert where in (f"rank 1 was in stuck_here ({script}, line {line})" for line in (12, 13)), stacks


def test_a_stack_file_that_cannot_be_made_leaves_the_worker_running(tmp_path, monkeypatch):
    """It was a traceback before the worker's own error handling, and the run failed for a diagnostic."""
    (tmp_path / f"stash-stacks-rank0-pid{os.getpid()}.txt").mkdir()  # the name taken by a folder
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    dump_on_signal(0)  # no error: the rank runs on without a stack to give


DEEP = """
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
from stash_core.measure.stacks import dump_on_signal

dump_on_signal(1)


def sleeper():
    time.sleep(60)


def deep(depth):
    if depth:
        return deep(depth - 1)
    print("ready", flush=True)
    time.sleep(60)


threading.Thread(target=sleeper, daemon=True).start()
deep(150)
"""


def test_the_main_threads_stack_is_said_when_a_deep_one_lost_stashs_frames(tmp_path):
    # faulthandler cuts a stack past 100 frames, the outermost first: the loop's thread was not found by
    # Stash's frames, and the first thread listed (a helper's, the newest) was said instead
    script, stacks = _dumped(tmp_path, "deep", DEEP)
    where = where_ranks_were(stacks)
    assert where in (f"rank 1 was in deep ({script}, line {line})" for line in (19, 20)), stacks


LATE = """
import signal
import sys
import time

sys.path.insert(0, sys.argv[1])
from stash_core.measure.stacks import dump_on_signal

dump_on_signal(2)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
time.sleep(1.0)  # a starved rank: the signal is taken a second late
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
time.sleep(60)
"""


def test_a_rank_that_dumps_late_is_waited_for(tmp_path):
    # the file holds its main thread's line from the start: taken for a dump written, it ended the wait
    script, stacks = _dumped(tmp_path, "late", LATE)
    # taken as the mask lifts: its frame is the unmasking call, under the script's line 13
    assert (where_ranks_were(stacks) or "").startswith("rank 2 was in pthread_sigmask"), stacks
    assert any(f'"{script}", line 13' in line for line in stacks[2]), stacks
