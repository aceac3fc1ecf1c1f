"""Emulated-cluster tests: skip them all, with the reason, where a cluster cannot be made.

They need root, iproute2 (ip, tc), OpenSSH (ssh, sshd, ssh-keygen) and a kernel that lets us
create network namespaces. CI runs as root. Helpers live in clusterkit.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import clusterkit
import pytest

from stash_core.launch import cluster
from stash_core.launch.cluster_names import DEFAULT_LAYOUT


@pytest.fixture(scope="session", autouse=True)
def _cluster_capable(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Session scope so it runs before any module-scoped cluster fixture tries to build one."""
    clusterkit.TEST_TMP[:] = [tmp_path_factory.getbasetemp()]
    problem = cluster.cluster_support_problem(probe_namespace=True)
    if problem:
        pytest.skip(f"emulated cluster unavailable: {problem}")
    existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    # the tests bring up the default cluster, and clusters named "t..." (test_named.py); others may stay
    if any(DEFAULT_LAYOUT.owns_namespace(name) or name.startswith("stash-t") for name in existing):
        pytest.skip(
            "an emulated cluster the tests use already exists here; take it down first (cluster down)"
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this folder needs root (namespaces, tc, sshd): marked `root` and `cluster`, so that
    `-m "not root"` leaves them all out."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.root)
            item.add_marker(pytest.mark.cluster)
