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

Every node link is shaped in both directions: the egress qdisc of stash0 (inside the node)
shapes what the node sends and the egress qdisc of stash-v<i>b (bridge side) shapes what it
receives. The rate limit is a tbf; latency and loss use netem when the kernel has it
(CONFIG_NET_SCH_NETEM, module sch_netem). Without netem only the rate is emulated, and the
result says so in "warnings".

Each node runs its own sshd (own config, host key and pid file in state_dir) that accepts the
cluster key for root. The nodes share this machine's file system, so the same Python, venv and
Stash are "installed" on each. state.json in state_dir records what was made, written after
each step, so that a setup interrupted half-way can still be taken down.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch.ssh import SshTarget

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
STATE_FILE = "state.json"
# Environment every process on a node should see: gloo/NCCL/TensorPipe would otherwise pick an
# address from the machine's host name, which is not reachable inside a namespace.
WORKER_ENV = {
    "GLOO_SOCKET_IFNAME": NODE_IFNAME,
    "NCCL_SOCKET_IFNAME": NODE_IFNAME,
    "TP_SOCKET_IFNAME": NODE_IFNAME,
}

_NAMESPACE_RE = re.compile(r"^stash-(?:n\d+|hub)$")
_ROOT_LINK_RE = re.compile(r"^stash-(?:vh|br0|v\d+[bn])$")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)
# tc's units: *bit are bits per second, *bps are BYTES per second (SI prefixes).
_RATE_UNITS_BPS = {
    "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}  # fmt: skip
_TIME_UNITS_US = {"us": 1, "usec": 1, "ms": 1e3, "msec": 1e3, "s": 1e6, "sec": 1e6}
_MIN_RATE_BPS = 8_000
_MAX_RATE_BPS = 400e9
_MAX_LATENCY_US = 10_000_000
_KILL_GRACE_S = 2.0
_SSHD_START_TIMEOUT_S = 10.0
_TBF_QUEUE_LATENCY = "100ms"  # how long a packet may wait in the tbf queue before it is dropped
_STATE_FILES = ("ssh_config", "known_hosts", "id_ed25519", "id_ed25519.pub", "authorized_keys", STATE_FILE)


# ---------------------------------------------------------------- argument parsing


def parse_bandwidth_bps(text: str) -> int | None:
    """tc-style rate ("1gbit", "200mbit", "10mbps" = 10 MB/s) -> bits per second; "unlimited" -> None."""
    if not isinstance(text, str):
        raise UsageError(f"invalid bandwidth {text!r}: expected e.g. '1gbit' or '200mbit'")
    if text.strip().lower() in ("unlimited", "none"):
        return None
    match = _RATE_RE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _RATE_UNITS_BPS:
        raise UsageError(
            f"invalid bandwidth {text!r}: expected a number and one of {', '.join(_RATE_UNITS_BPS)}"
        )
    rate_bps = float(match.group(1)) * _RATE_UNITS_BPS[unit]
    if not _MIN_RATE_BPS <= rate_bps <= _MAX_RATE_BPS:
        raise UsageError(f"bandwidth {text!r} out of range (8kbit .. 400gbit)")
    return int(rate_bps)


def parse_latency_us(text: str) -> int:
    """One-way delay ("1ms", "250us", "0") -> microseconds."""
    if not isinstance(text, str):
        raise UsageError(f"invalid latency {text!r}: expected e.g. '1ms'")
    if text.strip() == "0":
        return 0
    match = _RATE_RE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _TIME_UNITS_US:
        raise UsageError(f"invalid latency {text!r}: expected a number and one of us, ms, s")
    latency_us = float(match.group(1)) * _TIME_UNITS_US[unit]
    if latency_us > _MAX_LATENCY_US:
        raise UsageError(f"latency {text!r} out of range (0 .. 10s)")
    return int(round(latency_us))


def _check_loss(loss_pct: float) -> float:
    if isinstance(loss_pct, bool) or not isinstance(loss_pct, (int, float)) or not 0.0 <= loss_pct <= 100.0:
        raise UsageError(f"invalid loss {loss_pct!r}: expected a percentage between 0 and 100")
    return float(loss_pct)


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


# ---------------------------------------------------------------- small helpers


def node_namespace(index: int) -> str:
    return f"stash-n{index}"


def node_address(index: int) -> str:
    return f"{SUBNET_PREFIX}{10 + index}"


def _hub_veth(index: int) -> str:
    return f"stash-v{index}b"


def _run(argv: list[str], check: bool = True, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    """Run a setup command (argv, no shell); MeasurementError with its stderr when it fails."""
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, shell=False)
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"cluster command timed out: {' '.join(argv)}") from None
    if check and completed.returncode != 0:
        reason = (completed.stderr or completed.stdout).strip().splitlines()
        raise MeasurementError(
            f"cluster command failed: {' '.join(argv)}: {reason[-1] if reason else 'no message'}"
        )
    return completed


