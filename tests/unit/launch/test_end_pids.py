"""proc.end_pids, the cluster's way to end every process of a namespace: a list of pids, not a tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from stash_core.proc import end_pids

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
    "time.sleep(120)"
)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_term_then_kill_and_our_children_are_reaped():
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    stubborn = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout.readline().strip() == "ready"
        started = time.monotonic()
        assert end_pids([polite.pid, stubborn.pid, polite.pid], grace_s=0.5) == []
        assert time.monotonic() - started < 5
        assert _gone(polite.pid) and _gone(stubborn.pid)
        # reaped by end_pids: not even a zombie is left behind
        assert not psutil.pid_exists(polite.pid) and not psutil.pid_exists(stubborn.pid)
    finally:
        for process in (polite, stubborn):
            process.kill()
            process.wait()
    assert polite.returncode is not None and stubborn.returncode is not None


def test_never_ends_the_caller_and_ignores_pids_that_are_gone():
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert end_pids([os.getpid(), done.pid], grace_s=0.1) == []
    assert psutil.Process(os.getpid()).is_running()


def test_a_process_that_outlives_sigkill_is_returned(monkeypatch):
    """A process in uninterruptible sleep survives SIGKILL for a while: end_pids says so."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        monkeypatch.setattr(psutil.Process, "send_signal", lambda self, sig: None)  # signals get lost
        assert end_pids([sleeper.pid], grace_s=0.1) == [sleeper.pid]
    finally:
        monkeypatch.undo()
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()
