"""Ending a process and everything it started (psutil): the one tree-killer of Stash.

torchrun starts each worker in a session of its own and data-loader workers are children of the workers,
so neither signalling one process group nor one process is enough. A tree is the root and every process
descending from it, found by parent links before the first signal (a child whose parent has died is
re-parented and would be lost afterwards).
"""

from __future__ import annotations

import os
import signal
import subprocess

import psutil

DEFAULT_GRACE_S = 5.0
KILL_WAIT_S = 2.0


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
    """Signal every process group of the tree, never our own (the caller must survive)."""
    groups = set()
    for process in members:
        try:
            groups.add(os.getpgid(process.pid))
        except OSError:
            pass
    for group in groups - {os.getpgrp()}:
        if group > 1:
            try:
                os.killpg(group, sig)
            except OSError:
                pass