def _sshd_path() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return "/usr/sbin/sshd" if os.access("/usr/sbin/sshd", os.X_OK) else None


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
    if _sshd_path() is None:
        return "'sshd' not found (apt-get install openssh-server)"
    if probe_namespace:
        probe = f"stash-probe{os.getpid()}"
        created = _run(["ip", "netns", "add", probe], check=False)
        if created.returncode != 0:
            return f"cannot create network namespaces: {created.stderr.strip()}"
        _run(["ip", "netns", "del", probe], check=False)
    return None


def _state_path(state_dir: Path) -> Path:
    return Path(state_dir) / STATE_FILE


def _load_state(state_dir: Path) -> dict | None:
    try:
        return json.loads(_state_path(state_dir).read_text())
    except (OSError, ValueError):
        return None


def _save_state(state_dir: Path, state: dict) -> None:
    path = _state_path(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    os.replace(tmp, path)


def _live_namespaces() -> list[str]:
    listed = _run(["ip", "netns", "list"], check=False).stdout
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    return sorted(name for name in names if _NAMESPACE_RE.match(name))


def _root_links() -> list[str]:
    listed = _run(["ip", "-o", "link", "show"], check=False).stdout
    names = []
    for line in listed.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return [name for name in names if _ROOT_LINK_RE.match(name)]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _namespace_pids(namespace: str) -> list[int]:
    listed = _run(["ip", "netns", "pids", namespace], check=False).stdout
    return [int(word) for word in listed.split() if word.isdigit()]


def _signal_and_wait(pids: list[int], sig: int, wait_s: float) -> list[int]:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        _reap(alive)
        alive = [pid for pid in alive if _pid_alive(pid)]
    return alive


def _reap(pids: list[int]) -> None:
    """Collect the exit status of any of pids that is our own child, so no zombie stays behind."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def _end_processes(pids: list[int], label: str, actions: list[str]) -> None:
    pids = [pid for pid in pids if pid != os.getpid()]
    if not pids:
        return
    alive = _signal_and_wait(pids, signal.SIGTERM, _KILL_GRACE_S)
    if alive:
        alive = _signal_and_wait(alive, signal.SIGKILL, _KILL_GRACE_S)
    actions.append(f"ended {len(pids) - len(alive)} process(es) in {label}: {' '.join(map(str, pids))}")
    if alive:
        actions.append(f"could not end process(es) in {label}: {' '.join(map(str, alive))}")


# ---------------------------------------------------------------- shaping


def _netem_supported(namespace: str, device: str) -> bool:
    """Try a netem qdisc on a device we own; the kernel says 'unknown' when sch_netem is missing."""
    added = _run(
        ["tc", "-n", namespace, "qdisc", "add", "dev", device, "root", "netem", "delay", "0ms"], check=False
    )
    if added.returncode != 0:
        return False
    _run(["tc", "-n", namespace, "qdisc", "del", "dev", device, "root"], check=False)
    return True


def _tbf_args(rate_bps: int) -> list[str]:
    # The bucket must hold at least one GSO super-packet (64 KiB on veth) and a few ms of traffic,
    # or tbf cannot reach its rate at high speeds.
    burst_bytes = max(64 * 1024, int(rate_bps / 8 * 0.004))
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst_bytes), "latency", _TBF_QUEUE_LATENCY]


def _apply_shaping(namespace: str, device: str, shaping: dict, netem_ok: bool) -> list[str]:
    """Replace the root qdisc of device with the shaping; return the qdiscs made (as tc arguments)."""
    _run(["tc", "-n", namespace, "qdisc", "del", "dev", device, "root"], check=False)
    rate_bps, latency_us, loss_pct = shaping["rate_bps"], shaping["latency_us"], shaping["loss_pct"]
    qdiscs: list[list[str]] = []
    use_netem = netem_ok and (latency_us > 0 or loss_pct > 0)
    if use_netem:
        netem = ["netem", "delay", f"{latency_us}us", "limit", "100000"]
        if loss_pct > 0:
            netem += ["loss", f"{loss_pct:g}%"]
        qdiscs.append(["root", "handle", "1:", *netem])
        if rate_bps is not None:
            qdiscs.append(["parent", "1:1", "handle", "10:", *_tbf_args(rate_bps)])
    elif rate_bps is not None:
        qdiscs.append(["root", "handle", "10:", *_tbf_args(rate_bps)])
    for qdisc in qdiscs:
        _run(["tc", "-n", namespace, "qdisc", "add", "dev", device, *qdisc])
    return [f"{namespace}/{device}: " + " ".join(qdisc) for qdisc in qdiscs]


def _shaping_warning(shaping: dict, netem_ok: bool) -> str | None:
    if netem_ok or (shaping["latency_us"] == 0 and shaping["loss_pct"] == 0):
        return None
    return (
        f"kernel has no netem qdisc (sch_netem): latency {shaping['latency_us']}us and loss "
        f"{shaping['loss_pct']:g}% are not emulated, only the rate limit"
    )


def _shape_node(state: dict, index: int) -> None:
    node = state["nodes"][index]
    qdiscs = _apply_shaping(node["namespace"], NODE_IFNAME, node["shaping"], state["netem"])
    qdiscs += _apply_shaping(HUB_NAMESPACE, node["hub_veth"], node["shaping"], state["netem"])
    node["qdiscs"] = qdiscs
    warning = _shaping_warning(node["shaping"], state["netem"])
    node["warning"] = warning


# ---------------------------------------------------------------- ssh pieces


def _write_sshd_config(state_dir: Path, index: int) -> Path:
    node_dir = state_dir / f"n{index}"
    node_dir.mkdir(mode=0o700, exist_ok=True)
    host_key = node_dir / "ssh_host_ed25519_key"
    if not host_key.exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"stash-n{index}", "-f", str(host_key)])
    config = node_dir / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"ListenAddress {node_address(index)}:22",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {state_dir / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                f"PidFile {node_dir / 'sshd.pid'}",
                # the client config sends these, so gloo/NCCL use the node's own interface
                "AcceptEnv " + " ".join(WORKER_ENV),
                # notice a vanished client within ~6 s, which closes the session's stdin
                "ClientAliveInterval 2",
                "ClientAliveCountMax 3",
                "MaxStartups 64:30:128",
                "MaxSessions 64",
                "PrintMotd no",
                "X11Forwarding no",
                "UseDNS no",
                "LogLevel INFO",
                "",
            ]
        )
    )
    return config


def _start_sshd(state_dir: Path, index: int) -> int:
    """Start sshd inside node index's namespace; return its pid once it accepts connections."""
    config = _write_sshd_config(state_dir, index)
    sshd = _sshd_path()
    if sshd is None:
        raise UsageError("'sshd' not found (apt-get install openssh-server)")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = state_dir / f"n{index}" / "sshd.log"
    _run([sshd, "-t", "-f", str(config)])
    # Without -D sshd binds its socket, daemonizes, and only then lets `ip netns exec` return.
    _run(["ip", "netns", "exec", node_namespace(index), sshd, "-f", str(config), "-E", str(log)])
    pid_file = state_dir / f"n{index}" / "sshd.pid"
    deadline = time.monotonic() + _SSHD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            pid = int(pid_file.read_text().strip())
            with socket.create_connection((node_address(index), 22), timeout=1.0):
                return pid
        except (OSError, ValueError):
            time.sleep(0.05)
    log_tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    raise MeasurementError(f"sshd on stash-n{index} did not start: {log_tail[0] if log_tail else 'no log'}")


def _host_public_key(state_dir: Path, index: int) -> str:
    parts = (state_dir / f"n{index}" / "ssh_host_ed25519_key.pub").read_text().split()
    return f"{parts[0]} {parts[1]}"


def _write_client_config(state_dir: Path, nodes: int) -> Path:
    known_hosts = state_dir / "known_hosts"
    known_hosts.write_text(
        "".join(
            f"{node_namespace(i)},{node_address(i)} {_host_public_key(state_dir, i)}\n" for i in range(nodes)
        )
    )
    blocks = [
        f"Host {node_namespace(i)} {node_address(i)}\n    HostName {node_address(i)}\n" for i in range(nodes)
    ]
    blocks.append(
        "\n".join(
            [
                "Host stash-n* 10.213.0.*",
                f"    User {SSH_USER}",
                "    Port 22",
                f"    IdentityFile {state_dir / 'id_ed25519'}",
                "    IdentitiesOnly yes",
                f"    UserKnownHostsFile {known_hosts}",
                "    GlobalKnownHostsFile /dev/null",
                "    StrictHostKeyChecking yes",
                "    CheckHostIP no",
                "    BatchMode yes",
                "    LogLevel ERROR",
                # classic curve25519 key exchange: a fraction of the CPU of the default hybrid one,
                # which matters when many ssh sessions start on a small, busy machine
                "    KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
                "    SetEnv " + " ".join(f"{key}={value}" for key, value in WORKER_ENV.items()),
                "",
            ]
        )
    )
    config = state_dir / "ssh_config"
    config.write_text("\n".join(blocks))
    return config


# ---------------------------------------------------------------- public API


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
        "loss_pct": _check_loss(loss_pct),
    }
    cpu_sets = node_cpu_sets(nodes) if split_cpus else None
    problem = cluster_support_problem()
    if problem:
        raise UsageError(problem)
    state_dir = Path(state_dir)
    existing = _live_namespaces() + _root_links()
    if existing or _state_path(state_dir).exists():
        raise UsageError(
            f"an emulated cluster already exists ({', '.join(existing) or _state_path(state_dir)}); "
            "take it down first"
        )
    _check_subnet_free()
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    state: dict = {
        "version": 1,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "state_dir": str(state_dir),
        "hub_namespace": None,
        "bridge": BRIDGE,
        "root_veth": None,
        "root_address": ROOT_ADDRESS,
        "netem": False,
        "nodes": [],
        "cpu_sets": cpu_sets,
        "ssh_config": None,
        "key_path": None,
    }
    _save_state(state_dir, state)
    try:
        _build(state_dir, state, nodes, shaping, cpu_sets)
    except BaseException:
        cluster_down(state_dir)
        raise
    return cluster_status(state_dir)


