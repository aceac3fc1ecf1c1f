"""ssh's and the remote shell's failures become one line that names the missing program."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from stash_core.errors import UsageError
from stash_core.launch.ssh import HostUnreachableError, SshTarget, raise_for_ssh_failure, ssh_argv

TARGET = SshTarget(host="node0")


@pytest.mark.parametrize("program", ["no-such-python-stash", "/no/such/dir/python3"])
@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_missing_program_is_named_whether_given_by_name_or_path(program, shell):
    # What the remote login shell says, taken from a real shell here (ssh runs the command through one).
    completed = subprocess.run([shell, "-c", f"{program} -m stash_core"], capture_output=True, text=True)
    with pytest.raises(UsageError, match=re.escape(f"command '{program}' not found on host node0")):
        raise_for_ssh_failure(TARGET, completed.returncode, completed.stderr, program)


def test_a_program_that_fails_is_not_called_missing():
    completed = subprocess.run(["bash", "-c", "exit 3"], capture_output=True, text=True)
    raise_for_ssh_failure(TARGET, completed.returncode, completed.stderr, "true")  # its caller judges exit 3


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client here")
def test_an_ssh_config_file_ssh_refuses_is_named_not_the_host(tmp_path):
    """`remote check HOST --ssh-config FILE` with a FILE that is no ssh_config said "cannot reach host HOST:
    ... terminating, 2 bad configuration options"; ssh never tried the host."""
    config = tmp_path / "not-an-ssh-config"
    config.write_text("hello world\nfoo bar\n")
    target = SshTarget(host="node0", config_file=config)
    completed = subprocess.run(ssh_argv(target, ["true"]), capture_output=True, text=True)
    with pytest.raises(UsageError) as raised:
        raise_for_ssh_failure(target, completed.returncode, completed.stderr, "true")
    assert not isinstance(raised.value, HostUnreachableError)
    assert str(raised.value).startswith(f"the ssh config file {config} is not one ssh can use (")
    assert "Bad configuration option: hello" in str(raised.value) and "cannot reach" not in str(raised.value)


# What OpenSSH prints when it sets a private key aside (mode 644) and the host then refuses the login.
UNPROTECTED_KEY_STDERR = """\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Permissions 0644 for '/home/u/.ssh/id_ed25519' are too open.
It is required that your private key files are NOT accessible by others.
This private key will be ignored.
Load key "/home/u/.ssh/id_ed25519": bad permissions
u@node0: Permission denied (publickey).
"""


def test_a_key_ssh_sets_aside_is_named_not_blamed_on_the_host():
    with pytest.raises(UsageError) as raised:
        raise_for_ssh_failure(TARGET, 255, UNPROTECTED_KEY_STDERR, "true")
    assert str(raised.value) == (
        "ssh could not use the key /home/u/.ssh/id_ed25519: bad permissions "
        "(chmod 600 /home/u/.ssh/id_ed25519); host node0 then refused the login"
    )
    invalid = 'Load key "/k": invalid format\nu@node0: Permission denied (publickey).\n'
    with pytest.raises(UsageError, match=r"^ssh could not use the key /k: invalid format; host node0"):
        raise_for_ssh_failure(TARGET, 255, invalid, "true")


def test_an_ssh_failure_without_a_message_says_what_is_known():
    """ssh exits 255 saying nothing (its LogLevel ERROR hides a timeout): the line read "(no message)"."""
    with pytest.raises(HostUnreachableError) as raised:
        raise_for_ssh_failure(TARGET, 255, "", "true")
    said = str(raised.value)
    assert "(no message)" not in said
    assert said.startswith("cannot reach host node0: ssh failed without a message")


def _ssh_here(monkeypatch) -> None:
    """ssh stood in for by a local shell given ssh's remote command line: killing it, as killing ssh, leaves
    what it started running."""
    from stash_core.launch import ssh

    monkeypatch.setattr(ssh, "ssh_argv", lambda target, argv, *_: ["sh", "-c", ssh.remote_command(argv)])


