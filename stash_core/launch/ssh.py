"""Remote hosts over the system's OpenSSH client.

Nothing here ever goes through a local shell: every command is an argv list run with
shell=False. The remote side, however, always runs the command through the login shell of
the remote user, so each element of the remote argv is quoted with shlex.quote (POSIX sh
quoting: bash, dash, zsh and ksh accept it; csh and fish are not supported). Host and user
names are checked against strict patterns before anything runs, so a host such as
``a;touch /tmp/pwned`` or ``-oProxyCommand=...`` never reaches ssh.

Only the path of a private key is ever kept, never its contents.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.terminal import clipped

SSH_CONNECT_TIMEOUT_S = 5
# A DNS label: letters, digits and inner hyphens (also accepts names like "stash-n0").
_DNS_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME_RE = re.compile(rf"^{_DNS_LABEL}(?:\.{_DNS_LABEL})*\.?$")
# POSIX portable user names; no leading hyphen so a user can never look like an option.
_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
# ssh exits with 255 when ssh itself (not the remote command) failed.
_SSH_FAILED = 255
_SHELL_COMMAND_NOT_FOUND = 127
# bash names a missing program "command not found", or, given a path, "No such file or directory".
_NOT_FOUND_RE = re.compile(r"([^\s:]+): (?:(?:command )?not found|No such file or directory)")
# ssh refusing its configuration: "FILE: terminating, 3 bad configuration options" after a line per option
_BAD_CONFIG_RE = re.compile(r"^(.*): terminating, \d+ bad configuration options?$", re.MULTILINE)


# ssh setting a private key aside before it connects: 'Load key "K": bad permissions' (mode 644), or
# "invalid format"; the host's refusal that follows is then no fault of the host's.
_KEY_NOT_LOADED_RE = re.compile(r'^Load key "(.+)": (.+)$', re.MULTILINE)


class HostUnreachableError(UsageError):
    """ssh could not open a connection to the host (down, wrong name, refused, no route)."""


class AuthRefusedError(UsageError):
    """The host answered but refused our key (or its host key did not match)."""


def validate_host(text: str) -> str:
    """Return the host unchanged when it is a DNS name or an IPv4/IPv6 literal; else UsageError."""
    if not isinstance(text, str) or not text:
        raise UsageError("host name is empty")
    candidate = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.ip_address(candidate)
        return candidate
    except ValueError:
        pass
    if len(text) <= 253 and _DNS_NAME_RE.match(text) and not text.replace(".", "").isdigit():
        return text
    expected = "expected a DNS name or an IPv4/IPv6 address"
    raise UsageError(f"invalid host name {clipped(text, quoted=True)}: {expected}")


def validate_user(text: str) -> str:
    """Return the user name unchanged when it is a portable POSIX user name; else UsageError."""
    if not isinstance(text, str) or not _USER_RE.match(text):
        expected = "expected letters, digits, '_', '.', '-' (max 32)"
        raise UsageError(f"invalid user name {clipped(text, quoted=True)}: {expected}")
    return text


def _existing_file(path: Path | str, what: str) -> Path:
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise UsageError(f"{what} {str(path)!r} does not exist or is not a file")
    return resolved


@dataclass(frozen=True)
class SshTarget:
    """One remote host as ssh reaches it. Validated on construction, so a bad one cannot exist."""

    host: str
    user: str | None = None
    key_path: Path | None = None  # path of the private key; its contents are never read here
    port: int = 22
    config_file: Path | None = None  # an ssh_config file passed with -F
    port_given: bool = False  # written in the host ("h:22"): passed to ssh over a config file's Port

    def __post_init__(self) -> None:
        object.__setattr__(self, "host", validate_host(self.host))
        if self.user is not None:
            validate_user(self.user)
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise UsageError(f"invalid ssh port {clipped(repr(self.port))}: expected 1..65535")
        if self.key_path is not None:
            object.__setattr__(self, "key_path", _existing_file(self.key_path, "ssh key"))
        if self.config_file is not None:
            object.__setattr__(self, "config_file", _existing_file(self.config_file, "ssh config file"))

    @property
    def destination(self) -> str:
        """[user@]host as ssh takes it."""
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def where(self) -> str:
        """The host as messages name it: with its port where one was given (two sshd ports of one address
        are two machines, and an error must say which)."""
        if self.port == 22 and not self.port_given:
            return self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        """The host as it is given back to Stash: [user@]host[:port], an IPv6 address in brackets before
        a port."""
        if self.port == 22 and not self.port_given:
            return self.destination
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}:{self.port}" if self.user else f"{host}:{self.port}"


def parse_target(text: str, key_path: Path | None = None, config_file: Path | None = None) -> SshTarget:
    """Parse "[user@]host[:port]" (IPv6 as "[addr]:port") into a validated SshTarget."""
    text = text.strip()
    user = None
    if "@" in text:
        user, text = text.rsplit("@", 1)
    port, given = 22, True
    if text.startswith("["):  # [v6]:port or [v6]
        host, _, rest = text[1:].partition("]")
        given = bool(rest)
        if rest:
            if not rest.startswith(":"):
                raise UsageError(f"invalid host {clipped(text, quoted=True)}")
            port = _parse_port(rest[1:])
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        port = _parse_port(port_text)
    else:
        host, given = text, False  # a name, IPv4, or a bare IPv6 literal
    return SshTarget(host, user, key_path, port, config_file, port_given=given)


def _parse_port(text: str) -> int:
    if not text.isdigit():
        raise UsageError(f"invalid ssh port {clipped(text, quoted=True)}")
    return int(text)


def remote_command(remote_argv: list[str]) -> str:
    """The single string the remote shell will parse back into exactly remote_argv."""
    if not remote_argv or not all(isinstance(part, str) for part in remote_argv):
        raise UsageError("remote command must be a non-empty list of strings")
    return " ".join(shlex.quote(part) for part in remote_argv)


def ssh_argv(
    target: SshTarget, remote_argv: list[str], connect_timeout_s: int = SSH_CONNECT_TIMEOUT_S
) -> list[str]:
    """argv for the local ssh client that runs remote_argv on target (never through a local shell)."""
    if not isinstance(target, SshTarget):
        raise UsageError("target must be an SshTarget")
    argv = [
        "ssh",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={int(connect_timeout_s)}",
        "-o", "ServerAliveInterval=2",
        "-o", "ServerAliveCountMax=3",
    ]  # fmt: skip
    if target.key_path is not None:
        argv += ["-i", str(target.key_path), "-o", "IdentitiesOnly=yes"]
    if target.port != 22 or target.port_given:  # unless given, a config file's Port applies
        argv += ["-p", str(target.port)]
    if target.config_file is not None:
        argv += ["-F", str(target.config_file)]
    argv += [target.destination, "--", remote_command(remote_argv)]
    return argv


def last_line(text: str) -> str:
    """The last non-blank line of text, stripped; "(no message)" when there is none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


