"""torchrun across several machines, each started over ssh, with nothing left running afterwards.

On every node the command runs under a small supervisor (Python, sent inline with `python -c`,
so it needs nothing installed) that:
  - changes to workdir and starts `env K=V.. [taskset -c CPUS] python -m torch.distributed.run ..`
    with a launch tag STASH_LAUNCH_ID=<tag> in its environment, which every worker inherits;
  - ends every process that carries the tag (TERM, then KILL) when its stdin reaches EOF, which
    happens when the local ssh dies, the connection drops (sshd notices with ClientAlive or TCP),
    or this launcher closes it; also on SIGTERM/SIGHUP/SIGINT, and after torchrun exits (so that
    no orphaned worker survives).
torchrun puts each worker in a session of its own, so a process group kill would miss them;
the tag finds them wherever they are. On any failure (and on Ctrl-C) the launcher also sweeps
each node with a second ssh that ends every tagged process, so a remote side is ended even when
its supervisor cannot be.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from stash_core.errors import MeasurementError, UsageError
from stash_core.interrupts import held_interrupts
from stash_core.launch.ssh import (
    HostUnreachableError,
    SshTarget,
    _last_line,
    raise_for_ssh_failure,
    run_remote,
    ssh_argv,
)

LAUNCH_TAG_VAR = "STASH_LAUNCH_ID"
_PREFLIGHT_TIMEOUT_S = 20.0
_SWEEP_TIMEOUT_S = 15.0
_STDIN_EOF_GRACE_S = 4.0  # how long the supervisors get to end their processes after stdin closes
_POLL_S = 0.1
_STDERR_LINES_KEPT = 60
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PORT_IN_USE_RE = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
_EXCEPTION_LINE_RE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Interrupt|Exit)\b.*")
# What the OpenSSH client itself prints when a session breaks (as opposed to the remote program's stderr).
_SSH_CLIENT_LINE_RE = re.compile(
    r"^(?:ssh: |Timeout, server .* not responding|client_loop: |Connection to .* closed|"
    r"Connection (?:reset|closed) by |Broken pipe|packet_write_wait: |Read from remote host )"
)
_SUPERVISOR_EXIT_WORKDIR = 125
_SUPERVISOR_LEFT_PROCESSES = 126
_SSH_FAILED = 255

# The remote supervisor and sweeper. argv: run TAG WORKDIR -- COMMAND...  |  sweep TAG
_REMOTE_SRC = r"""
import os, signal, subprocess, sys, threading, time
mode, tag = sys.argv[1], sys.argv[2]
needle = ("STASH_LAUNCH_ID=" + tag).encode()
def tagged():
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open("/proc/%s/environ" % name, "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found
def sweep():
    ended = 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = tagged()
        if not pids:
            break
        ended = max(ended, len(pids))
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and tagged():
            time.sleep(0.05)
    return ended, len(tagged())
if mode == "sweep":
    ended, left = sweep()
    print("STASH_SWEEP ended=%d left=%d" % (ended, left), flush=True)
    sys.exit(1 if left else 0)
workdir, command = sys.argv[3], sys.argv[5:]
try:
    os.chdir(workdir)
except OSError as exc:
    print("STASH_SUPERVISOR cannot use workdir %r: %s" % (workdir, exc.strerror), file=sys.stderr, flush=True)
    sys.exit(125)
stop = threading.Event()
def watch_stdin():
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    stop.set()
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, lambda *_: stop.set())
try:
    child = subprocess.Popen(command, env=dict(os.environ, STASH_LAUNCH_ID=tag), stdin=subprocess.DEVNULL)
except OSError as exc:
    print("STASH_SUPERVISOR cannot start %s: %s" % (command[0], exc.strerror), file=sys.stderr, flush=True)
    sys.exit(127)
threading.Thread(target=watch_stdin, daemon=True).start()
code = None
while code is None and not stop.is_set():
    try:
        code = child.wait(timeout=0.2)
    except subprocess.TimeoutExpired:
        pass
ended, left = sweep()
if left:
    print("STASH_SUPERVISOR could not end %d process(es)" % left, file=sys.stderr, flush=True)
    sys.exit(126)
if code is None:
    sys.exit(143)
sys.exit(code if code >= 0 else 128 - code)
"""

_PREFLIGHT_SRC = r"""
import importlib.util, json, os, socket, sys
workdir = sys.argv[1]
out = {"workdir_ok": os.path.isdir(workdir), "torch": importlib.util.find_spec("torch") is not None}
if len(sys.argv) > 2:
    addr, port = sys.argv[2], int(sys.argv[3])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
        out["port_free"] = True
    except OSError as exc:
        out["port_free"] = False
        out["port_error"] = exc.strerror
    s.close()
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)[0]
        t = socket.socket(family)
        t.bind((sockaddr[0], 0))
        t.close()
        out["addr_local"] = True
    except OSError as exc:
        out["addr_local"] = False
        out["addr_error"] = exc.strerror or str(exc)
