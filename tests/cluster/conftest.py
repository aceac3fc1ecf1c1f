"""Emulated-cluster tests: skip them all, with the reason, where a cluster cannot be made.

They need root, iproute2 (ip, tc), OpenSSH (ssh, sshd, ssh-keygen) and a kernel that lets us
create network namespaces. CI runs as root. Helpers live in clusterkit.py.
"""

from __future__ import annotations

from pathlib import Path

import clusterkit
import pytest

from stash_core.launch import cluster


@pytest.fixture(scope="session", autouse=True)
def _cluster_capable(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Session scope so it runs before any module-scoped cluster fixture tries to build one. Clusters already
    here are left alone: this process's clusters have names of their own (clusterkit.cluster_name)."""
    clusterkit.TEST_TMP[:] = [tmp_path_factory.getbasetemp()]
    problem = cluster.cluster_support_problem(probe_namespace=True)
    if problem:
        pytest.skip(f"emulated cluster unavailable: {problem}")


HERE = Path(__file__).parent
# The files that take longest, longest first (minutes of real profiles over shaped links; docs/ci.md). CI runs
# this folder in two pytest-xdist processes, a file to a process, in collection order (tests/conftest.py puts
# the files with a `slow` test first and keeps this order among them): started first, the long files go to
# different processes and the short ones fill in beside them, instead of two long ones ending the run on one.
LONGEST_FIRST = (
    "test_prediction_heldout.py",
    "test_profile_network_faults.py",
    "test_profile_network.py",
    "test_multinode.py",
    "test_script_multinode.py",
    "test_named.py",
    "test_spot_profile_cluster.py",
)
assert all((HERE / name).is_file() for name in LONGEST_FIRST), "a file of LONGEST_FIRST is gone: update it"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this folder needs root (namespaces, tc, sshd): marked `root` and `cluster`, so that
    `-m "not root"` leaves them all out. The files of LONGEST_FIRST go first, in its order."""
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.root)
            item.add_marker(pytest.mark.cluster)

    def rank(item: pytest.Item) -> int:
        path = Path(item.path)
        listed = path.parent == HERE and path.name in LONGEST_FIRST
        return LONGEST_FIRST.index(path.name) if listed else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
