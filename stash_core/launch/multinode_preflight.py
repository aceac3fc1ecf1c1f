"""Checks before a multi-node launch starts anything: its arguments, then every node over ssh.

A mistake the user can fix (a bad module name, a missing directory, a python without torch, a busy
master port) is a UsageError naming the node; an unreachable node is a MeasurementError.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch import remote_preflight
from stash_core.launch.cluster.gone import gone_reason
from stash_core.launch.node_failure import node_label
from stash_core.launch.ssh import HostUnreachableError, SshTarget, last_line, run_remote

PREFLIGHT_TIMEOUT_S = 20.0
# Sent with `python -c`: the host needs nothing installed to run it.
PREFLIGHT_SRC = Path(remote_preflight.__file__).read_text(encoding="utf-8")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_launch(
    targets: list[SshTarget],
    nproc_per_node: int,
    module: str,
    master_port: int,
    env: dict[str, str],
    cpu_sets: list[list[int]] | None,
    timeout_s: float,
) -> None:
    """UsageError for the first bad argument of launch_torchrun_over_ssh; nothing runs before this."""
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
        _validate_cpu_sets(cpu_sets, len(targets))
    if timeout_s <= 0:
        raise UsageError("timeout must be positive")


def _validate_cpu_sets(cpu_sets: list[list[int]], nodes: int) -> None:
    if len(cpu_sets) != nodes:
        raise UsageError(f"{len(cpu_sets)} cpu sets for {nodes} nodes")
    for cpus in cpu_sets:
        if not cpus or not all(isinstance(cpu, int) and cpu >= 0 for cpu in cpus):
            raise UsageError(f"invalid cpu set {cpus!r}")


def preflight(
    targets: list[SshTarget], python: str, workdir: str, master_addr: str, master_port: int,
    master_given: bool = True,
) -> None:  # fmt: skip
    """One ssh per node, in parallel: reachable, python runs, workdir exists, master port free on node 0
    (`master_given`: the master address was given, not node 0's host name by default)."""
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        futures = [
            pool.submit(_check_node, index, targets[index], python, workdir, master_addr, master_port)
            for index in range(len(targets))
        ]
        results = [future.result() for future in futures]  # the first failing node (in order) raises
    for index, result in enumerate(results):
        label = node_label(index, targets[index])
        if not result.get("workdir_ok"):
            raise UsageError(f"{label}: directory {workdir!r} does not exist")
        if not result.get("torch"):
            raise UsageError(f"{label}: {python} cannot import torch")
    master = results[0]
    _refuse_foreign_master(master, master_addr, targets[0], master_given)
    if not master.get("port_free"):
        raise UsageError(
            f"port {master_port} is already in use on the master, {node_label(0, targets[0])} "
            f"({master.get('port_error')}); choose another master port"
        )


def check_master_address(
    target: SshTarget, python: str, workdir: str, master_addr: str, given: bool = True
) -> None:
    """Before a profile's first run: the master address (given, or node 0's host name by default) is node
    0's (found at the run across the machines, the runs on one machine before it were made for nothing)."""
    answer = _check_node(0, target, python, workdir, master_addr, 0)
    _refuse_foreign_master(answer, master_addr, target, given)


def _refuse_foreign_master(answer: dict, master_addr: str, target: SshTarget, given: bool = True) -> None:
    if not answer.get("addr_local"):
        # a host name from an ssh_config (Host alias) resolves for ssh alone
        hint = "" if given else (
            f" (the default, node 0's host name as --hosts gives it: give --master-addr, an address of "
            f"{node_label(0, target)} that the other machines reach)"
        )
        raise UsageError(
            f"master address {master_addr} is not an address of {node_label(0, target)}: "
            f"{answer.get('addr_error')}{hint}"
        )


def _check_node(
    index: int, target: SshTarget, python: str, workdir: str, master_addr: str, master_port: int
) -> dict:
    """remote_preflight's answer from one node; node 0 also checks the master address and port."""
    argv = [python, "-c", PREFLIGHT_SRC, workdir]
    if index == 0:
        argv += [master_addr, str(master_port)]
    label = node_label(index, target)
    try:
        completed = run_remote(target, argv, PREFLIGHT_TIMEOUT_S)
    except (UsageError, MeasurementError) as exc:
        gone = gone_reason(target)  # an emulated cluster taken down: say that, in one line
        if gone:
            raise UsageError(gone) from None
        if isinstance(exc, HostUnreachableError):
            raise MeasurementError(f"{label} is unreachable: {exc}") from None
        kind = MeasurementError if isinstance(exc, MeasurementError) else UsageError
        raise kind(f"{label}: {exc}") from None
    if completed.returncode != 0:
        raise UsageError(f"{label}: {python} failed: {last_line(completed.stderr)}")
    try:
        return json.loads(last_line(completed.stdout))
    except ValueError:
        raise MeasurementError(
            f"{label}: unexpected preflight output: {last_line(completed.stdout)}"
        ) from None
