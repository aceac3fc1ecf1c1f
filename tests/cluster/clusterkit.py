"""Helpers for the emulated-cluster tests: a cluster fixture factory, process and socket checks."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from stash_core.launch import cluster
from stash_core.launch.cluster_names import DEFAULT_LAYOUT

LAUNCH_TAG_VAR = "STASH_LAUNCH_ID"
# The folder under which the tests keep every state folder (set by conftest): their sshd run from there.
TEST_TMP: list[Path] = []


def leftovers() -> list[str]:
    """Every trace of the clusters the tests make (the default one and those named t...): namespaces,
    links in the root namespace, live sshd started from the tests' folders. Other clusters may stay."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = [name for name in namespaces if DEFAULT_LAYOUT.owns_namespace(name) or name.startswith("stash-t")]
    found += [
        link
        for link in (word.rstrip(":").split("@")[0] for word in links.split())
        if DEFAULT_LAYOUT.owns_root_link(link) or link.startswith("svh-t")
    ]
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            ours = process.info["name"] == "sshd" and any(
                "sshd_config" in part and any(str(base) in part for base in TEST_TMP)
                for part in process.info["cmdline"] or []
            )
            if ours and process.status() != psutil.STATUS_ZOMBIE:
                found.append(f"sshd pid {process.pid}")
        except psutil.Error:
            continue
    return found


def cluster_fixture(nodes: int, name: str = "cluster_state", **kwargs) -> Callable:
    """A module-scoped fixture (yielding the state dir) that brings a cluster up and always takes it down."""

    @pytest.fixture(scope="module", name=name)
    def _fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        state_dir = tmp_path_factory.mktemp("cluster-state")
        try:
            cluster.cluster_up(nodes, state_dir=state_dir, **kwargs)
            yield state_dir
        finally:
            cluster.cluster_down(state_dir)

    return _fixture


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll predicate until it holds (True) or timeout_s passes (False); for eventual cleanup checks."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _live(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tagged_processes(tag: str | None = None) -> list[int]:
    """Live pids whose environment carries a multinode launch tag: this one, or (no tag) any tag of a launch
    on the emulated nodes. Every node runs in a network namespace of its own, so a tagged process in this
    test's namespace is a local launch (a unit test's supervisor, running beside this tier in CI), not one
    of the cluster's."""
    found = []
    for process in psutil.process_iter():
        try:
            value = process.environ().get(LAUNCH_TAG_VAR)
        except psutil.Error:
            continue
        if value is None or not _live(process):
            continue
        if value == tag or (tag is None and _on_a_node(process.pid)):
            found.append(process.pid)
    return found


def _on_a_node(pid: int) -> bool:
    """True when the process lives in another network namespace than this test (an emulated node's)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    except OSError:  # ended meanwhile
        return False


def namespace_pids(namespace: str) -> set[int]:
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout
    return {int(word) for word in listed.split() if word.isdigit() and _live_pid(int(word))}


def _live_pid(pid: int) -> bool:
    try:
        return _live(psutil.Process(pid))
    except psutil.Error:
        return False


def only_sshd_left(state_dir: Path) -> bool:
    """True when every node namespace holds nothing but its sshd daemon."""
    status = cluster.cluster_status(state_dir)
    return all(namespace_pids(node["namespace"]) <= {node["sshd_pid"]} for node in status["nodes"])


def netns_python(
    namespace: str, code: str, *args: str, timeout_s: float = 30.0
) -> subprocess.CompletedProcess:
    """Run Python code inside a namespace (no shell) and return its CompletedProcess."""
    return subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def netns_popen(namespace: str, code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextlib.contextmanager
def port_taken(namespace: str, port: int) -> Iterator[None]:
    """Something else listens on `port` inside `namespace` while the block runs."""
    listener = netns_popen(
        namespace,
        "import socket, sys, time\ns = socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(1)\n"
        "print('ready', flush=True); time.sleep(120)",
        str(port),
    )
    try:
        assert listener.stdout.readline().strip() == "ready"
        yield
    finally:
        listener.kill()
        listener.wait()


# A TCP listener that prints "ready" once listening, then counts what one client sends.
RECEIVER_SRC = """
import socket, sys, time
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((sys.argv[1], int(sys.argv[2])))
server.listen(1)
print("ready", flush=True)
conn, _ = server.accept()
total, first = 0, None
while True:
    chunk = conn.recv(1 << 16)
    if not chunk:
        break
    if first is None:
        first = time.monotonic()
    total += len(chunk)
print(total, time.monotonic() - first, flush=True)
"""

SENDER_SRC = """
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
conn.sendall(b"x" * int(sys.argv[3]))
conn.close()
"""

# Exit 0 when a TCP connection to (addr, port) opens within the timeout, 1 otherwise.
CONNECT_SRC = """
import socket, sys, time
start = time.monotonic()
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
except OSError as exc:
    print("failed", exc)
    sys.exit(1)
print("connected", time.monotonic() - start)
"""


def stash_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "stash_core", *args]


def stash_env() -> dict[str, str]:
    import os

    repo = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": repo}


def worker_processes(node: int | None = None) -> list[psutil.Process]:
    """Live training/probe worker processes of any multinode launch (on one node when given)."""
    found = []
    for process in psutil.process_iter():
        try:
            tag = process.environ().get(LAUNCH_TAG_VAR)
            cmdline = " ".join(process.cmdline())
        except psutil.Error:
            continue
        if tag is None or "stash_core.measure.worker" not in cmdline or "torch.distributed.run" in cmdline:
            continue
        if node is not None and not tag.endswith(f"-n{node}"):
            continue
        if _live(process):
            found.append(process)
    return found
