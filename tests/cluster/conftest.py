"""Emulated-cluster tests: skip them all, with the reason, where a cluster cannot be made.

They need root, iproute2 (ip, tc), OpenSSH (ssh, sshd, ssh-keygen) and a kernel that lets us
create network namespaces. CI runs as root. Helpers live in clusterkit.py.
"""

from __future__ import annotations

import subprocess

import pytest

from stash_core.launch import cluster


@pytest.fixture(scope="session", autouse=True)
def _cluster_capable() -> None:
    """Session scope so it runs before any module-scoped cluster fixture tries to build one."""
    problem = cluster.cluster_support_problem(probe_namespace=True)
    if problem:
        pytest.skip(f"emulated cluster unavailable: {problem}")
    existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    if any(line.startswith(("stash-n", "stash-hub")) for line in existing.splitlines()):
        pytest.skip("an emulated cluster already exists on this machine; take it down first (cluster_down)")