print(json.dumps(out))
"""


def free_port() -> int:
    """A TCP port that is free on this machine right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _node_label(index: int, target: SshTarget) -> str:
    return f"node {index} ({target.host})"


def _validate(
    targets: list[SshTarget],
    nproc_per_node: int,
    module: str,
    master_port: int,
    env: dict[str, str],
    cpu_sets: list[list[int]] | None,
    timeout_s: float,
) -> None:
    if not targets:
        raise UsageError("no hosts given")
    if not all(isinstance(target, SshTarget) for target in targets):
        raise UsageError("hosts must be SshTarget objects")
    if isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int) or nproc_per_node < 1:
        raise UsageError(f"nproc_per_node must be a positive integer, got {nproc_per_node!r}")
    if not _MODULE_RE.match(module):
        raise UsageError(f"invalid module name {module!r}")
    if isinstance(master_port, bool) or not isinstance(master_port, int) or not 1 <= master_port <= 65535:
        raise UsageError(f"invalid master port {master_port!r}: expected 1..65535")
    for key in env:
        if not _ENV_KEY_RE.match(key):
            raise UsageError(f"invalid environment variable name {key!r}")
    if cpu_sets is not None:
        if len(cpu_sets) != len(targets):
            raise UsageError(f"{len(cpu_sets)} cpu sets for {len(targets)} nodes")
        for cpus in cpu_sets:
            if not cpus or not all(isinstance(cpu, int) and cpu >= 0 for cpu in cpus):
                raise UsageError(f"invalid cpu set {cpus!r}")
    if timeout_s <= 0:
        raise UsageError("timeout must be positive")


def _preflight(
    targets: list[SshTarget], python: str, workdir: str, master_addr: str, master_port: int
) -> None:
    """One ssh per node, in parallel: reachable, python runs, workdir exists, master port free on node 0."""

    def check(index: int) -> dict:
        argv = [python, "-c", _PREFLIGHT_SRC, workdir]
        if index == 0:
            argv += [master_addr, str(master_port)]
        label = _node_label(index, targets[index])
        try:
            completed = run_remote(targets[index], argv, _PREFLIGHT_TIMEOUT_S)
        except HostUnreachableError as exc:
            raise MeasurementError(f"{label} is unreachable: {exc}") from None
        except MeasurementError as exc:
            raise MeasurementError(f"{label}: {exc}") from None
        except UsageError as exc:
            raise UsageError(f"{label}: {exc}") from None
        if completed.returncode != 0:
            raise UsageError(f"{label}: {python} failed: {_last_line(completed.stderr)}")
        try:
            return json.loads(_last_line(completed.stdout))
        except ValueError:
            raise MeasurementError(
                f"{label}: unexpected preflight output: {_last_line(completed.stdout)}"
            ) from None

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        futures = [pool.submit(check, index) for index in range(len(targets))]
        results = [future.result() for future in futures]  # the first failing node (in order) raises
    for index, result in enumerate(results):
        label = _node_label(index, targets[index])
        if not result.get("workdir_ok"):
            raise UsageError(f"{label}: directory {workdir!r} does not exist")
        if not result.get("torch"):
            raise UsageError(f"{label}: {python} cannot import torch")
    master = results[0]
    if not master.get("addr_local"):
        raise UsageError(
            f"master address {master_addr} is not an address of {_node_label(0, targets[0])}: "
            f"{master.get('addr_error')}"
        )
    if not master.get("port_free"):
        raise UsageError(
            f"port {master_port} is already in use on the master, {_node_label(0, targets[0])} "
            f"({master.get('port_error')}); choose another master port"
        )


def _node_argv(
    index: int,
    nodes: int,
    tag: str,
    nproc_per_node: int,
    module: str,
    module_args: list[str],
    master_addr: str,
    master_port: int,
    env: dict[str, str],
    python: str,
    workdir: str,
    cpus: list[int] | None,
    rdzv_timeout_s: int,
) -> list[str]:
    argv = [python, "-c", _REMOTE_SRC, "run", tag, workdir, "--", "env"]
    argv += [f"{key}={value}" for key, value in env.items()]
    if cpus:
        argv += ["taskset", "-c", ",".join(str(cpu) for cpu in cpus)]
    argv += [
        python, "-m", "torch.distributed.run",
        "--nnodes", str(nodes),
        "--node-rank", str(index),
        "--nproc-per-node", str(nproc_per_node),
        "--master-addr", master_addr,
        "--master-port", str(master_port),
        "--max-restarts", "0",
        "--rdzv-conf", f"timeout={int(rdzv_timeout_s)}",
        "--monitor-interval", "0.5",
        "-m", module, *module_args,
    ]  # fmt: skip
    return argv


