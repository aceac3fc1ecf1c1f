"""The remote supervisor and sweeper, run here as a node runs them: the source text with `python -c`."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from stash_core.launch import multinode, remote_preflight, supervisor, torchrun

SOURCE = Path(supervisor.__file__).read_text()
# A child that writes its pid, then starts a grandchild in a session of its own (as torchrun does with its
# workers) that ignores SIGTERM and writes its pid too; both then sleep.
FAMILY = r"""
import os, signal, subprocess, sys, time
if sys.argv[1] == "grandchild":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(120)
open(sys.argv[2], "w").write(str(os.getpid()))
subprocess.Popen([sys.executable, "-c", sys.argv[4], "grandchild", sys.argv[3]], start_new_session=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for_pid(path: Path, timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def _run_held(argv: list[str]) -> tuple[int, str]:
    """Run argv to its end with stdin held open (as ssh holds it), then close it; (status, stdout)."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        code = process.wait(timeout=30)
        return code, process.stdout.read()
    finally:
        process.stdin.close()
        process.kill()
        process.wait()


def _tag() -> str:
    return f"unit-{uuid.uuid4().hex[:10]}"


def _start_family(tmp_path: Path, tag: str, *args: str) -> tuple[subprocess.Popen, int, int]:
    """The supervisor running FAMILY under tag; its handle and the child's and grandchild's pids."""
    child_file, grandchild_file = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    family = [sys.executable, "-c", FAMILY, "child", str(child_file), str(grandchild_file), FAMILY]
    process = subprocess.Popen(
        [sys.executable, "-c", SOURCE, "run", tag, str(tmp_path), "--", *family], stdin=subprocess.PIPE
    )
    return process, _wait_for_pid(child_file), _wait_for_pid(grandchild_file)


@pytest.fixture
def cleanup():
    """Processes a test started: killed (with their tagged descendants) whatever the test did."""
    started: list[tuple[subprocess.Popen, str]] = []
    yield started
    for process, tag in started:
        process.kill()
        process.wait()
        supervisor.sweep(tag)


def test_stdin_eof_ends_every_tagged_process_even_in_another_session(tmp_path, cleanup):
    tag = _tag()
    process, child, grandchild = _start_family(tmp_path, tag)
    cleanup.append((process, tag))
    assert sorted(supervisor.tagged_pids(tag)) == sorted([child, grandchild])

    process.stdin.close()  # what the node sees when the launcher or its ssh goes away

    assert process.wait(timeout=30) == supervisor.EXIT_STOPPED
    assert not _alive(child) and not _alive(grandchild)
    assert supervisor.tagged_pids(tag) == []


def test_sigterm_ends_every_tagged_process(tmp_path, cleanup):
    tag = _tag()
    process, child, grandchild = _start_family(tmp_path, tag)
    cleanup.append((process, tag))

    process.send_signal(signal.SIGTERM)

    assert process.wait(timeout=30) == supervisor.EXIT_STOPPED
    assert not _alive(child) and not _alive(grandchild)


def test_sweep_ends_the_tag_and_nothing_else(tmp_path, cleanup):
    tag, other_tag = _tag(), _tag()
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    tagged = subprocess.Popen(sleep, env={**os.environ, supervisor.LAUNCH_TAG_VAR: tag})
    other = subprocess.Popen(sleep, env={**os.environ, supervisor.LAUNCH_TAG_VAR: other_tag})
    cleanup += [(tagged, tag), (other, other_tag)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not supervisor.tagged_pids(tag):
        time.sleep(0.05)

    swept = subprocess.run(
        [sys.executable, "-c", SOURCE, "sweep", tag], capture_output=True, text=True, timeout=30
    )

    assert swept.returncode == 0
    assert swept.stdout.strip() == "STASH_SWEEP ended=1 left=0"
    assert tagged.wait(timeout=5) == -signal.SIGTERM
    assert other.poll() is None and supervisor.tagged_pids(other_tag) == [other.pid]
    again = subprocess.run([sys.executable, "-c", SOURCE, "sweep", tag], capture_output=True, text=True)
    assert again.stdout.strip() == "STASH_SWEEP ended=0 left=0"


def test_exit_status_of_the_command_is_passed_on(tmp_path):
    run = [sys.executable, "-c", SOURCE, "run", _tag(), str(tmp_path), "--", sys.executable, "-c"]
    assert _run_held([*run, "raise SystemExit(7)"])[0] == 7
    killed, _ = _run_held([*run, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert killed == 128 + signal.SIGKILL


def test_workdir_and_command_problems_have_their_own_exit_status(tmp_path):
    run = [sys.executable, "-c", SOURCE, "run", _tag()]
    missing_dir = subprocess.run([*run, str(tmp_path / "nope"), "--", "true"], capture_output=True, text=True)
    assert missing_dir.returncode == supervisor.EXIT_WORKDIR == 125
    assert "STASH_SUPERVISOR cannot use workdir" in missing_dir.stderr
    no_command = subprocess.run(
        [*run, str(tmp_path), "--", str(tmp_path / "no-such-program")], capture_output=True, text=True
    )
    assert no_command.returncode == supervisor.EXIT_NOT_STARTED
    assert "cannot start" in no_command.stderr
    usage = subprocess.run([sys.executable, "-c", SOURCE, "run", "tag-only"], capture_output=True, text=True)
    assert usage.returncode == supervisor.EXIT_USAGE and "usage:" in usage.stderr


def test_the_command_runs_in_workdir_with_the_tag(tmp_path):
    tag = _tag()
    show = "import os; print(os.getcwd()); print(os.environ['STASH_LAUNCH_ID'])"
    code, stdout = _run_held(
        [sys.executable, "-c", SOURCE, "run", tag, str(tmp_path), "--", sys.executable, "-c", show]
    )
    assert code == 0
    assert stdout.split() == [str(tmp_path.resolve()), tag]


def test_the_launcher_sends_the_module_file_itself():
    assert multinode.SUPERVISOR_SRC == SOURCE
    argv = multinode._node_argv(0, 2, "t-n0", 1, "m", [], "10.0.0.1", 29500, {}, "python3", "/w", None, 30)
    assert argv[:3] == ["python3", "-c", SOURCE]


@pytest.mark.parametrize(
    ("module", "beyond_the_standard_library"),
    [(supervisor, set()), (remote_preflight, set()), (torchrun, {"torch"})],  # torchrun: a node's torch
)
def test_remote_helpers_need_only_the_standard_library(module, beyond_the_standard_library):
    """What runs on a node with `python -c` may import nothing a bare python lacks (torchrun: but torch)."""
    tree = ast.parse(Path(module.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative imports: the source runs outside its package"
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"} | beyond_the_standard_library
    assert "__file__" not in Path(module.__file__).read_text().split('"""', 2)[-1]
