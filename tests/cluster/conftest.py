"""Emulated-cluster tests: skip them all, with the reason, where a cluster cannot be made.

They need root, iproute2 (ip, tc), OpenSSH (ssh, sshd, ssh-keygen) and a kernel that lets us
create network namespaces. CI runs as root. Helpers live in clusterkit.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import clusterkit
import pytest
from clusterkit import node_namespace_ids, only_sshd_left, tagged_processes, wait_until

from stash_core.launch import cluster

LOWER_PRIORITY = 5  # nice steps: between the quiet files (0) and tier 1 (10)


@pytest.fixture(scope="session", autouse=True)
def _cluster_capable(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Session scope so it runs before any module-scoped cluster fixture tries to build one. Clusters already
    here are left alone: this process's clusters have names of their own (clusterkit.cluster_name)."""
    clusterkit.TEST_TMP[:] = [tmp_path_factory.getbasetemp()]
    problem = cluster.cluster_support_problem(probe_namespace=True)
    if problem:
        pytest.skip(f"emulated cluster unavailable: {problem}")


@pytest.fixture(scope="module")
def nodes(cluster_state) -> frozenset[int]:
    """The node namespaces of the module's cluster (its `cluster_state`), where a launch's processes run."""
    return node_namespace_ids(cluster_state)


@pytest.fixture
def no_leftovers(cluster_state, nodes):
    """After the test: no process of any launch alive on the nodes, only sshd in the node namespaces."""
    yield
    assert wait_until(lambda: not tagged_processes(nodes), 20), f"left running: {tagged_processes(nodes)}"
    assert wait_until(lambda: only_sshd_left(cluster_state), 20)


HERE = Path(__file__).parent
# The files that take longest, longest first (minutes of real profiles over shaped links; docs/ci.md). CI runs
# this folder in two pytest-xdist processes, a file to a process (the quiet files as one, tests/conftest.py),
# in collection order (tests/conftest.py puts the files with a `slow` test first and keeps this order among
# them): started first, the long ones go to different processes and the short ones fill in beside them.
LONGEST_FIRST = (
    "test_profile_network.py",
    "test_profile_network_faults.py",
    "test_multinode.py",
    "test_script_multinode.py",
    "test_named.py",
    "test_spot_profile_cluster.py",
)
assert all((HERE / name).is_file() for name in LONGEST_FIRST), "a file of LONGEST_FIRST is gone: update it"
# The files with a test that compares measured times (`quiet`: a network stall against the link, probes
# against the tc rate, transfers at two rates): set at collection.
QUIET_FILES: set[Path] = set()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this folder needs root (namespaces, tc, sshd): marked `root` and `cluster`, so that
    `-m "not root"` leaves them all out. The files of LONGEST_FIRST go first, in its order."""
    ours = [item for item in items if HERE in Path(item.path).parents]
    QUIET_FILES.update(Path(item.path) for item in ours if item.get_closest_marker("quiet"))
    for item in ours:
        item.add_marker(pytest.mark.root)
        item.add_marker(pytest.mark.cluster)

    def rank(item: pytest.Item) -> int:
        path = Path(item.path)
        listed = path.parent == HERE and path.name in LONGEST_FIRST
        return LONGEST_FIRST.index(path.name) if listed else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture(scope="module", autouse=True)
def _priority(request: pytest.FixtureRequest) -> Iterator[None]:
    """A file that compares no measured times runs at a lower CPU priority, with everything it starts (its
    cluster's sshd, made after this, and so every process on its nodes): beside it in CI's other process, the
    quiet files keep the cores their measurements need, as they did beside tier 1 (which runs at nice 10)."""
    if Path(request.path) in QUIET_FILES:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, min(before + LOWER_PRIORITY, 19))
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)  # root may raise it again
