"""Names and addresses of the emulated cluster's parts (the topology is drawn in cluster.py).

Every namespace and link name starts with "stash-", so that teardown can find them all without
state.json; nodes are numbered from 0.
"""

from __future__ import annotations

import re
from pathlib import Path

DEFAULT_STATE_DIR = Path("/run/stash-cluster")
MAX_NODES = 16
HUB_NAMESPACE = "stash-hub"
BRIDGE = "stash-br0"
ROOT_VETH = "stash-vh"  # root namespace end of the launcher's link into the hub
ROOT_VETH_PEER = "stash-vhb"
NODE_IFNAME = "stash0"  # the same name on every node, so GLOO_SOCKET_IFNAME=stash0 works everywhere
SUBNET_PREFIX = "10.213.0."
ROOT_ADDRESS = SUBNET_PREFIX + "1"
SSH_USER = "root"
# Environment every process on a node should see: gloo/NCCL/TensorPipe would otherwise pick an
# address from the machine's host name, which is not reachable inside a namespace.
WORKER_ENV = {
    "GLOO_SOCKET_IFNAME": NODE_IFNAME,
    "NCCL_SOCKET_IFNAME": NODE_IFNAME,
    "TP_SOCKET_IFNAME": NODE_IFNAME,
}
NAMESPACE_RE = re.compile(r"^stash-(?:n\d+|hub)$")  # the namespaces we make
ROOT_LINK_RE = re.compile(r"^stash-(?:vh|br0|v\d+[bn])$")  # the links of ours a root namespace may hold


def node_namespace(index: int) -> str:
    return f"stash-n{index}"


def node_address(index: int) -> str:
    return f"{SUBNET_PREFIX}{10 + index}"


def hub_veth(index: int) -> str:
    """The bridge-side end of node index's link, in the hub namespace."""
    return f"stash-v{index}b"


def node_dir(state_dir: Path, index: int) -> Path:
    """Where node index keeps its sshd config, host key, pid file and log."""
    return Path(state_dir) / f"n{index}"
