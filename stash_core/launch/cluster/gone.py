"""Whether an emulated cluster is still there, and the one line that says it is gone.

A cluster is gone when its state folder records no nodes or that it is being taken down, when a
namespace it recorded no longer exists, or when its hub now belongs to another state folder (a
cluster of the same name brought up again elsewhere). The ssh targets of a cluster are remembered
with its name, so that a launch whose nodes stop answering can say "the emulated cluster NAME is
gone" instead of "cannot reach host".
"""

from __future__ import annotations

import time
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch.cluster import net
from stash_core.launch.cluster.names import Layout, cluster_option, gone_message
from stash_core.launch.cluster.state import load_state
from stash_core.launch.ssh import SshTarget

SETTLE_S = 2.0
# ssh_config path of a cluster's targets -> (cluster name, state folder); filled by cluster_hosts.
_REMEMBERED: dict[str, tuple[str, Path]] = {}


def is_gone(state_dir: Path) -> bool:
    """Whether the cluster recorded in state_dir has lost its state, a namespace or its hub."""
    state = load_state(Path(state_dir))
    if not state or not state.get("nodes") or state.get("taken_down"):
        return True
    layout = Layout.of_state(state)
    recorded = {layout.hub_namespace} | {node["namespace"] for node in state["nodes"]}
    if not recorded <= set(net.live_namespaces(layout)):
        return True
    owner = net.hub_owner(layout)  # None: made before owners were recorded
    return owner is not None and owner != net.owner_token(Path(state_dir))


def require_present(name: str, state_dir: Path) -> None:
    """UsageError with the one line of gone_message when the cluster is gone."""
    if is_gone(state_dir):
        said = _gone_line(name, state_dir)
        try:
            others = [other for other in net.live_cluster_names() if other != name]
        except OSError:  # no `ip` here (no iproute2): then no cluster is up either
            others = []
        if others and said == gone_message(name):  # the one meant may be up under another name
            said += f"; up here: {', '.join(others)} (--cluster-name NAME chooses one)"
        raise UsageError(said)


def _gone_line(name: str, state_dir: Path) -> str:
    """gone_message, with the way back where a state is left behind: `stash cluster up` refuses a name whose
    state still exists, so the cluster is taken down first."""
    state = load_state(Path(state_dir))
    if state and state.get("nodes") and not state.get("taken_down"):
        option = cluster_option(name)
        return (
            f"the emulated cluster {name} is not up: it lost a namespace or its hub (take it down and up "
            f"again: sudo stash cluster down{option}, then sudo stash cluster up --nodes N{option})"
        )
    return gone_message(name)


def no_state_message(name: str, state_dir: Path, flag: str, given: bool) -> str | None:
    """The one line for a state folder that holds no cluster's state while a cluster `name` exists (with its
    state elsewhere): never "gone" or "not up" for a cluster that exists. None when the folder holds a state,
    or when no cluster of that name exists (gone_message and "not up" are then true). `flag` is the option
    that names a state folder in this command; `given`: whether the user gave state_dir with it (else it is
    the cluster's own folder)."""
    if load_state(state_dir) is not None:
        return None
    try:
        up = bool(net.live_namespaces(Layout(name)))
        owner = net.hub_owner(Layout(name)) if up else None
    except (OSError, MeasurementError):  # no `ip` here: no cluster either
        return None
    if not up:
        return None
    elsewhere = Path(owner) if owner and owner.startswith("/") and Path(owner) != state_dir else None
    where = f"its state is in {elsewhere}" if elsewhere else "its state is elsewhere"
    if given:
        return (
            f"{flag} {state_dir} holds no emulated cluster (no state.json there); the emulated cluster "
            f"{name} exists and {where}"
        )
    return f"the emulated cluster {name} exists but {where}, not in {state_dir}: give that folder with {flag}"


def remember(targets: list[SshTarget], name: str, state_dir: Path) -> None:
    for target in targets:
        if target.config_file is not None:
            _REMEMBERED[str(target.config_file)] = (name, Path(state_dir))


def gone_reason(target: SshTarget, settle_s: float | None = None) -> str | None:
    """gone_message of the cluster target belongs to when that cluster is gone; else None.

    A cluster being taken down loses its sshd before its namespaces: a node that just stopped
    answering is watched for settle_s before it is called merely unreachable.
    """
    known = _REMEMBERED.get(str(target.config_file)) if target.config_file is not None else None
    if known is None:
        return None
    name, state_dir = known
    deadline = time.monotonic() + (SETTLE_S if settle_s is None else settle_s)
    while not is_gone(state_dir):
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)
    return _gone_line(name, state_dir)
