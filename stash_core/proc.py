"""Processes: whether one runs (pid_alive), and ending one with everything it started: the one tree-killer.

torchrun starts each worker in a session of its own and data-loader workers are children of the workers,
so neither signalling one process group nor one process is enough. A tree is the root and every process
descending from it, found by parent links before the first signal (a child whose parent has died is
re-parented and would be lost afterwards).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil

DEFAULT_GRACE_S = 5.0
KILL_WAIT_S = 2.0


def pid_alive(pid: int) -> bool:
    """Whether pid is a running process (a zombie is not), another user's included."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:  # gone since the signal
        return False


def remove_folders_of_ended(parent: Path, prefix: str) -> None:
    """Remove this user's folders `<prefix><pid>-...` in `parent` whose process has ended: a process killed
    (SIGKILL, power loss) before it could remove its own temporary folder leaves it for the next to sweep."""
    for folder in parent.glob(f"{prefix}*-*"):
        pid = folder.name.removeprefix(prefix).split("-", 1)[0]
        try:
            if pid.isdigit() and folder.stat().st_uid == os.getuid() and not pid_alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass  # gone already, or another's


def end_with_parent() -> None:
    """Linux: this process (a child) is killed when the thread that started it ends, its parent killed
    included, before it could end the child (prctl PR_SET_PDEATHSIG); nothing elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below pid (any depth); [] when pid is gone."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def end_tree(root_pid: int, grace_s: float = DEFAULT_GRACE_S, popen: subprocess.Popen | None = None) -> None:
    """SIGTERM the root, the process groups of the tree and every member; SIGKILL what is still alive after
    grace_s. With popen (the root's handle), the root is also reaped, so it leaves no zombie."""
    try:
        root = [psutil.Process(root_pid)]
    except psutil.Error:
        root = []
    members = root + descendants(root_pid)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
        members = _alive(members + descendants(root_pid))
        if not members:
            break
        _signal_groups(members, sig)
        for process in members:
            try:
                process.send_signal(sig)
            except psutil.Error:
                pass
        if popen is not None:
            try:
                popen.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass
        _, alive = psutil.wait_procs(members, timeout=wait_s)
        members = alive
    if popen is not None and popen.poll() is None:
        popen.kill()
        popen.wait()


def end_pids(pids: list[int], grace_s: float = DEFAULT_GRACE_S) -> list[int]:
    """SIGTERM each of pids (never this process), SIGKILL those still alive after grace_s; return the pids
    still alive after that. A zombie counts as ended; those of pids that are our children are reaped.

    For a set of processes found otherwise than by descent (e.g. every process of a network namespace);
    a process tree goes to end_tree.
    """
    members = []
    for pid in dict.fromkeys(pids):
        if pid != os.getpid():
            try:
                members.append(psutil.Process(pid))
            except psutil.Error:
                pass
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
        members = _alive(members)
        if not members:
            break
        for process in members:
            try:
                process.send_signal(sig)
            except psutil.Error:
                pass
        members = _wait_ended(members, wait_s)
    return [process.pid for process in members]


def _wait_ended(processes: list[psutil.Process], wait_s: float) -> list[psutil.Process]:
    """Poll until none of processes is alive or wait_s passes; the ones still alive."""
    deadline = time.monotonic() + wait_s
    while True:
        for process in processes:  # collect the exit status of our own children: no zombie stays behind
            try:
                os.waitpid(process.pid, os.WNOHANG)
            except ChildProcessError:
                pass
        processes = _alive(processes)
        if not processes or time.monotonic() >= deadline:
            return processes
        time.sleep(0.05)


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    seen, alive = set(), []
    for process in processes:
        try:
            if process.pid in seen or not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        seen.add(process.pid)
        alive.append(process)
    return alive


def _signal_groups(members: list[psutil.Process], sig: int) -> None:
    """Signal every process group the tree made (its leader one of the tree, or gone), never our own nor one
    the tree only joined: a profile started from a script is in the script's group, and the script goes on."""
    groups = set()
    for process in members:
        try:
            groups.add(os.getpgid(process.pid))
        except OSError:
            pass
    ours = {process.pid for process in members}
    for group in groups - {os.getpgrp()}:
        if group > 1 and (group in ours or not psutil.pid_exists(group)):
            try:
                os.killpg(group, sig)
            except OSError:
                pass
