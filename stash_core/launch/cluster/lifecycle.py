"""Emulated clusters brought up and taken down: namespaces, veth links, tc shaping and an sshd per node.

Topology of the cluster called "default" (a cluster called NAME has stash-NAME-hub, stash-NAME-n<i>,
svh-NAME and its own 10.213.K.0/24; see names.py):

    root namespace              stash-hub namespace                  stash-n<i> namespace
    stash-vh 10.213.0.1/24 <-veth-> stash-vhb -+
                                               stash-br0 (bridge)
                                    stash-v<i>b -+ <-veth-> stash0 10.213.0.(10+i)

The bridge lives in its own namespace rather than in the root one because a host with
br_netfilter loaded (Docker, Kubernetes) sends bridged frames through the root namespace's
iptables FORWARD chain, whose policy is often DROP; a fresh namespace has no rules, so node to
node traffic flows whatever the host firewall says. The launching machine reaches the nodes
through the root veth (10.213.0.1), which is its own address on the cluster's subnet.

Each cluster touches only its own parts: `down` removes the namespaces and link of its name, and
only when the hub's bridge names its state folder as owner (or names none, or an owner whose
state is gone). `up` refuses a name or an address range in use; ups on one machine take turns.
state.json in state_dir records what was made, written after each step, so that a setup
interrupted half-way can still be taken down.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.interrupts import held_interrupts, stop_exception
from stash_core.launch.cluster import net, sshd
from stash_core.launch.cluster.names import (
    DEFAULT_NAME,
    DEFAULT_STATE_DIR,
    DEFAULT_SUBNET,
    MAX_NODES,
    NAMED_SUBNETS,
    ROOT_VETH_PEER,
    Layout,
    check_name,
    cluster_option,
    parse_subnet,
    state_dir_for,
)
from stash_core.launch.cluster.shaping import (
    check_loss,
    netem_supported,
    parse_bandwidth_bps,
    parse_latency_us,
    shape_node,
)
from stash_core.launch.cluster.state import (
    DamagedState,
    check_state_dir_path,
    load_state,
    new_node,
    new_state,
    refuse_foreign_files,
    refuse_shared_folder,
    remove_state_files,
    resolve,
    save_state,
    state_path,
)
from stash_core.launch.cluster.status import (
    cluster_status,
)
from stash_core.proc import end_pids

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
    if sshd.sshd_path() is None:
        return "'sshd' not found (apt-get install openssh-server)"
    if probe_namespace:
        return net.namespace_problem()
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
    state_dir: Path | None = None,
    name: str | None = None,
    subnet: str | None = None,
) -> dict:
    """Create the emulated cluster `name` (default "default"): `nodes` namespaces with shaped links and sshd.

    state_dir defaults to the name's own folder; subnet (a /24) to 10.213.0.0/24 for the default
    cluster and the first free 10.213.K.0/24 for a named one. Returns cluster_status(). A setup
    that fails half-way is taken down again before the error is raised. UsageError for bad
    arguments, missing root/tools, a name, state folder or address range already in use.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"nodes must be between 1 and {MAX_NODES}, got {nodes!r}")
    shaping = {
        "rate_bps": parse_bandwidth_bps(bandwidth),
        "latency_us": parse_latency_us(latency),
        "loss_pct": check_loss(loss_pct),
    }
    cpu_sets = node_cpu_sets(nodes) if split_cpus else None
    name = check_name(DEFAULT_NAME if name is None else name)
    subnet = parse_subnet(subnet) if subnet is not None else None
    # the folder as the user knows it: the option that named it, else the cluster's own
    label = f"--state-dir {state_dir}" if state_dir is not None else None
    # absolute: sshd reads a relative AuthorizedKeysFile from the home folder, ssh from where it runs
    state_dir = (Path(state_dir) if state_dir is not None else state_dir_for(name)).absolute()
    label = label or f"the state folder {state_dir} of the emulated cluster {name}"
    check_state_dir_path(state_dir, label)
    problem = cluster_support_problem()
    if problem:
        raise UsageError(problem)
    with _machine_lock():  # two ups at once would pick the same free address range
        _refuse_taken(name, state_dir)
        refuse_foreign_files(state_dir, label)
        refuse_shared_folder(state_dir, label)
        layout = Layout(name, subnet or _free_subnet(name))
        net.check_subnet_free(layout)
        made_state_dir = not state_dir.is_dir()  # a folder the user made is left in place by down
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:  # a read-only file system, a folder of another user
            raise UsageError(f"{label}: cannot make the folder ({error.strerror or error})") from None
        state = new_state(state_dir, cpu_sets, layout, made_state_dir)
        save_state(state_dir, state)
        try:
            _build(state_dir, state, layout, nodes, shaping, cpu_sets)
            return cluster_status(state_dir)  # inside: a Ctrl-C while it reads the cluster takes it down too
        except BaseException:
            cluster_down(state_dir)
            raise


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """One `cluster up` at a time on this machine (an flock, released when the holder exits)."""
    lock_dir = DEFAULT_STATE_DIR.parent if DEFAULT_STATE_DIR.parent.is_dir() else Path("/tmp")
    with open(lock_dir / "stash-cluster.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _refuse_taken(name: str, state_dir: Path) -> None:
    """UsageError when the state folder holds a cluster, or parts of a cluster `name` exist."""
    recorded = load_state(state_dir)
    if recorded is not None or state_path(state_dir).exists():
        other = (recorded or {}).get("name", name)
        where = "" if state_dir == state_dir_for(other) else f" --state-dir {state_dir}"
        raise UsageError(
            f"an emulated cluster {other} already exists with its state in {state_dir}; take it down "
            f"first (stash cluster down{cluster_option(other)}{where})"
        )
    layout = Layout(name)
    existing = net.live_namespaces(layout) + net.root_links(layout)
    if existing:
        raise UsageError(
            f"an emulated cluster {name} already exists ({', '.join(existing)}); take it down first "
            f"(stash cluster down{cluster_option(name)}) or choose another name with --name"
        )


def _free_subnet(name: str) -> str:
    """The default cluster's 10.213.0.0/24; for another, the first 10.213.K.0/24 no address here uses."""
    if name == DEFAULT_NAME:
        return DEFAULT_SUBNET
    for index in range(1, 255):
        candidate = NAMED_SUBNETS.format(index)
        if not net.subnet_users(Layout(name, candidate).network):
            return candidate
    raise UsageError("no free address range 10.213.1.0/24 .. 10.213.254.0/24; choose one with --subnet")


def _build(
    state_dir: Path, state: dict, layout: Layout, nodes: int, shaping: dict, cpu_sets: list[list[int]] | None
) -> None:
    state["key_path"] = str(sshd.make_client_key(state_dir))
    _build_hub(state_dir, state, layout)
    for index in range(nodes):
        _add_node(state_dir, state, layout, index, shaping, cpu_sets[index] if cpu_sets else None)
    for index in range(nodes):
        state["nodes"][index]["sshd_pid"] = sshd.start_sshd(state_dir, index, layout)
        save_state(state_dir, state)
    state["ssh_config"] = str(sshd.write_client_config(state_dir, nodes, layout))
    save_state(state_dir, state)


def _build_hub(state_dir: Path, state: dict, layout: Layout) -> None:
    """The hub namespace with its bridge, and the launcher's link into it; each part recorded once made."""
    net.add_namespace(layout.hub_namespace)
    state["hub_namespace"] = layout.hub_namespace
    save_state(state_dir, state)
    net.add_bridge_and_root_veth(layout, state_dir)
    state["root_veth"] = layout.root_veth
    save_state(state_dir, state)
    net.connect_root_veth(layout)
    state["netem"] = netem_supported(layout.hub_namespace, ROOT_VETH_PEER)


def _add_node(
    state_dir: Path, state: dict, layout: Layout, index: int, shaping: dict, cpus: list[int] | None
) -> None:
    """Node index's namespace, its shaped link into the hub; each part recorded once made."""
    net.add_namespace(layout.node_namespace(index))
    node = new_node(index, shaping, cpus, layout)
    state["nodes"].append(node)
    save_state(state_dir, state)
    node["hub_veth"] = net.add_node_veth(layout, index)
    save_state(state_dir, state)
    net.connect_node_veth(layout, index)
    shape_node(state, index)
    save_state(state_dir, state)


# ---------------------------------------------------------------- down


LEFT_ALONE = "left the namespaces of the emulated cluster"  # its action's words: the cluster is still up


def cluster_down(state_dir: Path | None = None, name: str | None = None) -> list[str]:
    """Take one emulated cluster down: its processes, namespaces, links (with their qdiscs), state files.

    The cluster is the one state_dir records, else `name`'s (default "default"). Works from
    state.json and, without it, from the cluster's names, but leaves alone the namespaces of a
    same-named cluster that another, still existing, state folder owns. Safe to run twice.
    Returns what it did, one line per action.
    """
    name, state_dir = resolve(name, state_dir)
    # A Ctrl-C part way would leave half a cluster (its links without their namespaces, state files gone):
    # held until the whole cluster is down, then raised.
    with held_interrupts() as received:
        actions = _take_down(name, state_dir)
    if received:
        raise stop_exception(received[0])
    return actions


def _take_down(name: str, state_dir: Path) -> list[str]:
    actions: list[str] = []
    try:
        state = load_state(state_dir) or {}
    except DamagedState as damaged:  # taken down by its names alone, as without a state
        state = {}
        actions.append(f"{damaged.what}: taken down by the cluster's names; the file is left, to remove by "
                       "hand")  # fmt: skip
    layout = Layout.of_state(state) if state else Layout(name)
    if state:
        with contextlib.suppress(OSError):  # a profile on it now hears it is gone
            save_state(state_dir, {**state, "taken_down": True})
    for node in state.get("nodes", []):
        pid = node.get("sshd_pid")
        if sshd.is_our_sshd(pid, state_dir, node["index"]):  # only if still ours: pids get reused
            _end_processes([pid], f"sshd of {node['namespace']}", actions)
    owner = _foreign_owner(layout, state_dir)
    if owner is not None:
        actions.append(
            f"{LEFT_ALONE} {name} alone: they belong to the one whose state is in {owner} (`stash cluster "
            f"down --name {name} --state-dir {owner}` takes it down)"
        )
    else:
        for namespace in net.live_namespaces(layout):
            _end_processes(net.namespace_pids(namespace), namespace, actions)
            actions.append(net.delete_namespace(namespace))
        actions += net.delete_root_links(layout)
    actions += remove_state_files(state_dir)
    return actions


def _foreign_owner(layout: Layout, state_dir: Path) -> str | None:
    """The state folder of another live cluster that owns the hub of this name, or None."""
    owner = net.hub_owner(layout)
    if owner is None or owner == net.owner_token(state_dir):
        return None
    if not owner.startswith("/") or state_path(Path(owner)).exists():
        return owner
    return None  # its owner's state is gone: an orphan, anyone's to remove


def _end_processes(pids: list[int], label: str, actions: list[str]) -> None:
    """End pids (TERM, then KILL); say what was ended and what could not be in actions."""
    pids = [pid for pid in pids if pid != os.getpid()]
    if not pids:
        return
    alive = end_pids(pids, _KILL_GRACE_S)
    actions.append(f"ended {len(pids) - len(alive)} process(es) in {label}: {' '.join(map(str, pids))}")
    if alive:
        actions.append(f"could not end process(es) in {label}: {' '.join(map(str, alive))}")