def _running(tag: str) -> list[int]:
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and tag.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_remote_command_past_its_time_is_ended_there_not_left_running(monkeypatch, tmp_path):
    """A host check that hung (a torch import stuck in a driver) was left running on the host, its parent
    gone, when the local ssh was killed at the time limit."""
    import time

    from stash_core.errors import MeasurementError
    from stash_core.launch.ssh import run_remote

    _ssh_here(monkeypatch)
    tag = f"stash-hung-{tmp_path.name}"
    said = "the hung check on host node0 timed out after 1 s"
    with pytest.raises(MeasurementError, match=re.escape(said)):
        run_remote(TARGET, [sys.executable, "-c", "import time; time.sleep(30)", tag], 1, 
                   name="the hung check")
    time.sleep(0.5)
    left = _running(tag)
    for pid in left:  # never leave it behind, even when the test fails
        subprocess.run(["kill", "-9", str(pid)], check=False)
    assert left == []


def test_a_missing_remote_program_under_the_time_limit_is_still_named(monkeypatch):
    from stash_core.launch.ssh import run_remote

    _ssh_here(monkeypatch)
    said = "command 'no-such-command-stash' not found on host node0"
    with pytest.raises(UsageError, match=re.escape(said)):
        run_remote(TARGET, ["no-such-command-stash", "--flag"], 20)
    assert run_remote(TARGET, ["sh", "-c", "echo $0 ok", "it's"], 20).stdout == "it's ok\n"


def test_two_sshd_ports_of_one_address_are_named_apart():
    """`--hosts 127.0.0.1:22036,127.0.0.1:22037` with the second refusing the key said "authentication
    refused by host 127.0.0.1": not which of the two."""
    from stash_core.launch.ssh import AuthRefusedError, parse_target

    second = parse_target("root@127.0.0.1:22037")
    with pytest.raises(AuthRefusedError, match=re.escape("authentication refused by host 127.0.0.1:22037: ")):
        raise_for_ssh_failure(second, 255, "root@127.0.0.1: Permission denied (publickey).", "python3")
    assert parse_target("[::1]:2200").where == "[::1]:2200" and parse_target("gpu-a").where == "gpu-a"


def test_a_host_without_timeout_says_its_command_may_still_run_there(monkeypatch, tmp_path):
    from stash_core.errors import MeasurementError
    from stash_core.launch import ssh

    monkeypatch.setattr(ssh, "_LOCAL_GRACE_S", 0.5)
    monkeypatch.setattr(ssh, "_TIME_LIMITED", 'shift; exec "$@"')  # as on a host without coreutils' timeout
    _ssh_here(monkeypatch)
    tag = f"stash-no-timeout-{tmp_path.name}"
    try:
        with pytest.raises(MeasurementError, match="after 2 s \\(the host has no `timeout` command"):
            ssh.run_remote(TARGET, [sys.executable, "-c", "import time; time.sleep(30)", tag], 1.5)
    finally:
        for pid in _running(tag):
            subprocess.run(["kill", "-9", str(pid)], check=False)


@pytest.mark.parametrize(
    ("target", "scan"),
    [(TARGET, "ssh-keyscan node0"), (SshTarget(host="node1", port=2222), "ssh-keyscan -p 2222 node1")],
)
def test_an_untrusted_host_key_says_how_to_trust_it(target, scan):
    """It said "host key of node0 not trusted: Host key verification failed." and nothing more to do."""
    stderr = "Host key verification failed.\n"
    with pytest.raises(UsageError) as refused:
        raise_for_ssh_failure(target, 255, stderr, "python3")
    assert f"(check the key, then add it: {scan} >> ~/.ssh/known_hosts, or log in once with ssh)" in str(
        refused.value
    )


def test_a_host_without_stash_says_what_makes_it_usable(monkeypatch):
    from stash_core.launch import ssh

    failed = subprocess.CompletedProcess([], 1, "", "/usr/bin/python3: No module named stash_core\n")
    monkeypatch.setattr(ssh, "run_remote", lambda *args, **kwargs: failed)
    with pytest.raises(UsageError) as refused:
        ssh.remote_check(TARGET)
    assert str(refused.value) == (
        "Stash not installed on node0 (python3 cannot import stash_core): install this Stash's version "
        "there, or give --python (a Python that has it) or --workdir (a checkout of it)"
    )
