"""A local launch ends everything it started: a command's leftover children and double-forked daemons when
it exits (without waiting on the output pipe they hold), and the whole run when `stash` itself is killed
with SIGKILL. Real processes: what they leave behind is the point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
from support import REPO, processes_carrying

from stash_core.launch.local import run_local

LEFT_S = 10.0  # no process may be left this long after the command ends


def _spawner(token: str, then: str) -> list[str]:
    """A command that starts 3 sleeping children and a double-forked daemon (all holding its stdout, all
    carrying `token` in their command line), then runs `then`."""
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(300)', {token!r}]"
    code = (
        "import os, subprocess, sys, time\n"
        f"for _ in range(3): subprocess.Popen({sleeper})\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, {sleeper})\n"
        "    os._exit(0)\n"
        "print('started', flush=True)\n" + then
    )
    return [sys.executable, "-c", code]


def _wait_until_none(token: str) -> list[psutil.Process]:
    deadline = time.monotonic() + LEFT_S
    while processes_carrying(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_carrying(token)


def test_leftover_children_and_a_daemon_end_with_the_command(tmp_path):
    token = f"stash-left-{uuid.uuid4().hex[:8]}"
    lines: list[str] = []
    started = time.monotonic()
    failure = run_local(_spawner(token, "sys.exit(0)"), lines.append, timeout_s=120)
    print(f"run_local with leftovers returned after {time.monotonic() - started:.1f} s")
    assert failure == [] and "started" in lines
    assert _wait_until_none(token) == []


def test_a_sigkill_of_the_launching_process_ends_the_whole_run(tmp_path):
    token = f"stash-kill-{uuid.uuid4().hex[:8]}"
    launcher = (
        "import sys\nfrom stash_core.launch.local import run_local\n"
        f"run_local({_spawner(token, 'time.sleep(300)')!r}, print, timeout_s=600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", launcher], env={**os.environ, "PYTHONPATH": str(REPO)},
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 30
        while len(processes_carrying(token)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(processes_carrying(token)) >= 4  # 3 children and the daemon
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_until_none(token) == []
    finally:
        parent.kill()
        for process in processes_carrying(token):
            process.kill()
