"""Every launch has a private temporary folder, its children's $TMPDIR and torchrun's log folder, removed
when the launch ends: torchrun left a torchelastic_* folder in $TMPDIR per launch (thousands in /tmp).
On this machine (launch/local.py) and on every node (launch/multinode.py, in the node's own command)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support import REPO, ended_pid

from stash_core.launch import multinode
from stash_core.launch.local import run_local, torchrun_argv
from stash_core.launch.runner import worker_env

SAYS_TMPDIR = (
    "import os, tempfile; folder = os.environ['TMPDIR']; "
    "print(folder, tempfile.gettempdir(), os.path.isdir(folder))"
)


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch) -> Path:
    """$TMPDIR of this process (and of what it starts), an empty folder."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_a_local_launch_gets_a_private_temp_folder_removed_after_it(temp_root: Path) -> None:
    lines: list[str] = []
    assert run_local([sys.executable, "-c", SAYS_TMPDIR], lines.append, timeout_s=60) == []
    told, used, existed = lines[-1].split()
    assert told == used and Path(told).parent == temp_root and existed == "True"
    assert list(temp_root.iterdir()) == []


def test_a_failed_local_launch_removes_its_folder_too(temp_root: Path) -> None:
    assert run_local([sys.executable, "-c", "raise SystemExit(3)"], lambda line: None, timeout_s=60)
    assert list(temp_root.iterdir()) == []


@pytest.mark.launches
def test_torchrun_leaves_no_log_folder_behind(temp_root: Path, tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "says_hi.py").write_text("print('hi', flush=True)\n")
    env = {**worker_env(1), "PYTHONPATH": os.pathsep.join([str(modules), str(REPO)])}
    lines: list[str] = []
    assert run_local(torchrun_argv(1, "says_hi", []), lines.append, timeout_s=120, env=env) == [], lines
    assert "hi" in lines and list(temp_root.iterdir()) == []


def _on_a_node(argv: list[str], temp_root: Path) -> subprocess.Popen:
    """multinode's node command as the node's shell runs it."""
    env = {**os.environ, "TMPDIR": str(temp_root)}
    command = multinode.in_private_temp(argv)
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)


def test_a_nodes_command_runs_in_its_own_temp_folder_and_removes_it(temp_root: Path) -> None:
    node = _on_a_node([sys.executable, "-c", SAYS_TMPDIR + "; raise SystemExit(3)"], temp_root)
    out, _ = node.communicate(timeout=60)
    told, used, existed = out.split()
    assert node.returncode == 3  # the command's own status, for the launcher's reading of failures
    assert told == used and Path(told).parent == temp_root and existed == "True"
    assert list(temp_root.iterdir()) == []


def test_a_signalled_nodes_command_removes_its_folder(temp_root: Path) -> None:
    node = _on_a_node(
        [sys.executable, "-c", "print('up', flush=True); import time; time.sleep(60)"], temp_root
    )
    assert node.stdout.readline().strip() == "up" and len(list(temp_root.iterdir())) == 1
    os.killpg(node.pid, signal.SIGTERM)  # as a hang-up or the sweep reaches the node's processes
    assert node.wait(timeout=30) == 143
    deadline = time.monotonic() + 10
    while list(temp_root.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(temp_root.iterdir()) == []


SAYS_COMPILE_CACHE = "import os; print(os.environ['TORCHINDUCTOR_CACHE_DIR'])"


def test_a_local_launch_keeps_torch_compile_s_cache_where_it_was(temp_root: Path, monkeypatch) -> None:
    """The private $TMPDIR would have moved torch.compile's cache into the folder removed after each
    launch: a compiling job would compile anew in every launch."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    lines: list[str] = []
    assert run_local([sys.executable, "-c", SAYS_COMPILE_CACHE], lines.append, timeout_s=60) == []
    assert Path(lines[-1]).parent == temp_root and Path(lines[-1]).name.startswith("torchinductor_")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/srv/cache")  # the user's own stays theirs
    assert run_local([sys.executable, "-c", SAYS_COMPILE_CACHE], lines.append, timeout_s=60) == []
    assert lines[-1] == "/srv/cache"


def test_a_nodes_command_keeps_torch_compile_s_cache_where_it_was(temp_root: Path, monkeypatch) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    node = _on_a_node([sys.executable, "-c", SAYS_COMPILE_CACHE], temp_root)
    out, _ = node.communicate(timeout=60)
    assert Path(out.strip()).parent == temp_root and Path(out.strip()).name.startswith("torchinductor_")


def test_the_folder_of_a_launch_killed_hard_is_swept_by_the_next(temp_root: Path, monkeypatch) -> None:
    """kill -9 of a profile left /tmp/stash-launch-XXXX (torchrun's log folders), and nothing removed it."""
    from stash_core.launch import local

    killed = temp_root / f"stash-launch-{ended_pid()}-abc123"
    (killed / "attempt_0").mkdir(parents=True)
    running = temp_root / f"stash-launch-{os.getpid()}-def456"  # a launch of a profile still running
    running.mkdir()
    other = temp_root / "stash-launchpad"
    other.mkdir()
    monkeypatch.setattr(local, "_swept", [])
    assert run_local([sys.executable, "-c", "print(1)"], lambda line: None, timeout_s=60) == []
    assert not killed.exists() and running.exists() and other.exists()
    assert sorted(path.name for path in temp_root.iterdir()) == sorted([running.name, other.name])