# The remote command under a time limit of its own, where the host has coreutils' timeout: killing the local
# ssh does not end it (sshd gives a session without a terminal no hang-up), and it was left running there.
_TIME_LIMITED = (
    'limit=$1; shift; if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 "$limit" "$@"; fi; '
    'exec "$@"'
)
_TIMED_OUT_THERE = (124, 137)  # timeout's status when it ended the command (137: killed after -k)
_LOCAL_GRACE_S = 8.0  # the local ssh waits this much longer: the remote limit (-k 5) ends the command first


def run_remote(
    target: SshTarget,
    remote_argv: list[str],
    timeout_s: float,
    check: bool = False,
    connect_timeout_s: int = SSH_CONNECT_TIMEOUT_S,
    name: str | None = None,
) -> subprocess.CompletedProcess:
    """Run remote_argv on target and return its CompletedProcess (text, stdout and stderr captured); the
    remote command is ended on the host after timeout_s. Messages call it `name` (remote_argv[0] unless
    given, as "command 'X'").

    Raises HostUnreachableError / AuthRefusedError (both UsageError) when ssh cannot get in,
    UsageError when the remote command does not exist, MeasurementError on timeout, and,
    with check=True, MeasurementError when the remote command exits non-zero.
    """
    name = name or f"command {remote_argv[0]!r}"
    limited = ["sh", "-c", _TIME_LIMITED, "sh", f"{timeout_s:g}", *remote_argv]
    argv = ssh_argv(target, limited, connect_timeout_s)
    if shutil.which(argv[0]) is None:
        raise UsageError("the OpenSSH client 'ssh' is not installed (apt-get install openssh-client)")
    timed_out = MeasurementError(f"{name} on host {target.where} timed out after {timeout_s:g} s")
    started = time.monotonic()
    try:
        completed = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s + _LOCAL_GRACE_S,
            shell=False,
        )
    except subprocess.TimeoutExpired:  # the host has no timeout command: its command may still run there
        waited_s = time.monotonic() - started
        raise MeasurementError(
            f"{name} on host {target.where} timed out after {waited_s:.0f} s (the host has no `timeout` "
            "command to end it there)"
        ) from None
    if completed.returncode in _TIMED_OUT_THERE and time.monotonic() - started >= timeout_s:
        raise timed_out
    raise_for_ssh_failure(target, completed.returncode, completed.stderr, remote_argv[0])
    if check and completed.returncode != 0:
        raise MeasurementError(
            f"{name} failed on host {target.where} (exit {completed.returncode}): "
            f"{last_line(completed.stderr)}"
        )
    return completed


