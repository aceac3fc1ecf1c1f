"""An emulated cluster on this one machine: network namespaces, veth links, tc shaping, sshd.

Topology (all names start with "stash-" so teardown can find them without state.json):

    root namespace              stash-hub namespace                  stash-n<i> namespace
    stash-vh 10.213.0.1/24 <-veth-> stash-vhb -+
                                               stash-br0 (bridge)
                                    stash-v<i>b -+ <-veth-> stash0 10.213.0.(10+i)

The bridge lives in its own namespace rather than in the root one because a host with
br_netfilter loaded (Docker, Kubernetes) sends bridged frames through the root namespace's
iptables FORWARD chain, whose policy is often DROP; a fresh namespace has no rules, so node to
node traffic flows whatever the host firewall says. The launching machine reaches the nodes
through stash-vh (10.213.0.1), which is its own address on the cluster's subnet.

This module brings the cluster up, down, reports and changes it; the parts live next to it:
    cluster_names     names and addresses          cluster_state    state.json and the state dir
    cluster_net       namespaces and veth links    cluster_shaping  rate, latency and loss (tc)
    cluster_sshd      an sshd per node, client config
state.json in state_dir records what was made, written after each step, so that a setup
interrupted half-way can still be taken down.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.launch import cluster_net, cluster_sshd
from stash_core.launch.cluster_names import (
    DEFAULT_STATE_DIR,
    HUB_NAMESPACE,
    MAX_NODES,
    NODE_IFNAME,
    ROOT_VETH,
    ROOT_VETH_PEER,
    SSH_USER,
    WORKER_ENV,
    node_address,
    node_namespace,
)
from stash_core.launch.cluster_shaping import (
    check_loss,
    live_qdiscs,
    netem_supported,
    parse_bandwidth_bps,
    parse_latency_us,
    shape_node,
)
from stash_core.launch.cluster_state import (
    load_state,
    new_node,
    new_state,
    remove_state_files,
    require_state,
    save_state,
    state_path,
)
from stash_core.launch.ssh import SshTarget
from stash_core.proc import end_pids

__all__ = [
    "DEFAULT_STATE_DIR",
    "HUB_NAMESPACE",
    "MAX_NODES",
    "NODE_IFNAME",
    "WORKER_ENV",
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

_KILL_GRACE_S = 2.0


# ---------------------------------------------------------------- before anything is made


def cluster_support_problem(probe_namespace: bool = False) -> str | None:
    """Why an emulated cluster cannot be made here (one line), or None when it can.

    probe_namespace=True also creates and deletes a throw-away namespace, which catches
    containers that are root but lack CAP_SYS_ADMIN / CAP_NET_ADMIN.
    """
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "the emulated cluster needs Linux"
    if os.geteuid() != 0:
        return "the emulated cluster needs root (network namespaces, tc and sshd)"
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("ssh", "openssh-client"),
                          ("ssh-keygen", "openssh-client")):  # fmt: skip
        if shutil.which(tool) is None:
            return f"'{tool}' not found (apt-get install {package})"
    if cluster_sshd.sshd_path() is None:
        return "'sshd' not found (apt-get install openssh-server)"
    if probe_namespace:
        return cluster_net.namespace_problem()
    return None


def node_cpu_sets(nodes: int, cpus: list[int] | None = None) -> list[list[int]]:
    """Split the usable cores (default: this process's affinity) into `nodes` disjoint, contiguous sets."""
    available = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if nodes < 1:
        raise UsageError("nodes must be at least 1")
    if nodes > len(available):
        raise UsageError(f"cannot split {len(available)} cores among {nodes} nodes (need one core per node)")
    base, extra = divmod(len(available), nodes)
    sets, start = [], 0
    for index in range(nodes):
        size = base + (1 if index < extra else 0)
        sets.append(available[start : start + size])
        start += size
    return sets


# ---------------------------------------------------------------- up


def cluster_up(
    nodes: int,
    bandwidth: str = "1gbit",
    latency: str = "1ms",
    loss_pct: float = 0.0,
    split_cpus: bool = False,
    state_dir: Path = DEFAULT_STATE_DIR,
) -> dict:
    """Create an emulated cluster of `nodes` namespaces with shaped links and an sshd each.

    Returns cluster_status(). A setup that fails half-way is taken down again before the
    error is raised. UsageError for bad arguments, missing root/tools or an existing cluster.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"nodes must be between 1 and {MAX_NODES}, got {nodes!r}")
    shaping = {
        "rate_bps": parse_bandwidth_bps(bandwidth),
        "latency_us": parse_latency_us(latency),
        "loss_pct": check_loss(loss_pct),
    }
    cpu_sets = node_cpu_sets(nodes) if split_cpus else None
    problem = cluster_support_problem()
    if problem:
        raise UsageError(problem)
    state_dir = Path(state_dir)
    existing = cluster_net.live_namespaces() + cluster_net.root_links()
    if existing or state_path(state_dir).exists():
        raise UsageError(
            f"an emulated cluster already exists ({', '.join(existing) or state_path(state_dir)}); "
            "take it down first"
        )
    cluster_net.check_subnet_free()
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    state = new_state(state_dir, cpu_sets)
    save_state(state_dir, state)
    try:
        _build(state_dir, state, nodes, shaping, cpu_sets)
    except BaseException:
        cluster_down(state_dir)
        raise
    return cluster_status(state_dir)


def _build(state_dir: Path, state: dict, nodes: int, shaping: dict, cpu_sets: list[list[int]] | None) -> None:
    state["key_path"] = str(cluster_sshd.make_client_key(state_dir))
    _build_hub(state_dir, state)
    for index in range(nodes):
        _add_node(state_dir, state, index, shaping, cpu_sets[index] if cpu_sets else None)
    for index in range(nodes):
        state["nodes"][index]["sshd_pid"] = cluster_sshd.start_sshd(state_dir, index)
        save_state(state_dir, state)
    state["ssh_config"] = str(cluster_sshd.write_client_config(state_dir, nodes))
    save_state(state_dir, state)


def _build_hub(state_dir: Path, state: dict) -> None:
    """The hub namespace with its bridge, and the launcher's link into it; each part recorded once made."""
    cluster_net.add_namespace(HUB_NAMESPACE)
    state["hub_namespace"] = HUB_NAMESPACE
    save_state(state_dir, state)
    cluster_net.add_bridge_and_root_veth()
    state["root_veth"] = ROOT_VETH
    save_state(state_dir, state)
    cluster_net.connect_root_veth()
    state["netem"] = netem_supported(HUB_NAMESPACE, ROOT_VETH_PEER)


def _add_node(state_dir: Path, state: dict, index: int, shaping: dict, cpus: list[int] | None) -> None:
    """Node index's namespace, its shaped link into the hub; each part recorded once made."""
    cluster_net.add_namespace(node_namespace(index))
    node = new_node(index, shaping, cpus)
    state["nodes"].append(node)
    save_state(state_dir, state)
    node["hub_veth"] = cluster_net.add_node_veth(index)
    save_state(state_dir, state)
    cluster_net.connect_node_veth(index)
    shape_node(state, index)
    save_state(state_dir, state)


# ---------------------------------------------------------------- down


def cluster_down(state_dir: Path = DEFAULT_STATE_DIR) -> list[str]:
    """Take the emulated cluster down: processes, namespaces, links (with their qdiscs), state files.

    Works from state.json and, without it, from the stash-* names alone. Safe to run twice.
    Returns what it did, one line per action.
    """
    state_dir = Path(state_dir)
    actions: list[str] = []
    state = load_state(state_dir) or {}
    for node in state.get("nodes", []):
        pid = node.get("sshd_pid")
        if cluster_sshd.is_our_sshd(pid, state_dir, node["index"]):  # only if still ours: pids get reused
            _end_processes([pid], f"sshd of {node['namespace']}", actions)
    # Every stash-n*/stash-hub namespace, recorded or not: the names are ours.
    for namespace in cluster_net.live_namespaces():
        _end_processes(cluster_net.namespace_pids(namespace), namespace, actions)
        actions.append(cluster_net.delete_namespace(namespace))
    actions += cluster_net.delete_root_links()
    actions += remove_state_files(state_dir)
    return actions


def _end_processes(pids: list[int], label: str, actions: list[str]) -> None:
    """End pids (TERM, then KILL); say what was ended and what could not be in actions."""
    pids = [pid for pid in pids if pid != os.getpid()]
    if not pids:
        return
    alive = end_pids(pids, _KILL_GRACE_S)
    actions.append(f"ended {len(pids) - len(alive)} process(es) in {label}: {' '.join(map(str, pids))}")
    if alive:
        actions.append(f"could not end process(es) in {label}: {' '.join(map(str, alive))}")


# ---------------------------------------------------------------- status and changes


def cluster_status(state_dir: Path = DEFAULT_STATE_DIR) -> dict:
    """What exists now: nodes with address, shaping, live qdiscs, link and sshd state."""
    state_dir = Path(state_dir)
    state = load_state(state_dir) or {}
    live = set(cluster_net.live_namespaces())
    nodes = [_node_status(node, node["namespace"] in live) for node in state.get("nodes", [])]
    recorded = {node["namespace"] for node in state.get("nodes", [])} | {HUB_NAMESPACE}
    warnings = sorted({node["warning"] for node in state.get("nodes", []) if node.get("warning")})
    return {
        "up": bool(nodes) and all(n["exists"] and n["sshd_alive"] for n in nodes),
        "state_dir": str(state_dir),
        "nodes": nodes,
        "master_addr": nodes[0]["address"] if nodes else None,
        "root_address": state.get("root_address"),
        "netem": state.get("netem"),
        "ssh_config": state.get("ssh_config"),
        "key_path": state.get("key_path"),
        "cpu_sets": state.get("cpu_sets"),
        "worker_env": dict(WORKER_ENV),
        "warnings": warnings,
        "unrecorded_namespaces": sorted(live - recorded),
    }


def _node_status(node: dict, exists: bool) -> dict:
    pid = node.get("sshd_pid")
    hub_end = node.get("hub_veth") if exists else None
    return {
        "index": node["index"],
        "namespace": node["namespace"],
        "address": node["address"],
        "exists": exists,
        "sshd_pid": pid,
        "sshd_alive": bool(pid) and cluster_sshd.pid_alive(pid),
        "link_up": cluster_net.link_up(HUB_NAMESPACE, hub_end) if hub_end else None,
        "shaping": node["shaping"],
        # what the node sends is shaped on its own end, what it receives on the bridge end
        "qdiscs": live_qdiscs(node["namespace"], NODE_IFNAME) if exists else [],
        "ingress_qdiscs": live_qdiscs(HUB_NAMESPACE, hub_end) if hub_end else [],
        "cpus": node.get("cpus"),
    }


def set_link(
    node: int,
    bandwidth: str | None = None,
    latency: str | None = None,
    loss_pct: float | None = None,
    down: bool = False,
    state_dir: Path = DEFAULT_STATE_DIR,
) -> dict:
    """Change node's shaping (None keeps a value) and cut (down=True) or restore (down=False) its link.

    Returns the node's shaping as now applied, with its "down" flag and any warning.
    """
    state_dir = Path(state_dir)
    state = require_state(state_dir)
    if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < len(state["nodes"]):
        raise UsageError(f"no node {node!r} in the cluster (nodes 0..{len(state['nodes']) - 1})")
    record = state["nodes"][node]
    shaping = dict(record["shaping"])
    if bandwidth is not None:
        shaping["rate_bps"] = parse_bandwidth_bps(bandwidth)
    if latency is not None:
        shaping["latency_us"] = parse_latency_us(latency)
    if loss_pct is not None:
        shaping["loss_pct"] = check_loss(loss_pct)
    if shaping != record["shaping"]:
        record["shaping"] = shaping
        shape_node(state, node)
    cluster_net.set_hub_veth(record["hub_veth"], up=not down)
    record["down"] = bool(down)
    save_state(state_dir, state)
    return {**shaping, "down": record["down"], "warning": record.get("warning")}


def cluster_hosts(state_dir: Path = DEFAULT_STATE_DIR) -> list[SshTarget]:
    """SshTargets for the nodes, in node order; each host is the node's address (usable as master_addr)."""
    state = require_state(Path(state_dir))
    if not state.get("ssh_config"):
        raise UsageError("the emulated cluster is not completely set up; take it down and up again")
    return [
        SshTarget(
            host=node["address"],
            user=SSH_USER,
            key_path=Path(state["key_path"]),
            config_file=Path(state["ssh_config"]),
        )
        for node in state["nodes"]
    ]


def cluster_cpu_sets(state_dir: Path = DEFAULT_STATE_DIR) -> list[list[int]] | None:
    """The per-node core sets chosen by cluster_up(split_cpus=True), else None."""
    return require_state(Path(state_dir)).get("cpu_sets")
