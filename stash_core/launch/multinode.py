"""torchrun across several machines, each started over ssh, with nothing left running afterwards.

On every node the command runs under the supervisor (supervisor.py, sent as source text with
`python -c`, so the node needs nothing installed for it), which starts torchrun with a launch tag
STASH_LAUNCH_ID=<tag> in its environment and ends every tagged process when its stdin reaches EOF,
on a signal, and after torchrun exits. This launcher keeps each ssh's stdin open while the run
lasts; on any failure (and on Ctrl-C) it closes them all, then sweeps with a second ssh each node
whose supervisor could not be relied on, so a remote side is ended even when its supervisor cannot be.

The checks before anything starts are in multinode_preflight.py; why a node failed, in one line,
in node_failure.py.
"""

from __future__ import annotations

import queue
import socket
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.interrupts import check_stop_request, held_interrupts
from stash_core.launch import supervisor, torchrun
from stash_core.launch.multinode_preflight import preflight, validate_launch
from stash_core.launch.node_failure import SSH_FAILED, failure_reason, node_label, port_in_use
from stash_core.launch.ssh import SshTarget, run_remote, ssh_argv

LAUNCH_TAG_VAR = supervisor.LAUNCH_TAG_VAR
# Sent with `python -c`, so the host needs nothing installed to run it.
# argv: run TAG WORKDIR -- COMMAND..  |  sweep TAG
SUPERVISOR_SRC = Path(supervisor.__file__).read_text(encoding="utf-8")
# torchrun without the interpreter's teardown once it succeeded (launch/torchrun.py), sent the same way.
TORCHRUN_SRC = Path(torchrun.__file__).read_text(encoding="utf-8")
_SWEEP_TIMEOUT_S = 15.0
_STDIN_EOF_GRACE_S = 4.0  # how long the supervisors get to end their processes after stdin closes
_POLL_S = 0.1
_STDERR_LINES_KEPT = 60

OnLine = Callable[[int, str], None]


def free_port() -> int:
    """A TCP port that is free on this machine right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _node_tag(tag: str, index: int) -> str:
    """One tag per node: two nodes may share a process table (the emulated cluster, or a host
    listed twice), and a node's supervisor must not end another node's processes."""
    return f"{tag}-n{index}"


# The node's command in a private temporary folder, its $TMPDIR (torchrun's torchelastic_* log folder goes
# there), removed by the same remote command when the command ends or the shell is signalled.
PRIVATE_TEMP_SH = (
    'd=$(mktemp -d "${TMPDIR:-/tmp}/stash-launch-XXXXXX") || exit 1; '
    # torch.compile's cache stays where it is without the private folder: not compiled anew every launch
    'export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-/tmp}/torchinductor_$(id -un)}"; '
    "trap 'rm -rf \"$d\"; exit 129' HUP; trap 'rm -rf \"$d\"; exit 130' INT; "
    "trap 'rm -rf \"$d\"; exit 143' TERM; "
    'TMPDIR=$d "$@"; status=$?; rm -rf "$d"; exit $status'
)


def in_private_temp(remote_argv: list[str]) -> list[str]:
    """remote_argv run by sh with a private $TMPDIR that is removed when it ends."""
    return ["sh", "-c", PRIVATE_TEMP_SH, "sh", *remote_argv]


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
    on_cpu: bool = False,
) -> list[str]:
    """The remote argv of node index: the supervisor, running `env K=V.. [taskset -c CPUS] torchrun ..`."""
    argv = [python, "-c", SUPERVISOR_SRC, "run", tag, workdir, "--", "env"]
    argv += [f"{key}={value}" for key, value in env.items()]
    if cpus:
        argv += ["taskset", "-c", ",".join(str(cpu) for cpu in cpus)]
    argv += [
        python, "-c", TORCHRUN_SRC,
        "--nnodes", str(nodes),
        "--node-rank", str(index),
        "--nproc-per-node", str(nproc_per_node),
        "--master-addr", master_addr,
        "--master-port", str(master_port),
        "--max-restarts", "0",
        "--rdzv-conf", f"timeout={int(rdzv_timeout_s)}",
        "--monitor-interval", "0.5",
        *torchrun.entry(module, on_cpu), *module_args,
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
        return node_label(self.index, self.target)

    def failure_reason(self) -> str:
        return failure_reason(self.target, self.process.returncode, list(self.stderr_lines))

    def start_readers(self, lines: queue.Queue) -> None:
        """A thread per output stream, each putting (kind, node index, line) on lines."""
        for stream, kind in ((self.process.stdout, "out"), (self.process.stderr, "err")):
            reader = threading.Thread(target=_read_lines, args=(self, stream, kind, lines), daemon=True)
            reader.start()
            self.readers.append(reader)

    def join_readers(self, timeout_s: float | None = None) -> None:
        for reader in self.readers:
            reader.join(timeout=timeout_s)


def _read_lines(node: _Node, stream, kind: str, lines: queue.Queue) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if kind == "err":
            node.stderr_lines.append(line)
        lines.put((kind, node.index, line))
    stream.close()


def _ssh_popen(target: SshTarget, remote_argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        ssh_argv(target, remote_argv),
        stdin=subprocess.PIPE,  # kept open: its EOF tells the remote supervisor to end everything
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches us, not ssh: we end the remote side in order
        shell=False,
    )


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
    on_line: OnLine,
    cpu_sets: list[list[int]] | None = None,
    rdzv_timeout_s: int = 30,
    on_stderr_line: OnLine | None = None,
    on_cpu: bool = False,
    master_given: bool = True,
) -> None:
    """Run `python -m torch.distributed.run .. -m module module_args` on every target; wait for all (Stash's
    own workers forked by torchrun when on_cpu: launch/torchrun.py).

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
    validate_launch(targets, nproc_per_node, module, master_port, env, cpu_sets, timeout_s)
    if any(not isinstance(arg, str) for arg in module_args):
        raise UsageError("module arguments must be strings")
    worker_env = {"PYTHONUNBUFFERED": "1", "STASH_RDZV_TIMEOUT_S": str(int(rdzv_timeout_s)), **env}
    deadline = time.monotonic() + timeout_s
    preflight(targets, python, workdir, master_addr, master_port, master_given)

    tag = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    lines: queue.Queue = queue.Queue()
    nodes: list[_Node] = []
    succeeded = False
    try:
        for index, target in enumerate(targets):
            remote = _node_argv(
                index, len(targets), _node_tag(tag, index), nproc_per_node, module, module_args,
                master_addr, master_port, worker_env, python, workdir,
                cpu_sets[index] if cpu_sets else None, rdzv_timeout_s, on_cpu,
            )  # fmt: skip
            node = _Node(index, target, _ssh_popen(target, in_private_temp(remote)))
            nodes.append(node)
            node.start_readers(lines)
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


