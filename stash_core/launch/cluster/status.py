"""What an emulated cluster is now, changes to its links, and the ssh targets of its nodes.

Every function takes the cluster's state folder and, optionally, its name: a folder records the
name of the cluster it holds, and a name alone means that name's own folder (names.py).
"""

from __future__ import annotations

from pathlib import Path

from stash_core.errors import UsageError
from stash_core.interrupts import held_interrupts, stop_exception
from stash_core.launch.cluster import gone, net
from stash_core.launch.cluster.names import NODE_IFNAME, SSH_USER, WORKER_ENV, Layout, cluster_option
from stash_core.launch.cluster.shaping import (
    check_loss,
    live_qdiscs,
    parse_bandwidth_bps,
    parse_latency_us,
    shape_node,
)
from stash_core.launch.cluster.state import load_state, require_state, resolve, save_state
from stash_core.launch.ssh import SshTarget
from stash_core.proc import pid_alive


def cluster_status(state_dir: Path | None = None, name: str | None = None) -> dict:
    """What exists now: nodes with address, shaping, live qdiscs, link and sshd state; the other clusters."""
    name, state_dir = resolve(name, state_dir)
    state = load_state(state_dir) or {}
    layout = Layout.of_state(state) if state else Layout(name)
    live = set(net.live_namespaces(layout))
    nodes = [_node_status(layout, node, node["namespace"] in live) for node in state.get("nodes", [])]
    recorded = {node["namespace"] for node in state.get("nodes", [])} | {layout.hub_namespace}
    warnings = sorted({node["warning"] for node in state.get("nodes", []) if node.get("warning")})
    return {
        "name": layout.name,
        "up": bool(nodes) and all(n["exists"] and n["sshd_alive"] for n in nodes),
        "gone": bool(state.get("nodes")) and gone.is_gone(state_dir),
        "state_dir": str(state_dir),
        "subnet": state.get("subnet") or (layout.subnet if state else None),
        "root_veth": state.get("root_veth"),
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
        "other_clusters": [other for other in net.live_cluster_names() if other != layout.name],
    }


def _node_status(layout: Layout, node: dict, exists: bool) -> dict:
    pid = node.get("sshd_pid")
    hub_end = node.get("hub_veth") if exists else None
    return {
        "index": node["index"],
        "namespace": node["namespace"],
        "address": node["address"],
        "exists": exists,
        "sshd_pid": pid,
        "sshd_alive": bool(pid) and pid_alive(pid),
        "link_up": net.link_up(layout.hub_namespace, hub_end) if hub_end else None,
        "shaping": node["shaping"],
        # what the node sends is shaped on its own end, what it receives on the bridge end
        "qdiscs": live_qdiscs(node["namespace"], NODE_IFNAME) if exists else [],
        "ingress_qdiscs": live_qdiscs(layout.hub_namespace, hub_end) if hub_end else [],
        "cpus": node.get("cpus"),
    }


def set_link(
    node: int,
    bandwidth: str | None = None,
    latency: str | None = None,
    loss_pct: float | None = None,
    down: bool = False,
    state_dir: Path | None = None,
    name: str | None = None,
) -> dict:
    """Change node's shaping (None keeps a value) and cut (down=True) or restore (down=False) its link.

    Returns the node's shaping as now applied, with its "down" flag and any warning.
    """
    name, state_dir = resolve(name, state_dir)
    state = require_state(state_dir, name)
    if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < len(state["nodes"]):
        raise UsageError(f"no node {node!r} in the cluster (nodes 0..{len(state['nodes']) - 1})")
    gone.require_present(name, state_dir)
    record = state["nodes"][node]
    shaping = dict(record["shaping"])
    if bandwidth is not None:
        shaping["rate_bps"] = parse_bandwidth_bps(bandwidth)
    if latency is not None:
        shaping["latency_us"] = parse_latency_us(latency)
    if loss_pct is not None:
        shaping["loss_pct"] = check_loss(loss_pct)
    # A Ctrl-C between the tc calls and the state's save would leave the link shaped unlike its record.
    with held_interrupts() as received:
        if shaping != record["shaping"]:
            record["shaping"] = shaping
            shape_node(state, node)
        net.set_hub_veth(Layout.of_state(state), record["hub_veth"], up=not down)
        record["down"] = bool(down)
        save_state(state_dir, state)
    if received:
        raise stop_exception(received[0])
    return {**shaping, "down": record["down"], "warning": record.get("warning")}


def cluster_hosts(state_dir: Path | None = None, name: str | None = None) -> list[SshTarget]:
    """SshTargets for the nodes, in node order; each host is the node's address (usable as master_addr)."""
    name, state_dir = resolve(name, state_dir)
    state = require_state(state_dir, name)
    if not state.get("ssh_config"):
        raise UsageError(
            f"the emulated cluster {name} is not completely set up; take it down and up again "
            f"(stash cluster down{cluster_option(name)})"
        )
    targets = [
        SshTarget(
            host=node["address"],
            user=SSH_USER,
            key_path=Path(state["key_path"]),
            config_file=Path(state["ssh_config"]),
        )
        for node in state["nodes"]
    ]
    gone.remember(targets, name, state_dir)
    return targets


def cluster_cpu_sets(state_dir: Path | None = None, name: str | None = None) -> list[list[int]] | None:
    """The per-node core sets chosen by cluster_up(split_cpus=True), else None."""
    name, state_dir = resolve(name, state_dir)
    return require_state(state_dir, name).get("cpu_sets")
