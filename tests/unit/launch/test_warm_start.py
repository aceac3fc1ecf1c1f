"""Launches forked by the warm starter: torchrun's output and exit status come back, and nothing a launch
started outlives it: not when it ends, not when it is stopped at its time limit, not when `stash` itself is
killed. Real torchrun, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import psutil
import pytest
from support import REPO, processes_carrying
from test_local_supervised import LEFT_S, _wait_until_none

from stash_core.errors import MeasurementError
from stash_core.launch import warm_start
from stash_core.launch.local import TORCHRUN_MODULE, run_local
from stash_core.launch.torchrun import FORK_OPTION


def _module(tmp_path, token: str, then: str) -> tuple[dict[str, str], list[str]]:
    """A worker module (forked by torchrun, as Stash's own are) that starts 2 sleeping children and a
    double-forked daemon, all carrying `token`, prints 'started', then runs `then`; (env, argv)."""
    name = f"warm_{uuid.uuid4().hex[:8]}"
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(300)', {token!r}]"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""\
        import os, subprocess, sys, time
        for _ in range(2):
            subprocess.Popen({sleeper})
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, {sleeper})
            os._exit(0)
        print('started', flush=True)
        {then}
        """))
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    argv = [sys.executable, "-m", TORCHRUN_MODULE, "--standalone", "--nnodes", "1", "--nproc-per-node", "1",
            "--max-restarts", "0", FORK_OPTION, name]  # fmt: skip
    return env, argv


def test_a_forked_launch_returns_its_output_and_leaves_nothing(tmp_path):
    token = f"stash-warm-{uuid.uuid4().hex[:8]}"
    env, argv = _module(tmp_path, token, "sys.exit(0)")
    with warm_start.warm_launches(env) as starter:
        lines: list[str] = []
        assert run_local(argv, lines.append, timeout_s=120, env=env) == []
        assert "started" in lines
        assert _wait_until_none(token) == []
        assert starter.reaped_cpu_s > 0 and not starter.broken  # it went through the server
        # the server serves the next launch too, and a failing one says so
        failing_env, failing = _module(tmp_path, token, "sys.exit(3)")
        assert failing_env == env
        assert run_local(failing, lines.append, timeout_s=120, env=env) != []
        assert _wait_until_none(token) == []
        assert not starter.broken


def test_a_forked_launch_has_its_own_temp_folder_as_one_started_anew(tmp_path, monkeypatch):
    """A launch forked by the server kept the server's $TMPDIR: its workers' loaders left /tmp/pymp-* socket
    folders when the launch was ended, where a launch started anew has them in its own folder, removed."""
    import tempfile

    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    env, argv = _module(tmp_path, f"stash-warm-{uuid.uuid4().hex[:8]}",
                        "import tempfile; print('tmp', tempfile.gettempdir(), flush=True); sys.exit(0)")
    with warm_start.warm_launches(env) as starter:
        lines: list[str] = []
        assert run_local(argv, lines.append, timeout_s=120, env=env) == []
        assert not starter.broken and starter.reaped_cpu_s > 0
    told = next(line.split()[1] for line in lines if line.startswith("tmp "))
    assert os.path.basename(told).startswith(f"stash-launch-{os.getpid()}-") and not os.path.exists(told)


def test_a_launch_past_its_time_is_stopped_with_everything_it_started(tmp_path):
    token = f"stash-warm-{uuid.uuid4().hex[:8]}"
    env, argv = _module(tmp_path, token, "time.sleep(300)")
    with warm_start.warm_launches(env) as starter:
        with pytest.raises(MeasurementError, match="did not finish"):
            run_local(argv, lambda line: None, timeout_s=8, env=env)
        assert _wait_until_none(token) == []
        assert not starter.broken
    assert warm_start.active() is None


def test_another_environment_starts_anew(tmp_path):
    with warm_start.warm_launches({"OMP_NUM_THREADS": "1"}) as starter:
        assert starter.serves({"OMP_NUM_THREADS": "1"}, None)
        assert not starter.serves({"OMP_NUM_THREADS": "2"}, None)
        assert not starter.serves({"OMP_NUM_THREADS": "1"}, lambda: None)  # a set-up to run before exec


def test_launches_in_a_launches_anew_block_start_anew_and_the_server_serves_after_it(tmp_path):
    with warm_start.warm_launches({"OMP_NUM_THREADS": "1"}) as starter:
        with warm_start.launches_anew():
            assert warm_start.active() is None  # run_local starts torchrun anew
        assert warm_start.active() is starter
    assert warm_start.active() is None


def test_a_sigkill_of_the_launching_process_ends_the_server_and_the_run(tmp_path):
    token = f"stash-warm-kill-{uuid.uuid4().hex[:8]}"
    env, argv = _module(tmp_path, token, "time.sleep(300)")
    launcher = (
        "from stash_core.launch import warm_start\nfrom stash_core.launch.local import run_local\n"
        f"with warm_start.warm_launches({env!r}):\n"
        f"    run_local({argv!r}, print, timeout_s=600, env={env!r})\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", launcher], env={**os.environ, "PYTHONPATH": str(REPO)},
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdout is not None
        deadline = time.monotonic() + 60
        while len(processes_carrying(token)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(processes_carrying(token)) >= 3  # 2 children and the daemon
        servers = _servers_of(parent.pid)
        assert servers, "the launch did not go through the warm starter"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_until_none(token) == []
        deadline = time.monotonic() + LEFT_S
        while any(_alive(server) for server in servers):
            assert time.monotonic() < deadline, "the server outlived the process that started it"
            time.sleep(0.2)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _servers_of(pid: int) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "stash_core.launch.warm_start" in child.cmdline():
                found.append(child)
        except psutil.Error:  # a zombie, or gone
            continue
    return found


def test_a_server_that_cannot_start_leaves_launches_to_start_anew(monkeypatch):
    def refuse(self, theirs):
        raise OSError("no such interpreter")

    monkeypatch.setattr(warm_start.WarmStarter, "_start_server", refuse)
    with warm_start.warm_launches({}) as starter:
        assert starter.broken and not starter.serves({}, None)
        got: list[str] = []
        assert run_local([sys.executable, "-c", "print('anew')"], got.append, timeout_s=60) == []
        assert got == ["anew"]


def test_a_stop_that_crosses_its_launchs_exit_does_not_start_anything(tmp_path):
    token = f"stash-warm-{uuid.uuid4().hex[:8]}"
    env, argv = _module(tmp_path, token, "sys.exit(0)")
    with warm_start.warm_launches(env) as starter:
        assert run_local(argv, lambda line: None, timeout_s=120, env=env) == []
        warm_start._send(starter._connection, {"stop": True})  # late: the launch has ended
        lines: list[str] = []
        assert run_local(argv, lines.append, timeout_s=120, env=env) == []  # the next launch is its own
        assert "started" in lines and not starter.broken
        assert _wait_until_none(token) == []


def test_a_request_too_large_for_the_socket_starts_that_launch_anew_only():
    with warm_start.warm_launches({}) as starter:
        assert starter.launch(["x" * 400_000]) is None  # over the socket's send buffer
        assert not starter.broken
