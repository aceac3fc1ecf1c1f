"""Helpers for the emulated-cluster tests: a cluster fixture factory, process and socket checks.

Every cluster a pytest process makes is named RUN_PREFIX + a label of its test module (cluster_name): a
prefix drawn at random by each process, so that the pytest-xdist processes of CI's cluster tier, and test
runs of other checkouts on this machine, never share a cluster, a namespace, a link or an address range
(named clusters take the first free 10.213.K.0/24, ups taking turns), and each process looks for leftovers
and left-running launches on its own clusters only.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import string
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from stash_core.launch import cluster
from stash_core.launch.cluster.names import Layout, check_name, state_dir_for
from stash_core.launch.cluster.state import load_state
from stash_core.measure.protocol import WORKER_NAME

LAUNCH_TAG_VAR = "STASH_LAUNCH_ID"
# The folder under which the tests keep every state folder (set by conftest): their sshd run from there.
TEST_TMP: list[Path] = []
# "z" and 4 random letters or digits: not "t..." nor "default", the names older versions of these tests use
# and look for; a module's label (up to 6 characters) follows it in a cluster name of at most 11.
RUN_PREFIX = "z" + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(4))


def cluster_name(label: str) -> str:
    """The name of this process's cluster `label` (1 to 6 lowercase letters and digits)."""
    return check_name(RUN_PREFIX + label)


def layout(state_dir: Path) -> Layout:
    """The names and addresses of the cluster whose state is in state_dir."""
    return Layout.of_state(load_state(Path(state_dir)) or {})


def leftovers() -> list[str]:
    """Every trace of the clusters this process made: namespaces, links in the root namespace, live sshd
    started from its state folders. Other processes' and other people's clusters may stay."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = [name for name in namespaces if name.startswith(f"stash-{RUN_PREFIX}")]
    found += [
        link
        for link in (word.rstrip(":").split("@")[0] for word in links.split())
        if link.startswith(f"svh-{RUN_PREFIX}")
    ]
    # a named cluster's own folder is /run/stash-cluster-NAME; the others are under this process's tmp folder
    bases = [f"{base}/" for base in TEST_TMP] + [str(state_dir_for(RUN_PREFIX))]
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            ours = process.info["name"] == "sshd" and any(
                "sshd_config" in part and any(base in part for base in bases)
                for part in process.info["cmdline"] or []
            )
            if ours and process.status() != psutil.STATUS_ZOMBIE:
                found.append(f"sshd pid {process.pid}")
        except psutil.Error:
            continue
    return found


def cluster_fixture(nodes: int, label: str, name: str = "cluster_state", **kwargs) -> Callable:
    """A module-scoped fixture (yielding the state dir) that brings up this process's cluster `label` and
    always takes it down."""

    @pytest.fixture(scope="module", name=name)
    def _fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        state_dir = tmp_path_factory.mktemp("cluster-state")
        try:
            cluster.cluster_up(nodes, state_dir=state_dir, name=cluster_name(label), **kwargs)
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


def node_namespace_ids(state_dir: Path) -> frozenset[int]:
    """The network namespaces of a cluster's nodes, as the inode numbers /proc/PID/ns/net shows; kept by a
    test that takes its cluster down: the names go with it, while a process left running keeps its node's."""
    return frozenset(
        os.stat(f"/run/netns/{node['namespace']}").st_ino
        for node in cluster.cluster_status(state_dir)["nodes"]
        if node["exists"]
    )


def tagged_processes(nodes: Path | frozenset[int], tag: str | None = None) -> list[int]:
    """Live pids on the nodes of one cluster (its state folder, or node_namespace_ids) whose environment
    carries a multinode launch tag: this one, or (no tag) any. A tagged process elsewhere is another
    cluster's (another test process's) or a local launch (a unit test's supervisor running beside this tier
    in CI), not one of this cluster's."""
    namespace_ids = node_namespace_ids(nodes) if isinstance(nodes, Path) else nodes
    found = []
    for process in psutil.process_iter():
        try:
            value = process.environ().get(LAUNCH_TAG_VAR)
        except psutil.Error:
            continue
        if value is None or (tag is not None and value != tag) or not _live(process):
            continue
        if _namespace_id(process.pid) in namespace_ids:
            found.append(process.pid)
    return found


def _namespace_id(pid: int) -> int | None:
    """The inode of the process's network namespace (None when it ended meanwhile)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


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


# The model options of a network-bound profile on 2 nodes (netmodel.py: 6.3 MB of gradients, little compute).
NET_MODEL = [
    "--model", f"{Path(__file__).resolve().parent / 'netmodel.py'}:make", "--input-shape", "3,16,16",
    "--num-classes", "10", "--batch-size", "8", "--workers", "1", "--nodes", "2",
]  # fmt: skip


def net_profile(
    state: Path, tmp: Path, *args: str, timeout_s: float = 300
) -> tuple[subprocess.CompletedProcess, dict]:
    """`stash profile` of NET_MODEL's network stall on the cluster at `state` (results in tmp): the finished
    process and its result file (empty when none was written)."""
    out = tmp / f"run-{len(list(tmp.glob('run-*.json')))}.json"
    argv = stash_argv(
        "profile", *NET_MODEL, "--cluster", "emulated", "--cluster-state", str(state), "--stalls", "network",
        "--out", str(out), "--db", str(tmp / "results.duckdb"), "--progress", "none", *args,
    )  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, env=stash_env(), timeout=timeout_s)
    return result, (json.loads(out.read_text()) if out.exists() else {})


def stash_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "stash_core", *args]


def stash_env() -> dict[str, str]:
    repo = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": repo}


def worker_processes(state_dir: Path, node: int | None = None) -> list[psutil.Process]:
    """Live measuring worker processes of any multinode launch on the cluster's nodes (one node when given):
    every worker names itself (protocol.WORKER_NAME; torchrun, whose command line it may share, does not)."""
    namespace_ids = node_namespace_ids(state_dir)
    found = []
    for process in psutil.process_iter():
        try:
            tag = process.environ().get(LAUNCH_TAG_VAR)
            name = process.name()
        except psutil.Error:
            continue
        if tag is None or name != WORKER_NAME:
            continue
        if node is not None and not tag.endswith(f"-n{node}"):
            continue
        if _live(process) and _namespace_id(process.pid) in namespace_ids:
            found.append(process)
    return found
