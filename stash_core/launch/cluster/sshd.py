"""The OpenSSH side of an emulated cluster: an sshd in each node, and the client config that reaches them.

Each node runs its own sshd (own config, host key, pid file and log in its node directory) that
accepts the cluster key for root. The nodes share this machine's file system, so the same Python,
venv and Stash are "installed" on each. The client config pins each node's host key and passes
WORKER_ENV along, which the sshd accepts.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch.cluster.cmd import run_cmd
from stash_core.launch.cluster.names import DEFAULT_LAYOUT, SSH_USER, WORKER_ENV, Layout, node_dir
from stash_core.proc import pid_alive

SSHD_START_TIMEOUT_S = 10.0
CLIENT_KEY = "id_ed25519"
AUTHORIZED_KEYS = "authorized_keys"
KNOWN_HOSTS = "known_hosts"
CLIENT_CONFIG = "ssh_config"
_HOST_KEY = "ssh_host_ed25519_key"


def sshd_path() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return "/usr/sbin/sshd" if os.access("/usr/sbin/sshd", os.X_OK) else None


def make_client_key(state_dir: Path) -> Path:
    """The cluster's own key pair, authorized on every node; the private key's path."""
    key = state_dir / CLIENT_KEY
    run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stash-cluster", "-f", str(key)])
    (state_dir / AUTHORIZED_KEYS).write_text(key.with_name(CLIENT_KEY + ".pub").read_text())
    return key


def _sshd_config_lines(state_dir: Path, index: int, host_key: Path, layout: Layout) -> list[str]:
    return [
        f"ListenAddress {layout.node_address(index)}:22",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {state_dir / AUTHORIZED_KEYS}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        f"PidFile {sshd_pid_file(state_dir, index)}",
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


def sshd_config_path(state_dir: Path, index: int) -> Path:
    return node_dir(state_dir, index) / "sshd_config"


def sshd_pid_file(state_dir: Path, index: int) -> Path:
    return node_dir(state_dir, index) / "sshd.pid"


def write_sshd_config(state_dir: Path, index: int, layout: Layout = DEFAULT_LAYOUT) -> Path:
    """Node index's directory, host key and sshd_config; the config's path."""
    directory = node_dir(state_dir, index)
    directory.mkdir(mode=0o700, exist_ok=True)
    host_key = directory / _HOST_KEY
    if not host_key.exists():
        comment = layout.node_namespace(index)
        run_cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(host_key)])
    config = sshd_config_path(state_dir, index)
    config.write_text("\n".join(_sshd_config_lines(state_dir, index, host_key, layout)))
    return config


def start_sshd(state_dir: Path, index: int, layout: Layout = DEFAULT_LAYOUT) -> int:
    """Start sshd inside node index's namespace; return its pid once it accepts connections."""
    config = write_sshd_config(state_dir, index, layout)
    namespace, address = layout.node_namespace(index), layout.node_address(index)
    sshd = sshd_path()
    if sshd is None:
        raise UsageError("'sshd' not found (apt-get install openssh-server)")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = node_dir(state_dir, index) / "sshd.log"
    run_cmd([sshd, "-t", "-f", str(config)])
    # Without -D sshd binds its socket, daemonizes, and only then lets `ip netns exec` return.
    run_cmd(["ip", "netns", "exec", namespace, sshd, "-f", str(config), "-E", str(log)])
    pid_file = sshd_pid_file(state_dir, index)
    deadline = time.monotonic() + SSHD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            pid = int(pid_file.read_text().strip())
            with socket.create_connection((address, 22), timeout=1.0):
                return pid
        except (OSError, ValueError):
            time.sleep(0.05)
    log_tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    raise MeasurementError(f"sshd on {namespace} did not start: {log_tail[0] if log_tail else 'no log'}")


def is_our_sshd(pid: int | None, state_dir: Path, index: int) -> bool:
    """Whether pid is still node index's sshd (pids get reused): alive, and started with its config."""
    if not pid or not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return str(sshd_config_path(state_dir, index)) in cmdline


def _host_public_key(state_dir: Path, index: int) -> str:
    parts = (node_dir(state_dir, index) / f"{_HOST_KEY}.pub").read_text().split()
    return f"{parts[0]} {parts[1]}"


def _client_defaults(state_dir: Path, known_hosts: Path, layout: Layout) -> list[str]:
    return [
        f"Host {layout.prefix}n* {layout.address_prefix}*",
        f"    User {SSH_USER}",
        "    Port 22",
        f"    IdentityFile {state_dir / CLIENT_KEY}",
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


def write_client_config(state_dir: Path, nodes: int, layout: Layout = DEFAULT_LAYOUT) -> Path:
    """known_hosts with every node's host key, and an ssh_config that reaches node i by name or address."""
    known_hosts = state_dir / KNOWN_HOSTS
    names = [(layout.node_namespace(i), layout.node_address(i)) for i in range(nodes)]
    known_hosts.write_text(
        "".join(
            f"{name},{address} {_host_public_key(state_dir, i)}\n" for i, (name, address) in enumerate(names)
        )
    )
    blocks = [f"Host {name} {address}\n    HostName {address}\n" for name, address in names]
    blocks.append("\n".join(_client_defaults(state_dir, known_hosts, layout)))
    config = state_dir / CLIENT_CONFIG
    config.write_text("\n".join(blocks))
    return config
