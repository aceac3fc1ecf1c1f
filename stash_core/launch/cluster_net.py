"""Network namespaces and veth links of the emulated cluster: the hub and its bridge, one namespace per node.

Nothing here records anything: cluster.py writes state.json between these steps, so that a setup
interrupted half-way can be taken down again.
"""

from __future__ import annotations

import ipaddress
import os

from stash_core.errors import UsageError
from stash_core.launch.cluster_cmd import run_cmd
from stash_core.launch.cluster_names import (
    BRIDGE,
    HUB_NAMESPACE,
    NAMESPACE_RE,
    NODE_IFNAME,
    ROOT_ADDRESS,
    ROOT_LINK_RE,
    ROOT_VETH,
    ROOT_VETH_PEER,
    SUBNET_PREFIX,
    hub_veth,
    node_address,
    node_namespace,
)

_HUB = ["ip", "-n", HUB_NAMESPACE]


# ---------------------------------------------------------------- what exists


def live_namespaces() -> list[str]:
    """Every stash-n*/stash-hub namespace that exists now, recorded or not."""
    listed = run_cmd(["ip", "netns", "list"], check=False).stdout
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    return sorted(name for name in names if NAMESPACE_RE.match(name))


def root_links() -> list[str]:
    """Links of ours in the root namespace (the launcher's end of its link into the hub)."""
    listed = run_cmd(["ip", "-o", "link", "show"], check=False).stdout
    names = []
    for line in listed.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return [name for name in names if ROOT_LINK_RE.match(name)]


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


def check_subnet_free() -> None:
    """UsageError when an address of this machine already lies in the cluster's subnet."""
    listed = run_cmd(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    for line in listed.splitlines():
        words = line.split()
        if "inet" in words:
            address = words[words.index("inet") + 1].split("/")[0]
            if ipaddress.ip_address(address) in ipaddress.ip_network(SUBNET_PREFIX + "0/24"):
                raise UsageError(f"subnet {SUBNET_PREFIX}0/24 is already in use on this machine ({words[1]})")


# ---------------------------------------------------------------- making


def add_namespace(namespace: str) -> None:
    run_cmd(["ip", "netns", "add", namespace])


def add_bridge_and_root_veth() -> None:
    """The hub's bridge, and a veth pair from the root namespace (ROOT_VETH) into the hub."""
    run_cmd([*_HUB, "link", "set", "lo", "up"])
    run_cmd([*_HUB, "link", "add", BRIDGE, "type", "bridge", "forward_delay", "0", "stp_state", "0"])
    run_cmd([*_HUB, "link", "set", BRIDGE, "up"])
    run_cmd(["ip", "link", "add", ROOT_VETH, "type", "veth",
             "peer", "name", ROOT_VETH_PEER, "netns", HUB_NAMESPACE])  # fmt: skip


def connect_root_veth() -> None:
    """Give the launcher its address on the cluster's subnet and plug its link into the bridge."""
    run_cmd(["ip", "addr", "add", f"{ROOT_ADDRESS}/24", "dev", ROOT_VETH])
    run_cmd(["ip", "link", "set", ROOT_VETH, "up"])
    run_cmd([*_HUB, "link", "set", ROOT_VETH_PEER, "master", BRIDGE, "up"])


def add_node_veth(index: int) -> str:
    """A veth pair from the hub into node index's namespace (NODE_IFNAME inside); the hub end's name."""
    namespace, hub_end = node_namespace(index), hub_veth(index)
    run_cmd(["ip", "-n", namespace, "link", "set", "lo", "up"])
    run_cmd([*_HUB, "link", "add", hub_end, "type", "veth",
             "peer", "name", NODE_IFNAME, "netns", namespace])  # fmt: skip
    return hub_end


def connect_node_veth(index: int) -> None:
    """Give node index its address and plug its link into the bridge."""
    inside = ["ip", "-n", node_namespace(index)]
    run_cmd([*inside, "addr", "add", f"{node_address(index)}/24", "dev", NODE_IFNAME])
    run_cmd([*inside, "link", "set", NODE_IFNAME, "up"])
    run_cmd([*_HUB, "link", "set", hub_veth(index), "master", BRIDGE, "up"])


def set_hub_veth(device: str, up: bool) -> None:
    """Taking the bridge side down drops carrier on both ends: nothing passes either way."""
    run_cmd([*_HUB, "link", "set", device, "up" if up else "down"])


# ---------------------------------------------------------------- taking down


def delete_namespace(namespace: str) -> str:
    """Delete a namespace (its links and qdiscs go with it); what happened, as one line."""
    deleted = run_cmd(["ip", "netns", "del", namespace], check=False)
    if deleted.returncode == 0:
        return f"deleted namespace {namespace} (with its links and qdiscs)"
    return f"could not delete namespace {namespace}: {deleted.stderr.strip()}"


def delete_root_links() -> list[str]:
    """Delete our links left in the root namespace; one line per link deleted."""
    return [
        f"deleted link {link}"
        for link in root_links()
        if run_cmd(["ip", "link", "del", link], check=False).returncode == 0
    ]