def _check_subnet_free() -> None:
    listed = _run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    for line in listed.splitlines():
        words = line.split()
        if "inet" in words:
            address = words[words.index("inet") + 1].split("/")[0]
            if ipaddress.ip_address(address) in ipaddress.ip_network(SUBNET_PREFIX + "0/24"):
                raise UsageError(f"subnet {SUBNET_PREFIX}0/24 is already in use on this machine ({words[1]})")


def _build(state_dir: Path, state: dict, nodes: int, shaping: dict, cpu_sets: list[list[int]] | None) -> None:
    key = state_dir / "id_ed25519"
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stash-cluster", "-f", str(key)])
    (state_dir / "authorized_keys").write_text((state_dir / "id_ed25519.pub").read_text())
    state["key_path"] = str(key)

    _run(["ip", "netns", "add", HUB_NAMESPACE])
    state["hub_namespace"] = HUB_NAMESPACE
    _save_state(state_dir, state)
    hub = ["ip", "-n", HUB_NAMESPACE]
    _run([*hub, "link", "set", "lo", "up"])
    _run([*hub, "link", "add", BRIDGE, "type", "bridge", "forward_delay", "0", "stp_state", "0"])
    _run([*hub, "link", "set", BRIDGE, "up"])
    _run(["ip", "link", "add", ROOT_VETH, "type", "veth",
          "peer", "name", ROOT_VETH_PEER, "netns", HUB_NAMESPACE])  # fmt: skip
    state["root_veth"] = ROOT_VETH
    _save_state(state_dir, state)
    _run(["ip", "addr", "add", f"{ROOT_ADDRESS}/24", "dev", ROOT_VETH])
    _run(["ip", "link", "set", ROOT_VETH, "up"])
    _run([*hub, "link", "set", ROOT_VETH_PEER, "master", BRIDGE, "up"])
    state["netem"] = _netem_supported(HUB_NAMESPACE, ROOT_VETH_PEER)

    for index in range(nodes):
        _add_node(state_dir, state, index, shaping, cpu_sets[index] if cpu_sets else None)
    for index in range(nodes):
        state["nodes"][index]["sshd_pid"] = _start_sshd(state_dir, index)
        _save_state(state_dir, state)
    state["ssh_config"] = str(_write_client_config(state_dir, nodes))
    _save_state(state_dir, state)


