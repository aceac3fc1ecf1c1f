"""The machines of a multi-machine run: remote hosts given by name, or the nodes of the emulated cluster.

Both end up as the same RemoteHosts: ssh targets, the python and directory to run from on them,
the environment the workers get, optional per-node CPU sets. The profiler never asks which kind
it has; only `link` (the emulated link's shaping, when known) is recorded with the result.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from stash_core import PACKAGE_PARENT, __version__
from stash_core.analysis.coherence import LINKS_CHANGED  # its network stall is no fit's (store/reads.py)
from stash_core.errors import MeasurementError, UsageError
from stash_core.launch import cluster
from stash_core.launch.cluster.gone import gone_reason, no_state_message, require_present
from stash_core.launch.cluster.names import DEFAULT_NAME, check_name, cluster_option, state_dir_for
from stash_core.launch.cluster.state import resolve
from stash_core.launch.ssh import NOT_INSTALLED_FIX, SshTarget, parse_target, remote_check, validate_user
from stash_core.launch.torchrun import LOOPBACK, resolves_to_loopback
from stash_core.spec import COMM_TIMEOUT_S, ProfileSpec
from stash_core.terminal import clipped, one_line

DEFAULT_REMOTE_PYTHON = "python3"
DEFAULT_COMM_TIMEOUT_S = 60
HOST_CHECK_TIMEOUT_S = 60.0
# An absolute path, or a command name found on the remote PATH: no spaces, quotes or shell syntax.
_PYTHON_RE = re.compile(r"^(?:/[A-Za-z0-9._+/-]+|[A-Za-z0-9._+-]+)$")
_ENV_VALUE_RE = re.compile(r"^[^\x00\n\r]*$")


def remote_hosts(spec: ProfileSpec, cluster_state: Path | None = None) -> RemoteHosts | None:
    """The machines of a multi-machine profile or probe (its spec's cluster, or its hosts), or None for one on
    this machine: the one way Stash builds them from what the user gave."""
    if spec.cluster == "emulated":
        return hosts_from_cluster(
            spec.nodes, cluster_state, spec.remote_python, spec.remote_workdir, spec.master_port,
            spec.comm_timeout_s, name=cluster_name_of(spec),
        )  # fmt: skip
    if spec.hosts:
        return hosts_from_names(
            spec.hosts, spec.ssh_user, spec.ssh_key, spec.remote_python, spec.remote_workdir,
            spec.master_addr, spec.master_port, spec.comm_timeout_s, ssh_config=spec.ssh_config,
        )  # fmt: skip
    return None


def default_cluster_state_dir(name: str | None = None) -> Path:
    """The state folder of emulated cluster `name` (None: the default one, $STASH_CLUSTER_STATE if set)."""
    return state_dir_for(check_name(name) if name is not None else DEFAULT_NAME)


def cluster_name_of(spec_or_args: object) -> str | None:
    """The emulated cluster a profile or probe names (--cluster-name), None for the default one."""
    return getattr(spec_or_args, "cluster_name", None)


def validate_python(text: str) -> str:
    """A remote python: an absolute path or a plain command name (e.g. python3)."""
    if not isinstance(text, str) or not _PYTHON_RE.match(text) or text.startswith("-"):
        raise UsageError(
            f"invalid --python {text!r}: give an absolute path or a command name such as python3"
        )
    return text


def validate_workdir(text: str) -> str:
    """A remote directory: absolute, or relative to the remote user's home; one line, no NUL."""
    if not isinstance(text, str) or not text or not _ENV_VALUE_RE.match(text) or text.startswith("-"):
        raise UsageError(f"invalid --workdir {text!r}: give a directory path on the hosts")
    return text


@dataclass
class RemoteHosts:
    """Where the runs of a multi-machine profile go; node i of a run is targets[i]."""

    targets: list[SshTarget]
    python: str
    workdir: str
    env: dict[str, str] = field(default_factory=dict)
    cpu_sets: list[list[int]] | None = None
    master_addr: str | None = None  # rendezvous address of node 0 as the others reach it
    master_port: int | None = None  # None: a fresh free port per run
    comm_timeout_s: int = DEFAULT_COMM_TIMEOUT_S
    label: str = ""
    link: dict | None = None  # emulated link: rate_bps, latency_us, loss_pct, netem

    @property
    def link_gbps(self) -> float | None:
        """The emulated link's rate (between machines), None where it is not known."""
        rate = (self.link or {}).get("rate_bps")
        return rate / 1e9 if rate else None

    @property
    def host_names(self) -> list[str]:
        return [target.host for target in self.targets]

    @property
    def host_texts(self) -> list[str]:
        """Each machine as it is given back to Stash ([user@]host[:port]): two on one address told apart."""
        return [str(target) for target in self.targets]

    def rendezvous_addr(self) -> str:
        """Node 0's address as the other nodes reach it: as given, else loopback where every host is this
        machine (each name resolves to loopback here, `--hosts vm,vm`: then nothing listens beyond it),
        else node 0's host."""
        if self.master_addr:
            return self.master_addr
        if all(resolves_to_loopback(name) for name in self.host_names):
            return LOOPBACK
        return self.targets[0].host

    def for_nodes(self, nodes: int) -> RemoteHosts:
        """The first `nodes` machines (R0 and R1 run on the first one alone)."""
        return RemoteHosts(
            self.targets[:nodes], self.python, self.workdir, dict(self.env),
            self.cpu_sets[:nodes] if self.cpu_sets else None, self.master_addr, self.master_port,
            self.comm_timeout_s, self.label, self.link,
        )  # fmt: skip

    def capacity(self, info: dict, device: str, node: int = 0) -> int:
        """Workers a node can hold: its GPUs, or its CPU cores (its CPU set on a split cluster)."""
        if device == "cuda":
            return int(info.get("gpu_count") or 0)
        if self.cpu_sets:
            return len(self.cpu_sets[node])
        return int(info.get("cpu_count") or 1)


def refuse_unused_user(user: str | None, given: list[SshTarget]) -> None:
    """UsageError where --ssh-user is given but every host names its own user (user@host): it would be used
    by none, as if it had not been given."""
    if user is not None and given and all(target.user is not None for target in given):
        named = ", ".join(f"{target.user}@{target.host}" for target in given[:3])
        named += ", ..." if len(given) > 3 else ""
        raise UsageError(f"--ssh-user {user}: every host names its own user ({named}), so none would use it; "
                         "leave it out, or the user from the host")  # fmt: skip


def hosts_from_names(
    names: list[str],
    user: str | None = None,
    key_path: str | None = None,
    python: str | None = None,
    workdir: str | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    comm_timeout_s: int = DEFAULT_COMM_TIMEOUT_S,
    ssh_config: str | None = None,
) -> RemoteHosts:
    """RemoteHosts for "[user@]host[:port]" names, reached with `ssh_config` (ssh -F) where given; everything
    validated before any ssh runs."""
    if not names:
        raise UsageError("--hosts: give at least one host")
    if user is not None:
        validate_user(user)
    key = Path(key_path).expanduser() if key_path else None
    config = Path(ssh_config).expanduser() if ssh_config else None
    given = [parse_target(name, key_path=key, config_file=config) for name in names]
    refuse_unused_user(user, given)
    targets = [replace(target, user=user) if user is not None and target.user is None else target
               for target in given]  # fmt: skip
    return RemoteHosts(
        targets=targets,
        python=validate_python(python or DEFAULT_REMOTE_PYTHON),
        workdir=validate_workdir(workdir or "."),
        master_addr=_checked_master_addr(master_addr),
        master_port=_checked_port(master_port),
        comm_timeout_s=_checked_timeout(comm_timeout_s),
        label="hosts " + ",".join(names),
    )


def hosts_from_cluster(
    nodes: int | None,
    state_dir: Path | None = None,
    python: str | None = None,
    workdir: str | None = None,
    master_port: int | None = None,
    comm_timeout_s: int = DEFAULT_COMM_TIMEOUT_S,
    name: str | None = None,
) -> RemoteHosts:
    """RemoteHosts for the first `nodes` nodes (None: every one) of emulated cluster `name` (this python,
    this checkout).

    The cluster is the one state_dir records, else `name`'s own (None: "default"). UsageError with
    the one line "the emulated cluster NAME is not up (...)" when it has no state or lost its namespaces;
    one that names the folder when it holds no state while a cluster NAME exists (its state elsewhere).
    """
    given = state_dir is not None
    name, state_dir = resolve(name, state_dir)
    missing = no_state_message(name, state_dir, "--cluster-state", given)
    if missing:  # a wrong folder is not a cluster gone
        raise UsageError(missing)
    require_present(name, state_dir)
    targets = cluster.cluster_hosts(state_dir, name)
    nodes = len(targets) if nodes is None else nodes
    if nodes > len(targets):
        raise UsageError(f"--nodes {nodes}: the emulated cluster {name} has {len(targets)} node(s)")
    status = cluster.cluster_status(state_dir, name)
    if not status["up"]:
        raise UsageError(
            f"the emulated cluster {name} is not completely up (see `stash cluster status"
            f"{cluster_option(name)}`)"
        )
    return RemoteHosts(
        targets=targets[:nodes],
        python=validate_python(python or sys.executable),
        workdir=validate_workdir(workdir or PACKAGE_PARENT),
        env=dict(cluster.WORKER_ENV),
        cpu_sets=(status.get("cpu_sets") or [])[:nodes] or None,
        master_addr=targets[0].host,
        master_port=_checked_port(master_port),
        comm_timeout_s=_checked_timeout(comm_timeout_s),
        label=f"emulated cluster {name} ({nodes} of {len(targets)} nodes)",
        link=bottleneck_link(status, nodes),
    )


def bottleneck_link(status: dict, nodes: int) -> dict:
    """The link that limits a run on the first `nodes` nodes of a cluster (its status): the lowest rate among
    them (None only when none is limited), the longest delay and the highest loss. Node 0's alone would
    overstate the network when another node used is shaped slower."""
    shapings = [node["shaping"] for node in status["nodes"][:nodes]]
    rates_bps = [shaping["rate_bps"] for shaping in shapings if shaping.get("rate_bps")]
    return {
        "rate_bps": min(rates_bps) if rates_bps else None,
        "latency_us": max((shaping.get("latency_us") or 0 for shaping in shapings), default=0),
        "loss_pct": max((shaping.get("loss_pct") or 0.0 for shaping in shapings), default=0.0),
        "netem": bool(status.get("netem")),
    }




def link_change_warning(
    remote: RemoteHosts | None, spec: ProfileSpec, cluster_state: Path | None
) -> str | None:
    """A warning when the emulated links of `remote` are shaped otherwise now than when it was built (a
    `stash cluster set` during the run): its figures then mix two networks. None when unchanged, for other
    machines, or when the cluster can no longer be read (its own error says so)."""
    if remote is None or remote.link is None or spec.cluster != "emulated":
        return None
    try:
        name, state_dir = resolve(cluster_name_of(spec), cluster_state)
        now = bottleneck_link(cluster.cluster_status(state_dir, name), len(remote.targets))
    except (UsageError, MeasurementError, OSError):
        return None
    if now == remote.link:
        return None
    return (
        f"{LINKS_CHANGED} (from {_link_text(remote.link)} to "
        f"{_link_text(now)}): its figures may mix both, and the first is the one recorded"
    )


def _link_text(link: dict) -> str:
    rate = link.get("rate_bps")
    rate_text = f"rate {rate / 1e6:g} Mbit/s" if rate else "no rate limit"
    if not link.get("netem"):  # without the netem qdisc only the rate is emulated: a delay asked is not there
        return rate_text
    return f"{rate_text}, delay {link.get('latency_us') or 0} us, loss {link.get('loss_pct') or 0:g}%"


def check_hosts(
    remote: RemoteHosts, timeout_s: float = HOST_CHECK_TIMEOUT_S, files: tuple[str, ...] = ()
) -> list[dict]:
    """remote_check on every host in parallel: python, torch, Stash, GPUs, and `files` (a model file, a
    script) there. The first failing host raises."""

    def check(target: SshTarget) -> dict:
        try:
            info = remote_check(target, python=remote.python, workdir=remote.workdir, timeout_s=timeout_s,
                                files=files)  # fmt: skip
        except (UsageError, MeasurementError):
            gone = gone_reason(target)  # say so when the cluster went away meanwhile
            if gone:
                raise UsageError(gone) from None
            raise
        if not info.get("torch_version"):
            raise UsageError(f"torch is not usable on {target.where}: {info.get('torch_error')}")
        if not info.get("stash_version"):
            raise UsageError(
                f"Stash not installed on {target.where} ({remote.python} cannot import stash_core)"
                + NOT_INSTALLED_FIX
            )
        if missing := info.get("missing_files"):  # its first run would fail there, after a failed run's save
            where = "the login folder" if remote.workdir in (".", "") else remote.workdir
            raise UsageError(f"{missing[0]} is not a file on {target.where} (in {where}, where a relative "
                             "path is read: --workdir chooses it); copy it there")  # fmt: skip
        if info["stash_version"] != __version__:
            # its workers would speak another version's protocol: refused before any run, not failed in one
            raise UsageError(
                f"{target.where} runs Stash {one_line(clipped(info['stash_version']))} and this is "
                f"Stash {__version__}: install this version there"
            )
        return {"host": target.host, **info}

    with ThreadPoolExecutor(max_workers=len(remote.targets)) as pool:
        futures = [pool.submit(check, target) for target in remote.targets]
        return [future.result() for future in futures]


def same_machine_warning(infos: list[dict]) -> str | None:
    """Hosts that are one machine (the same host name and machine id): their R1n runs over its loopback, not
    a link between machines, and its workers share its cores, so the network stall is no network's."""
    seen: dict[tuple, list[str]] = {}
    for info in infos:
        if info.get("hostname") and info.get("machine_id"):
            seen.setdefault((info["hostname"], info["machine_id"]), []).append(str(info["host"]))
    same = next((hosts for hosts in seen.values() if len(hosts) > 1), None)
    if same is None:
        return None
    return (f"hosts {', '.join(same)} are one machine (host name and machine id alike): the network stall "
            "is its loopback and its shared cores, not a link between machines")  # fmt: skip


def version_warnings(infos: list[dict]) -> list[str]:
    """Differences between hosts that could make their runs not comparable."""
    warnings = []
    for key, what in (("torch_version", "torch"), ("python_version", "Python")):
        values = {info.get(key) for info in infos}
        if len(values) > 1:
            found = ", ".join(f"{info['host']}: {info.get(key)}" for info in infos)
            warnings.append(f"hosts run different {what} versions ({found})")
    return warnings


# Addresses that name no one host: the rendezvous store listens on the master address, so a wildcard made it
# listen on every interface of node 0, and the other nodes would dial their own.
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", "[::]", "0", "0:0:0:0:0:0:0:0"})


def _unspecified(text: str) -> bool:
    """An address that is every interface's (0.0.0.0, ::, ::0, [::] ...), however written."""
    try:
        return ipaddress.ip_address(text.strip().strip("[]")).is_unspecified
    except ValueError:
        return False


def _checked_master_addr(text: str | None) -> str | None:
    if text is None:
        return None
    if str(text).strip().lower() in WILDCARD_ADDRESSES or _unspecified(str(text)):
        raise UsageError(f"--master-addr {text} is no one machine's address (it listens on every interface): "
                         "give the first host's address as the others reach it")  # fmt: skip
    return SshTarget(host=text).host  # the same host-name rules as every ssh target


def _checked_port(port: int | None) -> int | None:
    if port is None:
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise UsageError(f"invalid --master-port {port!r}: expected 1..65535")
    return port


def _checked_timeout(seconds: int) -> int:
    low, high = COMM_TIMEOUT_S
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not low <= seconds <= high:
        raise UsageError(f"invalid --comm-timeout {seconds!r}: expected {low}..{high} seconds")
    return seconds
