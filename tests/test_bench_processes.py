"""A bench that runs `stash` commands ends each one's whole tree when it runs past its time: a worker left
behind would hold its GPU through the parts that follow."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

from support import REPO

from stash_core.proc import pid_alive

sys.path.insert(0, str(REPO / "bench"))


def test_a_command_past_its_time_fails_124_and_leaves_no_process_of_its_tree(tmp_path):
    from gpu_multi import run_tree

    pid_file = tmp_path / "grandchild.pid"
    # a parent that starts a child in a session of its own (as torchrun does its workers), then waits
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        child = subprocess.Popen(sleeper, start_new_session=True)
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """)
    started = time.monotonic()
    result = run_tree([sys.executable, "-c", script], timeout_s=2, env=dict(os.environ))
    assert result.returncode == 124 and "timed out" in result.stderr
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = pid_alive(grandchild)
    if left:  # stopped by its own pid, so that a failure leaves nothing running
        os.kill(grandchild, signal.SIGKILL)
    assert not left
    assert time.monotonic() - started < 30


def test_a_command_within_its_time_gives_its_status_and_output():
    from gpu_multi import run_tree

    result = run_tree([sys.executable, "-c", "print('out'); raise SystemExit(3)"], 30, dict(os.environ))
    assert (result.returncode, result.stdout.strip()) == (3, "out")