def _add_node(state_dir: Path, state: dict, index: int, shaping: dict, cpus: list[int] | None) -> None:
    namespace, hub_veth = node_namespace(index), _hub_veth(index)
    _run(["ip", "netns", "add", namespace])
    node = {
        "index": index,
        "namespace": namespace,
        "address": node_address(index),
        "interface": NODE_IFNAME,
        "hub_veth": None,
        "shaping": dict(shaping),
        "qdiscs": [],
        "down": False,
        "sshd_pid": None,
        "cpus": cpus,
        "warning": None,
    }
    state["nodes"].append(node)
    _save_state(state_dir, state)
    inside = ["ip", "-n", namespace]
    _run([*inside, "link", "set", "lo", "up"])
    _run(["ip", "-n", HUB_NAMESPACE, "link", "add", hub_veth, "type", "veth",
          "peer", "name", NODE_IFNAME, "netns", namespace])  # fmt: skip
    node["hub_veth"] = hub_veth
    _save_state(state_dir, state)
    _run([*inside, "addr", "add", f"{node_address(index)}/24", "dev", NODE_IFNAME])
    _run([*inside, "link", "set", NODE_IFNAME, "up"])
    _run(["ip", "-n", HUB_NAMESPACE, "link", "set", hub_veth, "master", BRIDGE, "up"])
    _shape_node(state, index)
    _save_state(state_dir, state)