# ---------------------------------------------------------------- while it runs


def _dispatch(item: tuple[str, int, str], on_line: OnLine, on_stderr_line: OnLine | None) -> None:
    kind, index, line = item
    if kind == "out":
        on_line(index, line)
    elif on_stderr_line is not None:
        on_stderr_line(index, line)


def _drain(lines: queue.Queue, on_line: OnLine, on_stderr_line: OnLine | None) -> None:
    while True:
        try:
            item = lines.get_nowait()
        except queue.Empty:
            return
        _dispatch(item, on_line, on_stderr_line)


def _wait_for_nodes(
    nodes: list[_Node],
    lines: queue.Queue,
    on_line: OnLine,
    on_stderr_line: OnLine | None,
    deadline: float,
    timeout_s: float,
    master_port: int,
) -> None:
    """Pass lines on until every node exited 0; raise for the first node that failed, or at the deadline."""
    while True:
        try:
            _dispatch(lines.get(timeout=_POLL_S), on_line, on_stderr_line)
        except queue.Empty:
            pass
        check_stop_request()  # the dashboard's Cancel of a profile run from Python
        for node in nodes:
            if node.process.poll() not in (None, 0):
                node.join_readers(timeout_s=1.0)  # let its last words arrive for the message
                _drain(lines, on_line, on_stderr_line)
                _raise_node_failure(node, master_port)
        if all(node.process.returncode == 0 for node in nodes):
            for node in nodes:
                node.join_readers()
            _drain(lines, on_line, on_stderr_line)
            return
        if time.monotonic() > deadline:
            running = [node.label for node in nodes if node.process.poll() is None]
            raise MeasurementError(
                f"torchrun on {len(nodes)} nodes did not finish within {timeout_s:g} s "
                f"(still running: {', '.join(running)})"
            )


def _raise_node_failure(node: _Node, master_port: int) -> None:
    if node.index == 0 and port_in_use(node.stderr_lines):
        raise UsageError(
            f"port {master_port} is already in use on the master, {node.label}; choose another master port"
        )
    raise MeasurementError(f"{node.label} {node.failure_reason()}")


# ---------------------------------------------------------------- ending it


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
        and node.process.returncode not in (SSH_FAILED, supervisor.EXIT_LEFT_PROCESSES)
    }
    to_sweep = [index for index in range(len(targets)) if index not in swept]
    if to_sweep:
        with ThreadPoolExecutor(max_workers=len(to_sweep)) as pool:
            list(pool.map(lambda index: _sweep(targets[index], python, _node_tag(tag, index)), to_sweep))


def _sweep(target: SshTarget, python: str, tag: str) -> bool:
    """End every process carrying tag on target with a fresh ssh; whether that worked (best effort)."""
    try:
        completed = run_remote(
            target, [python, "-c", SUPERVISOR_SRC, "sweep", tag], _SWEEP_TIMEOUT_S, connect_timeout_s=3
        )
    except Exception:  # noqa: BLE001 - best effort: the host may be the one that went away
        return False
    return completed.returncode == 0
