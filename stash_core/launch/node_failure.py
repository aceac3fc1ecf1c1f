"""Why a node of a multi-node launch failed, in one line, from its ssh exit status and stderr.

The remote program shares stderr with the OpenSSH client, so the lines are told apart by shape: ssh's own
complaints (connection lost, timeouts), the supervisor's STASH_SUPERVISOR lines, and the worker's exception
or torchrun's root cause (launch/torchrun_failure.py), never torchrun's own banner. A node of an emulated
cluster that went away is said to be gone, not unreachable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stash_core.errors import UsageError
from stash_core.launch import supervisor
from stash_core.launch.cluster.gone import gone_reason
from stash_core.launch.ssh import SshTarget, last_line, raise_for_ssh_failure
from stash_core.launch.torchrun_failure import root_cause

SSH_FAILED = 255  # ssh itself failed, not the remote command
_PORT_IN_USE_RE = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
# What the OpenSSH client itself prints when a session breaks (as opposed to the remote program's stderr).
_SSH_CLIENT_LINE_RE = re.compile(
    r"^(?:ssh: |Timeout, server .* not responding|client_loop: |Connection to .* closed|"
    r"Connection (?:reset|closed) by |Broken pipe|packet_write_wait: |Read from remote host )"
)


def node_label(index: int, target: SshTarget) -> str:
    return f"node {index} ({target.where})"


def port_in_use(stderr_lines: Iterable[str]) -> bool:
    """Whether the lines say a listening port was taken (the rendezvous of node 0)."""
    return any(_PORT_IN_USE_RE.search(line) for line in stderr_lines)


def lost_connection_reason(target: SshTarget, stderr_lines: list[str]) -> str:
    """ssh's own last word on a broken session, as raise_for_ssh_failure words it."""
    ssh_lines = [line for line in stderr_lines if _SSH_CLIENT_LINE_RE.match(line)]
    own = ssh_lines[-1] if ssh_lines else "the connection dropped (no answer from the host)"
    try:
        raise_for_ssh_failure(target, SSH_FAILED, own, "ssh")
    except UsageError as exc:
        return str(exc)
    return own


def failure_reason(target: SshTarget, returncode: int | None, stderr_lines: list[str]) -> str:
    """What went wrong on a node whose ssh ended with returncode, e.g. "exited with code 1: ValueError: x"."""
    text = "\n".join(stderr_lines)
    if returncode == SSH_FAILED:
        reason = gone_reason(target) or lost_connection_reason(target, stderr_lines)
        return f"lost its ssh connection: {reason}"
    if returncode == supervisor.EXIT_WORKDIR:
        return last_line(text)
    detail = root_cause(stderr_lines, default="(no message)")
    if returncode is not None and returncode > 128 and returncode - 128 < 65:
        return f"was ended by signal {returncode - 128}: {detail}"
    return f"exited with code {returncode}: {detail}"