class _Node:
    """One node's ssh process and what it printed."""

    def __init__(self, index: int, target: SshTarget, process: subprocess.Popen) -> None:
        self.index = index
        self.target = target
        self.process = process
        self.stderr_lines: deque[str] = deque(maxlen=_STDERR_LINES_KEPT)
        self.readers: list[threading.Thread] = []

    @property
    def label(self) -> str:
        return _node_label(self.index, self.target)

    def failure_reason(self) -> str:
        code = self.process.returncode
        text = "\n".join(self.stderr_lines)
        if code == _SSH_FAILED:
            # The remote program shares stderr with ssh: name ssh's own last word, not the program's.
            ssh_lines = [line for line in self.stderr_lines if _SSH_CLIENT_LINE_RE.match(line)]
            try:
                own = ssh_lines[-1] if ssh_lines else "the connection dropped (no answer from the host)"
                raise_for_ssh_failure(self.target, code, own, "ssh")
            except UsageError as exc:
                return f"lost its ssh connection: {exc}"
        if code == _SUPERVISOR_EXIT_WORKDIR:
            return _last_line(text)
        exception_lines = [line.strip() for line in self.stderr_lines if _EXCEPTION_LINE_RE.match(line)]
        detail = exception_lines[-1] if exception_lines else _last_line(text)
        if code is not None and code > 128 and code - 128 < 65:
            return f"was ended by signal {code - 128}: {detail}"
        return f"exited with code {code}: {detail}"


def _read_lines(node: _Node, stream, kind: str, lines: queue.Queue) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if kind == "err":
            node.stderr_lines.append(line)
        lines.put((kind, node.index, line))
    stream.close()


def launch_torchrun_over_ssh(
    targets: list[SshTarget],
    nproc_per_node: int,
    module: str,
    module_args: list[str],
    master_addr: str,
    master_port: int,
    env: dict[str, str],
    python: str,
    workdir: str,
    timeout_s: float,
    on_line: Callable[[int, str], None],
    cpu_sets: list[list[int]] | None = None,
    rdzv_timeout_s: int = 30,
    on_stderr_line: Callable[[int, str], None] | None = None,
) -> None:
    """Run `python -m torch.distributed.run .. -m module module_args` on every target; wait for all.

    Node i gets --node-rank i; node 0 hosts the rendezvous at master_addr:master_port.
    Each stdout line of node i goes to on_line(i, line) (stderr lines to on_stderr_line when
    given), called in this thread. The workers see STASH_RDZV_TIMEOUT_S (use it as the
    init_process_group timeout) and PYTHONUNBUFFERED=1 unless env overrides them.

    Raises UsageError for bad arguments, a missing workdir/python/torch or a busy master
    port; MeasurementError naming the node when a node is unreachable, fails, loses its ssh
    connection, or the whole run exceeds timeout_s. On every way out (KeyboardInterrupt too)
    all processes started on all nodes are ended before this returns or raises.
    """
    env = dict(env)
    _validate(targets, nproc_per_node, module, master_port, env, cpu_sets, timeout_s)
    if any(not isinstance(arg, str) for arg in module_args):
        raise UsageError("module arguments must be strings")
    worker_env = {"PYTHONUNBUFFERED": "1", "STASH_RDZV_TIMEOUT_S": str(int(rdzv_timeout_s)), **env}
    deadline = time.monotonic() + timeout_s
    _preflight(targets, python, workdir, master_addr, master_port)

    tag = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    lines: queue.Queue = queue.Queue()
    nodes: list[_Node] = []
    succeeded = False
    try:
        for index, target in enumerate(targets):
            remote = _node_argv(
                index, len(targets), _node_tag(tag, index), nproc_per_node, module, module_args,
                master_addr, master_port, worker_env, python, workdir,
                cpu_sets[index] if cpu_sets else None, rdzv_timeout_s,
            )  # fmt: skip
            process = subprocess.Popen(
                ssh_argv(target, remote),
                stdin=subprocess.PIPE,  # kept open: its EOF tells the remote supervisor to end everything
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C reaches us, not ssh: we end the remote side in order
                shell=False,
            )
            node = _Node(index, target, process)
            nodes.append(node)
            for stream, kind in ((process.stdout, "out"), (process.stderr, "err")):
                reader = threading.Thread(target=_read_lines, args=(node, stream, kind, lines), daemon=True)
                reader.start()
                node.readers.append(reader)
        _wait_for_nodes(nodes, lines, on_line, on_stderr_line, deadline, timeout_s, master_port)
        succeeded = True
    finally:
        if not succeeded:
            with held_interrupts() as interrupted:  # a second Ctrl-C must not cut the cleanup short
                _end_everything(nodes, targets, python, tag)
            if interrupted:
                raise KeyboardInterrupt
        else:
            for node in nodes:
                _close_stdin(node)


