"""Argument parsing of the emulated cluster and of the multi-node launcher (no root needed)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from stash_core.errors import UsageError
from stash_core.launch import multinode
from stash_core.launch.cluster import node_cpu_sets, parse_bandwidth_bps, parse_latency_us
from stash_core.launch.ssh import SshTarget


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("1gbit", 1_000_000_000),
        ("200mbit", 200_000_000),
        ("50Mbit", 50_000_000),
        ("1.5gbit", 1_500_000_000),
        ("10mbps", 80_000_000),  # tc: mbps is megaBYTES per second
        ("512kbit", 512_000),
        ("unlimited", None),
    ],
)
def test_parse_bandwidth(text, bps):
    assert parse_bandwidth_bps(text) == bps


@pytest.mark.parametrize("text", ["fast", "100", "10 parsecs", "-5mbit", "0mbit", "1000tbit", "", "1e3mbit"])
def test_parse_bandwidth_rejects(text):
    with pytest.raises(UsageError):
        parse_bandwidth_bps(text)


@pytest.mark.parametrize(
    ("text", "us"), [("1ms", 1000), ("0", 0), ("0ms", 0), ("250us", 250), ("0.5s", 500_000)]
)
def test_parse_latency(text, us):
    assert parse_latency_us(text) == us


@pytest.mark.parametrize("text", ["1 parsec", "5", "11s", "ms", "-1ms"])
def test_parse_latency_rejects(text):
    with pytest.raises(UsageError):
        parse_latency_us(text)


def test_node_cpu_sets_are_disjoint_and_cover_the_cores():
    assert node_cpu_sets(2, [0, 1]) == [[0], [1]]
    assert node_cpu_sets(1, [0, 1]) == [[0, 1]]
    sets = node_cpu_sets(3, list(range(8)))
    assert sets == [[0, 1, 2], [3, 4, 5], [6, 7]]
    with pytest.raises(UsageError, match="cannot split 2 cores among 3 nodes"):
        node_cpu_sets(3, [0, 1])


def test_free_port_is_bindable():
    port = multinode.free_port()
    with socket.socket() as sock:
        sock.bind(("", port))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"module": "x; rm -rf /"}, "invalid module name"),
        ({"nproc_per_node": 0}, "nproc_per_node"),
        ({"master_port": 70000}, "invalid master port"),
        ({"env": {"BAD KEY": "1"}}, "invalid environment variable name"),
        ({"targets": []}, "no hosts"),
        ({"cpu_sets": [[0], [1]]}, "2 cpu sets for 1 nodes"),
    ],
)
def test_launch_refuses_bad_arguments_before_any_ssh(changes, message):
    arguments = {
        "targets": [SshTarget(host="node-that-does-not-exist.invalid")],
        "nproc_per_node": 1,
        "module": "stash_core.measure.worker",
        "module_args": [],
        "master_addr": "10.0.0.1",
        "master_port": 29500,
        "env": {},
        "python": sys.executable,
        "workdir": "/",
        "timeout_s": 10.0,
        "on_line": lambda node, line: None,
        **changes,
    }
    with pytest.raises(UsageError, match=message):
        multinode.launch_torchrun_over_ssh(**arguments)


def test_supervisor_ends_its_processes_when_stdin_closes(tmp_path):
    """The remote supervisor, run locally: EOF on stdin ends the child it started (by the tag)."""
    child_pid_file = tmp_path / "child.pid"
    child = f"import os, time; open({str(child_pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    supervisor = subprocess.Popen(
        [sys.executable, "-c", multinode.SUPERVISOR_SRC, "run", "unit-test-tag", str(tmp_path), "--",
         sys.executable, "-c", child],
        stdin=subprocess.PIPE,
    )  # fmt: skip
    try:
        for _ in range(400):
            if child_pid_file.exists() and child_pid_file.read_text():
                break
            time.sleep(0.05)
        child_pid = int(child_pid_file.read_text())
        supervisor.stdin.close()
        assert supervisor.wait(timeout=20) == 143
        assert not _alive(child_pid)
    finally:
        supervisor.kill()
        supervisor.wait()


def test_supervisor_passes_the_exit_code_and_reports_a_missing_workdir(tmp_path):
    run = [sys.executable, "-c", multinode.SUPERVISOR_SRC, "run", "unit-test-tag"]
    held_open = subprocess.Popen(
        [*run, str(tmp_path), "--", sys.executable, "-c", "raise SystemExit(7)"], stdin=subprocess.PIPE
    )
    assert held_open.wait(timeout=30) == 7
    held_open.stdin.close()
    missing = subprocess.run([*run, str(tmp_path / "nope"), "--", "true"], capture_output=True, text=True)
    assert missing.returncode == 125
    assert "cannot use workdir" in missing.stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
