"""Network namespaces and veth links of an emulated cluster: the hub and its bridge, one namespace per node.

Nothing here records anything: lifecycle.py writes state.json between these steps, so that a setup
interrupted half-way can be taken down again.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.launch.cluster.cmd import run_cmd
from stash_core.launch.cluster.names import (
    ANY_NAMESPACE_RE,
    BRIDGE,
    DEFAULT_NAME,
    NODE_IFNAME,
    ROOT_VETH_PEER,
    Layout,
    hub_veth,
)

# The hub's bridge carries, as its alias, the state folder of the cluster that made it.
_ALIAS_MAX_BYTES = 255


# ---------------------------------------------------------------- what exists


def all_namespaces() -> list[str]:
    """Every namespace of this machine (`ip netns list`)."""
    listed = run_cmd(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def live_namespaces(layout: Layout) -> list[str]:
    """The namespaces of the cluster `layout` names that exist now, recorded or not."""
    return sorted(name for name in all_namespaces() if layout.owns_namespace(name))


def live_cluster_names() -> list[str]:
    """The names of the clusters that have a namespace on this machine."""
    found = {ANY_NAMESPACE_RE.match(name) for name in all_namespaces()}
    return sorted({match.group("name") or DEFAULT_NAME for match in found if match})


def root_links(layout: Layout) -> list[str]:
    """The cluster's links in the root namespace (the launcher's end of its link into the hub)."""
    return [name for name in _root_link_names() if layout.owns_root_link(name)]


def _root_link_names() -> list[str]:
    listed = run_cmd(["ip", "-o", "link", "show"], check=False).stdout
    names = []
    for line in listed.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return names


def namespace_pids(namespace: str) -> list[int]:
    """The processes running inside a namespace (`ip netns pids`)."""
    listed = run_cmd(["ip", "netns", "pids", namespace], check=False).stdout
    return [int(word) for word in listed.split() if word.isdigit()]


def link_up(namespace: str, device: str) -> bool | None:
    """Whether device is up and has carrier; None when it does not exist."""
    shown = run_cmd(["ip", "-n", namespace, "-o", "link", "show", device], check=False)
    if shown.returncode != 0:
        return None
    flags = shown.stdout.split("<", 1)[-1].split(">", 1)[0].split(",")
    return "UP" in flags and "state DOWN" not in shown.stdout


def namespace_problem() -> str | None:
    """Why no network namespace can be made here (e.g. root without CAP_SYS_ADMIN), or None."""
    probe = f"stash-probe{os.getpid()}"
    created = run_cmd(["ip", "netns", "add", probe], check=False)
    if created.returncode != 0:
        return f"cannot create network namespaces: {created.stderr.strip()}"
    run_cmd(["ip", "netns", "del", probe], check=False)
    return None


def subnet_users(network: ipaddress.IPv4Network) -> list[str]:
    """The interfaces of this machine with an address in network, as "device address"."""
    listed = run_cmd(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    users = []
    for line in listed.splitlines():
        words = line.split()
        if "inet" in words:
            address = words[words.index("inet") + 1].split("/")[0]
            if ipaddress.ip_address(address) in network:
                users.append(f"{words[1]} {address}")
    return users


def check_subnet_free(layout: Layout) -> None:
    """UsageError when an address of this machine already lies in the cluster's address range."""
    users = subnet_users(layout.network)
    if users:
        raise UsageError(
            f"the address range {layout.subnet} is already in use on this machine ({', '.join(users)}); "
            "choose another with --subnet"
        )


def owner_token(state_dir: Path) -> str:
    """What the hub's bridge records of the state folder that owns the cluster."""
    text = str(Path(state_dir).absolute())
    if len(text.encode()) <= _ALIAS_MAX_BYTES and text.isprintable():
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def hub_owner(layout: Layout) -> str | None:
    """The owner token on the hub's bridge; None when the hub, its bridge or the token is missing."""
    shown = run_cmd(["ip", "-j", "-n", layout.hub_namespace, "link", "show", BRIDGE], check=False)
    if shown.returncode != 0:
        return None
    try:
        return json.loads(shown.stdout)[0].get("ifalias") or None
    except (ValueError, IndexError, AttributeError):
        return None


# ---------------------------------------------------------------- making


def add_namespace(namespace: str) -> None:
    run_cmd(["ip", "netns", "add", namespace])


def add_bridge_and_root_veth(layout: Layout, state_dir: Path) -> None:
    """The hub's bridge (owned by state_dir), and a veth pair from the root namespace into the hub."""
    hub = ["ip", "-n", layout.hub_namespace]
    run_cmd([*hub, "link", "set", "lo", "up"])
    run_cmd([*hub, "link", "add", BRIDGE, "type", "bridge", "forward_delay", "0", "stp_state", "0"])
    run_cmd([*hub, "link", "set", BRIDGE, "alias", owner_token(state_dir)])
    run_cmd([*hub, "link", "set", BRIDGE, "up"])
    run_cmd(["ip", "link", "add", layout.root_veth, "type", "veth",
             "peer", "name", ROOT_VETH_PEER, "netns", layout.hub_namespace])  # fmt: skip


def connect_root_veth(layout: Layout) -> None:
    """Give the launcher its address in the cluster's range and plug its link into the bridge."""
    run_cmd(["ip", "addr", "add", f"{layout.root_address}/24", "dev", layout.root_veth])
    run_cmd(["ip", "link", "set", layout.root_veth, "up"])
    run_cmd(["ip", "-n", layout.hub_namespace, "link", "set", ROOT_VETH_PEER, "master", BRIDGE, "up"])


def add_node_veth(layout: Layout, index: int) -> str:
    """A veth pair from the hub into node index's namespace (NODE_IFNAME inside); the hub end's name."""
    namespace, hub_end = layout.node_namespace(index), hub_veth(index)
    run_cmd(["ip", "-n", namespace, "link", "set", "lo", "up"])
    run_cmd(["ip", "-n", layout.hub_namespace, "link", "add", hub_end, "type", "veth",
             "peer", "name", NODE_IFNAME, "netns", namespace])  # fmt: skip
    return hub_end


def connect_node_veth(layout: Layout, index: int) -> None:
    """Give node index its address and plug its link into the bridge."""
    inside = ["ip", "-n", layout.node_namespace(index)]
    run_cmd([*inside, "addr", "add", f"{layout.node_address(index)}/24", "dev", NODE_IFNAME])
    run_cmd([*inside, "link", "set", NODE_IFNAME, "up"])
    run_cmd(["ip", "-n", layout.hub_namespace, "link", "set", hub_veth(index), "master", BRIDGE, "up"])


def set_hub_veth(layout: Layout, device: str, up: bool) -> None:
    """Taking the bridge side down drops carrier on both ends: nothing passes either way."""
    run_cmd(["ip", "-n", layout.hub_namespace, "link", "set", device, "up" if up else "down"])


# ---------------------------------------------------------------- taking down


def delete_namespace(namespace: str) -> str:
    """Delete a namespace (its links and qdiscs go with it); what happened, as one line."""
    deleted = run_cmd(["ip", "netns", "del", namespace], check=False)
    if deleted.returncode == 0:
        return f"deleted namespace {namespace} (with its links and qdiscs)"
    return f"could not delete namespace {namespace}: {deleted.stderr.strip()}"


def delete_root_links(layout: Layout) -> list[str]:
    """Delete the cluster's links left in the root namespace; one line per link deleted."""
    return [
        f"deleted link {link}"
        for link in root_links(layout)
        if run_cmd(["ip", "link", "del", link], check=False).returncode == 0
    ]