def cluster_down(state_dir: Path = DEFAULT_STATE_DIR) -> list[str]:
    """Take the emulated cluster down: processes, namespaces, links (with their qdiscs), state files.

    Works from state.json and, without it, from the stash-* names alone. Safe to run twice.
    Returns what it did, one line per action.
    """
    state_dir = Path(state_dir)
    actions: list[str] = []
    state = _load_state(state_dir) or {}
    for node in state.get("nodes", []):
        pid = node.get("sshd_pid")
        config = str(state_dir / f"n{node['index']}" / "sshd_config")
        # only a pid that is still our sshd (pids get reused)
        if pid and _pid_alive(pid) and config in _cmdline(pid):
            _end_processes([pid], f"sshd of {node['namespace']}", actions)
    # Every stash-n*/stash-hub namespace, recorded or not: the names are ours.
    for namespace in _live_namespaces():
        _end_processes(_namespace_pids(namespace), namespace, actions)
        deleted = _run(["ip", "netns", "del", namespace], check=False)
        if deleted.returncode == 0:
            actions.append(f"deleted namespace {namespace} (with its links and qdiscs)")
        else:
            actions.append(f"could not delete namespace {namespace}: {deleted.stderr.strip()}")
    for link in _root_links():
        if _run(["ip", "link", "del", link], check=False).returncode == 0:
            actions.append(f"deleted link {link}")
    actions += _remove_state_files(state_dir)
    return actions


