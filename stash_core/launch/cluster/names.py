"""Names and addresses of an emulated cluster's parts (the topology is drawn in lifecycle.py).

Several clusters can live on one machine, each under its own name: its own namespaces, its own
address range (a /24), its own link in the root namespace and its own state folder. The cluster
called "default" keeps the historical names (stash-hub, stash-n<i>, stash-vh, 10.213.0.0/24,
/run/stash-cluster); a cluster called NAME has stash-NAME-hub, stash-NAME-n<i>, svh-NAME, the first
free 10.213.K.0/24 (K >= 1) and /run/stash-cluster-NAME. Names inside a cluster's namespaces (the
bridge, the hub ends of the links, the node interface) are the same in every cluster: namespaces
keep them apart. Nodes are numbered from 0.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.pathargs import env_path

DEFAULT_NAME = "default"
DEFAULT_STATE_DIR = Path("/run/stash-cluster")
STATE_DIR_ENV = "STASH_CLUSTER_STATE"  # the default cluster's state folder, when set
DEFAULT_SUBNET = "10.213.0.0/24"
NAMED_SUBNETS = "10.213.{}.0/24"  # where named clusters get their range, K = 1 .. 254
MAX_NODES = 16
BRIDGE = "stash-br0"  # in the hub namespace
ROOT_VETH_PEER = "stash-vhb"  # the hub end of the launcher's link
NODE_IFNAME = "stash0"  # the same name on every node, so GLOO_SOCKET_IFNAME=stash0 works everywhere
SSH_USER = "root"
# Environment every process on a node should see: gloo/NCCL/TensorPipe would otherwise pick an
# address from the machine's host name, which is not reachable inside a namespace.
WORKER_ENV = {
    "GLOO_SOCKET_IFNAME": NODE_IFNAME,
    "NCCL_SOCKET_IFNAME": NODE_IFNAME,
    "TP_SOCKET_IFNAME": NODE_IFNAME,
}
# 1..11 characters: "svh-" + name must fit a link name (15 characters).
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,10}$")
# Any namespace of any Stash cluster, and the cluster it belongs to (group "name"; None: default).
ANY_NAMESPACE_RE = re.compile(r"^stash-(?:(?P<name>[a-z][a-z0-9]{0,10})-)?(?:n\d+|hub)$")


def check_name(name: object) -> str:
    """A cluster name as given, or UsageError saying what a name may be."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(
            f"invalid cluster name {name!r}: 1 to 11 lowercase letters and digits, starting with a letter"
        )
    return name


# The private ranges of RFC 1918: ipaddress's is_private also counts loopback (127/8), "this network"
# (0/8), link-local and reserved ranges, where a cluster either fails to come up or takes addresses no
# machine should route.
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(text) for text in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)


def parse_subnet(text: object) -> str:
    """A private IPv4 /24 ("10.213.7.0/24", or "10.213.7.0") as "A.B.C.0/24"; UsageError otherwise."""
    try:
        network = ipaddress.IPv4Network(str(text) if "/" in str(text) else f"{text}/24")
    except ValueError:
        network = None
    private = network is not None and any(network.subnet_of(allowed) for allowed in PRIVATE_RANGES)
    if network is None or network.prefixlen != 24 or not private:
        raise UsageError(
            f"invalid subnet {text!r}: expected a private IPv4 /24 (in 10.0.0.0/8, 172.16.0.0/12 or "
            "192.168.0.0/16) such as 10.213.7.0/24"
        )
    return str(network)


def state_dir_for(name: str) -> Path:
    """Where cluster `name` keeps its state unless told otherwise."""
    if name == DEFAULT_NAME:
        return env_path(STATE_DIR_ENV) or DEFAULT_STATE_DIR
    return DEFAULT_STATE_DIR.with_name(f"{DEFAULT_STATE_DIR.name}-{name}")


def name_of_state_dir(state_dir: Path) -> str:
    """The name a state folder's path gives away (/run/stash-cluster-NAME), else the default name."""
    prefix = f"{DEFAULT_STATE_DIR.name}-"
    rest = Path(state_dir).name[len(prefix) :] if Path(state_dir).name.startswith(prefix) else ""
    return rest if NAME_RE.match(rest) else DEFAULT_NAME


def gone_message(name: str) -> str:
    """The one line a profile or probe prints when its cluster is not there (any more)."""
    return f"the emulated cluster {name} is not up (start it: sudo stash cluster up --nodes N --name {name})"


def cluster_option(name: str) -> str:
    """The option that names a cluster on the command line ("" for the default one)."""
    return "" if name == DEFAULT_NAME else f" --name {name}"


@dataclass(frozen=True)
class Layout:
    """Every name and address of one cluster, from its name and address range."""

    name: str = DEFAULT_NAME
    subnet: str = DEFAULT_SUBNET

    @classmethod
    def of_state(cls, state: dict) -> Layout:
        """The layout a state.json records (states written before names: the default cluster)."""
        return cls(state.get("name") or DEFAULT_NAME, state.get("subnet") or DEFAULT_SUBNET)

    @property
    def default(self) -> bool:
        return self.name == DEFAULT_NAME

    @property
    def prefix(self) -> str:
        return "stash-" if self.default else f"stash-{self.name}-"

    @property
    def hub_namespace(self) -> str:
        return self.prefix + "hub"

    @property
    def root_veth(self) -> str:
        """The launcher's end of its link into the hub, in the root namespace."""
        return "stash-vh" if self.default else f"svh-{self.name}"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def address_prefix(self) -> str:
        """The first three octets and a dot, e.g. "10.213.0."."""
        return str(self.network.network_address).rsplit(".", 1)[0] + "."

    @property
    def root_address(self) -> str:
        return self.address_prefix + "1"

    def node_namespace(self, index: int) -> str:
        return f"{self.prefix}n{index}"

    def node_address(self, index: int) -> str:
        return f"{self.address_prefix}{10 + index}"

    def owns_namespace(self, namespace: str) -> bool:
        match = ANY_NAMESPACE_RE.match(namespace)
        return bool(match) and (match.group("name") or DEFAULT_NAME) == self.name

    def owns_root_link(self, link: str) -> bool:
        if self.default:  # also the names older versions left in the root namespace
            return bool(re.match(r"^stash-(?:vh|br0|v\d+[bn])$", link))
        return link == self.root_veth


DEFAULT_LAYOUT = Layout()
# The default cluster's names, as importable constants.
HUB_NAMESPACE = DEFAULT_LAYOUT.hub_namespace
ROOT_VETH = DEFAULT_LAYOUT.root_veth
ROOT_ADDRESS = DEFAULT_LAYOUT.root_address


def node_namespace(index: int) -> str:
    """Node index's namespace in the default cluster."""
    return DEFAULT_LAYOUT.node_namespace(index)


def node_address(index: int) -> str:
    """Node index's address in the default cluster."""
    return DEFAULT_LAYOUT.node_address(index)


def hub_veth(index: int) -> str:
    """The bridge-side end of node index's link, in the hub namespace (every cluster)."""
    return f"stash-v{index}b"


def node_dir(state_dir: Path, index: int) -> Path:
    """Where node index keeps its sshd config, host key, pid file and log."""
    return Path(state_dir) / f"n{index}"
