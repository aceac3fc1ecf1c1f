"""Emulated clusters on this one machine (network namespaces, veth links, tc shaping, an sshd per node): one
subsystem, one package.

`from stash_core.launch import cluster` gives what the commands and launchers use: cluster_up and cluster_down
(lifecycle.py), cluster_status, set_link, cluster_hosts and cluster_cpu_sets (status.py), and the names and
parsers below. The parts:
    lifecycle.py  up and down                     names.py     names and addresses
    state.py      state.json and the state folder net.py       namespaces and veth links
    shaping.py    rate, latency and loss (tc)     sshd.py      an sshd per node, the client config
    gone.py       is a cluster still there        status.py    status, link changes, ssh targets
    cmd.py        one setup command (an argv, never a shell)
"""

from stash_core.launch.cluster.lifecycle import (
    LEFT_ALONE,
    cluster_down,
    cluster_support_problem,
    cluster_up,
    node_cpu_sets,
)
from stash_core.launch.cluster.names import (
    DEFAULT_NAME,
    DEFAULT_STATE_DIR,
    HUB_NAMESPACE,
    MAX_NODES,
    NODE_IFNAME,
    WORKER_ENV,
    Layout,
    node_address,
    node_namespace,
)
from stash_core.launch.cluster.shaping import parse_bandwidth_bps, parse_latency_us
from stash_core.launch.cluster.status import cluster_cpu_sets, cluster_hosts, cluster_status, set_link

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_STATE_DIR",
    "HUB_NAMESPACE",
    "LEFT_ALONE",
    "MAX_NODES",
    "NODE_IFNAME",
    "WORKER_ENV",
    "Layout",
    "cluster_cpu_sets",
    "cluster_down",
    "cluster_hosts",
    "cluster_status",
    "cluster_support_problem",
    "cluster_up",
    "node_address",
    "node_cpu_sets",
    "node_namespace",
    "parse_bandwidth_bps",
    "parse_latency_us",
    "set_link",
]