def _remove_state_files(state_dir: Path) -> list[str]:
    """Remove only the files cluster_up writes, then the directory if that left it empty."""
    if not state_dir.is_dir():
        return []
    removed = 0
    for name in _STATE_FILES:
        path = state_dir / name
        if path.exists():
            path.unlink()
            removed += 1
    for node_dir in state_dir.glob("n*"):
        if node_dir.is_dir() and re.fullmatch(r"n\d+", node_dir.name):
            shutil.rmtree(node_dir, ignore_errors=True)
            removed += 1
    try:
        state_dir.rmdir()
    except OSError:
        pass
    return [f"removed {removed} state file(s) from {state_dir}"] if removed else []


def _link_up(namespace: str, device: str) -> bool | None:
    shown = _run(["ip", "-n", namespace, "-o", "link", "show", device], check=False)
    if shown.returncode != 0:
        return None
    flags = shown.stdout.split("<", 1)[-1].split(">", 1)[0].split(",")
    return "UP" in flags and "state DOWN" not in shown.stdout


def _live_qdiscs(namespace: str, device: str) -> list[str]:
    shown = _run(["tc", "-n", namespace, "qdisc", "show", "dev", device], check=False)
    return [line.strip() for line in shown.stdout.splitlines() if line.strip()]


def cluster_status(state_dir: Path = DEFAULT_STATE_DIR) -> dict:
    """What exists now: nodes with address, shaping, live qdiscs, link and sshd state."""
    state_dir = Path(state_dir)
    state = _load_state(state_dir) or {}
    live = set(_live_namespaces())
    nodes = []
    for node in state.get("nodes", []):
        exists = node["namespace"] in live
        pid = node.get("sshd_pid")
        nodes.append(
            {
                "index": node["index"],
                "namespace": node["namespace"],
                "address": node["address"],
                "exists": exists,
                "sshd_pid": pid,
                "sshd_alive": bool(pid) and _pid_alive(pid),
                "link_up": _link_up(HUB_NAMESPACE, node["hub_veth"])
                if exists and node.get("hub_veth")
                else None,
                "shaping": node["shaping"],
                # what the node sends is shaped on its own end, what it receives on the bridge end
                "qdiscs": _live_qdiscs(node["namespace"], NODE_IFNAME) if exists else [],
                "ingress_qdiscs": _live_qdiscs(HUB_NAMESPACE, node["hub_veth"])
                if exists and node.get("hub_veth")
                else [],
                "cpus": node.get("cpus"),
            }
        )
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


def _require_state(state_dir: Path) -> dict:
    state = _load_state(Path(state_dir))
    if not state or not state.get("nodes"):
        raise UsageError(f"no emulated cluster is up (no {_state_path(Path(state_dir))})")
    return state


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
    state = _require_state(state_dir)
    if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < len(state["nodes"]):
        raise UsageError(f"no node {node!r} in the cluster (nodes 0..{len(state['nodes']) - 1})")
    record = state["nodes"][node]
    shaping = dict(record["shaping"])
    if bandwidth is not None:
        shaping["rate_bps"] = parse_bandwidth_bps(bandwidth)
    if latency is not None:
        shaping["latency_us"] = parse_latency_us(latency)
    if loss_pct is not None:
        shaping["loss_pct"] = _check_loss(loss_pct)
    if shaping != record["shaping"]:
        record["shaping"] = shaping
        _shape_node(state, node)
    # Taking the bridge side down drops carrier on both ends: nothing passes either way.
    _run(["ip", "-n", HUB_NAMESPACE, "link", "set", record["hub_veth"], "down" if down else "up"])
    record["down"] = bool(down)
    _save_state(state_dir, state)
    return {**shaping, "down": record["down"], "warning": record.get("warning")}


def cluster_hosts(state_dir: Path = DEFAULT_STATE_DIR) -> list[SshTarget]:
    """SshTargets for the nodes, in node order; each host is the node's address (usable as master_addr)."""
    state = _require_state(Path(state_dir))
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
    return _require_state(Path(state_dir)).get("cpu_sets")