def _dispatch(item: tuple[str, int, str], on_line, on_stderr_line) -> None:
    kind, index, line = item
    if kind == "out":
        on_line(index, line)
    elif on_stderr_line is not None:
        on_stderr_line(index, line)


def _drain(lines: queue.Queue, on_line, on_stderr_line) -> None:
    while True:
        try:
            item = lines.get_nowait()
        except queue.Empty:
            return
        _dispatch(item, on_line, on_stderr_line)


def _wait_for_nodes(
    nodes: list[_Node],
    lines: queue.Queue,
    on_line: Callable[[int, str], None],
    on_stderr_line: Callable[[int, str], None] | None,
    deadline: float,
    timeout_s: float,
    master_port: int,
) -> None:
    while True:
        try:
            _dispatch(lines.get(timeout=_POLL_S), on_line, on_stderr_line)
        except queue.Empty:
            pass
        for node in nodes:
            if node.process.poll() not in (None, 0):
                for reader in node.readers:  # let its last words arrive for the message
                    reader.join(timeout=1.0)
                _drain(lines, on_line, on_stderr_line)
                if node.index == 0 and any(_PORT_IN_USE_RE.search(line) for line in node.stderr_lines):
                    raise UsageError(
                        f"port {master_port} is already in use on the master, {node.label}; "
                        "choose another master port"
                    )
                raise MeasurementError(f"{node.label} {node.failure_reason()}")
        if all(node.process.returncode == 0 for node in nodes):
            for node in nodes:
                for reader in node.readers:
                    reader.join()
            _drain(lines, on_line, on_stderr_line)
            return
        if time.monotonic() > deadline:
            running = [node.label for node in nodes if node.process.poll() is None]
            raise MeasurementError(
                f"torchrun on {len(nodes)} nodes did not finish within {timeout_s:g} s "
                f"(still running: {', '.join(running)})"
            )


def _close_stdin(node: _Node) -> None:
    try:
        if node.process.stdin is not None and not node.process.stdin.closed:
            node.process.stdin.close()
    except OSError:
        pass


def _end_everything(nodes: list[_Node], targets: list[SshTarget], python: str, tag: str) -> None:
    """End every process of this launch on every node; raise nothing (we are already failing)."""
    for node in nodes:  # EOF on stdin: each supervisor ends its tagged processes and exits
        _close_stdin(node)
    grace_end = time.monotonic() + _STDIN_EOF_GRACE_S
    for node in nodes:
        try:
            node.process.wait(timeout=max(0.0, grace_end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for node in nodes:
        if node.process.poll() is None:
            node.process.kill()
            node.process.wait()
    # A supervisor that exited by itself has swept its node. Where ssh failed (255), where we had
    # to kill ssh, where the supervisor could not end everything (126), or where ssh never
    # started, a second ssh sweeps the node's tag.
    swept = {
        node.index
        for node in nodes
        if node.process.returncode >= 0
        and node.process.returncode not in (_SSH_FAILED, _SUPERVISOR_LEFT_PROCESSES)
    }
    to_sweep = [index for index in range(len(targets)) if index not in swept]
    if to_sweep:
        with ThreadPoolExecutor(max_workers=len(to_sweep)) as pool:
            list(pool.map(lambda index: _sweep(targets[index], python, _node_tag(tag, index)), to_sweep))


def _node_tag(tag: str, index: int) -> str:
    """One tag per node: two nodes may share a process table (the emulated cluster, or a host
    listed twice), and a node's supervisor must not end another node's processes."""
    return f"{tag}-n{index}"


def _sweep(target: SshTarget, python: str, tag: str) -> bool:
    try:
        completed = run_remote(
            target, [python, "-c", _REMOTE_SRC, "sweep", tag], _SWEEP_TIMEOUT_S, connect_timeout_s=3
        )
    except Exception:  # noqa: BLE001 - best effort: the host may be the one that went away
        return False
    return completed.returncode == 0