def raise_for_ssh_failure(target: SshTarget, returncode: int, stderr: str, command: str) -> None:
    """Turn ssh's own failures (and a missing remote command) into one clear error line."""
    if returncode == _SSH_FAILED:
        reason = last_line(stderr)
        lowered = stderr.lower()
        bad_config = _BAD_CONFIG_RE.search(stderr)
        if bad_config:  # ssh read no host at all: the file is not a config it takes
            path = bad_config.group(1)
            first = next(line.strip() for line in stderr.splitlines() if line.strip())
            first = first.removeprefix(path).lstrip(": ")  # "FILE: line 1: Bad ..." or "FILE line 1: ..."
            raise UsageError(
                f"the ssh config file {path} is not one ssh can use ({first[:120]}); "
                f"ssh did not try host {target.where}"
            )
        unloaded = _KEY_NOT_LOADED_RE.search(stderr)
        if unloaded and "permission denied" in lowered:  # our side: ssh never offered the key
            path, why = unloaded.group(1), unloaded.group(2).strip()
            fix = f" (chmod 600 {path})" if "bad permissions" in why else ""
            raise AuthRefusedError(
                f"ssh could not use the key {path}: {why}{fix}; host {target.where} then refused the login"
            )
        if "permission denied" in lowered or "too many authentication failures" in lowered:
            raise AuthRefusedError(f"authentication refused by host {target.where}: {reason}")
        if "host key verification failed" in lowered or "host identification has changed" in lowered:
            # the host's key is unknown to this machine (or changed): ssh asks once, Stash's ssh never does
            raise AuthRefusedError(
                f"host key of {target.where} not trusted: {reason} (check the key, then add it: "
                f"ssh-keyscan{'' if target.port == 22 else f' -p {target.port}'} {shlex.quote(target.host)} "
                ">> ~/.ssh/known_hosts, or log in once with ssh)"
            )
        if not stderr.strip():  # ssh said nothing (LogLevel ERROR hides its timeouts): what is known
            reason = "ssh failed without a message (the connection timed out or was lost)"
        raise HostUnreachableError(f"cannot reach host {target.where}: {reason}")
    if returncode == _SHELL_COMMAND_NOT_FOUND:
        # bash: "bash: line 1: X: command not found"; dash: "sh: 1: exec: X: not found"
        missing = _NOT_FOUND_RE.search(stderr)
        if missing or "not found" in stderr.lower() or "no such file" in stderr.lower():
            name = missing.group(1).strip("'\"\u2018\u2019") if missing else command  # timeout quotes 'X'
            raise UsageError(f"command {name!r} not found on host {target.where}")


# What makes a host without Stash usable, said with the refusal.
NOT_INSTALLED_FIX = (
    ": install this Stash's version there, or give --python (a Python that has it) or --workdir (a checkout "
    "of it)"
)


def remote_check(
    target: SshTarget, python: str = "python3", workdir: str | None = None, timeout_s: float = 60.0,
    files: tuple[str, ...] = (),
) -> dict:
    """What the remote host has: python, torch, Stash and GPU versions/counts (remote_info's JSON).

    workdir, when given, is the directory the module is run from (for a checkout that is not
    pip-installed). Raises UsageError "Stash not installed on HOST" when stash_core is missing.
    """
    module_argv = [python, "-m", "stash_core.measure.remote_info", *files]  # argv: never spliced into a shell
    if workdir is not None:
        # "$1" is the directory and the rest the command: positional parameters, never spliced in.
        module_argv = ["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", workdir, *module_argv]
    try:
        check = f"the host check ({python} -m stash_core.measure.remote_info)"
        completed = run_remote(target, module_argv, timeout_s, name=check)
    except UsageError as exc:
        if isinstance(exc, (HostUnreachableError, AuthRefusedError)) or python not in str(exc):
            raise
        raise UsageError(f"python {python!r} not found on host {target.where}") from None
    stderr = completed.stderr
    if completed.returncode != 0:
        if "No module named stash_core" in stderr or "No module named 'stash_core" in stderr:
            missing = f"Stash not installed on {target.where} ({python} cannot import stash_core)"
            raise UsageError(missing + NOT_INSTALLED_FIX)
        if workdir is not None and "can't cd" in stderr.lower():
            raise UsageError(f"directory {workdir!r} does not exist on host {target.where}")
        raise MeasurementError(
            f"remote check failed on host {target.where} (exit {completed.returncode}): {last_line(stderr)}"
        )
    try:
        info = json.loads(last_line(completed.stdout))
    except json.JSONDecodeError:
        raise MeasurementError(
            f"remote check on host {target.where} printed no JSON: {last_line(completed.stdout)}"
        ) from None
    if not isinstance(info, dict):
        raise MeasurementError(f"remote check on host {target.where} printed unexpected JSON")
    return info
