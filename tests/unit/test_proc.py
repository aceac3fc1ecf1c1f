"""stash_core/proc.py, the one way to end processes: end_tree (a process tree whose members left its session
and group ends completely) and end_pids (the cluster's way to end every process of a namespace: a list of
pids, not a tree)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from stash_core.proc import descendants, end_pids, end_tree, pid_alive

# A parent that starts a child in a session of its own (as torchrun does with its workers), which starts
# a grandchild that ignores SIGTERM; each prints its pid.
TREE = r"""
import os, signal, subprocess, sys, time
if sys.argv[1] == "grandchild":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(os.getpid(), flush=True)
    time.sleep(600)
elif sys.argv[1] == "child":
    subprocess.Popen([sys.executable, "-c", sys.argv[2], "grandchild", sys.argv[2]])
    time.sleep(600)
else:
    subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", sys.argv[2]], start_new_session=True)
    time.sleep(600)
"""


def _start_tree() -> tuple[subprocess.Popen, list[int]]:
    root = subprocess.Popen([sys.executable, "-c", TREE, "root", TREE], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(descendants(root.pid)) < 2:
        time.sleep(0.05)
    return root, [process.pid for process in descendants(root.pid)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_end_tree_ends_children_in_other_sessions_and_those_that_ignore_sigterm():
    root, below = _start_tree()
    try:
        assert len(below) == 2 and all(_alive(pid) for pid in below)
        end_tree(root.pid, grace_s=0.5, popen=root)
        assert root.poll() is not None  # reaped, no zombie
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(pid) for pid in below):
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in below)
    finally:
        for pid in [root.pid, *below]:
            if _alive(pid):
                psutil.Process(pid).kill()


def test_end_tree_of_a_finished_process_does_nothing():
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    end_tree(done.pid, grace_s=0.1, popen=done)
    assert done.returncode == 0


# ---------------------------------------------------------------------------------------------------------
# end_pids

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


def test_pid_alive_says_running_not_a_zombie_nor_a_reaped_process():
    assert pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.02)
    assert not pid_alive(child.pid)  # exited, not reaped yet: a zombie
    child.wait()
    assert not pid_alive(child.pid)  # reaped


def test_a_tree_in_a_group_it_did_not_make_leaves_the_group_s_leader_alone():
    """A profile started by a shell script is in the script's process group: ending the profile signalled the
    whole group, and the script died with it (`stash profile ... ; echo after` never echoed)."""
    script = subprocess.Popen(
        ["bash", "-c", "sleep 60 & echo $!; wait; exit 7"], stdout=subprocess.PIPE, text=True,
        start_new_session=True,  # bash leads its own group, and its sleep is in it
    )  # fmt: skip
    sleeper = int(script.stdout.readline())
    assert os.getpgid(sleeper) == script.pid
    end_tree(sleeper, grace_s=5)
    assert script.wait(timeout=10) == 7  # it went on after its child ended, as a script does
    assert not pid_alive(sleeper)
