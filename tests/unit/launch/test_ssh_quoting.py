"""Host/user validation and the quoting of remote commands (no ssh server needed)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

import stash_core.launch
from stash_core.errors import UsageError
from stash_core.launch.ssh import SshTarget, parse_target, ssh_argv, validate_host, validate_user

NASTY_ARGS = [
    "plain",
    "two words",
    "$(touch {marker})",
    "`touch {marker}`",
    "; touch {marker}",
    "&& touch {marker}",
    "| touch {marker}",
    "it's",
    '"double"',
    "*",
    "~",
    "$HOME",
    "back\\slash",
    "new\nline",
    "",
    "-n",
]


@pytest.mark.parametrize(
    "host", ["node1", "stash-n0", "gpu-7.example.com", "example.com.", "10.0.0.1", "::1", "[fe80::1]", "A1"]
)
def test_valid_hosts(host):
    assert validate_host(host) == host.strip("[]")


@pytest.mark.parametrize(
    "host",
    [
        "a;touch /tmp/pwned",
        "-oProxyCommand=touch /tmp/pwned",
        "host name",
        "host$(id)",
        "host`id`",
        "user@host",
        "-p",
        "",
        "a..b",
        "-leading.example.com",
        "trailing-.example.com",
        "999.1.1.1",
        "x" * 64,
        "host\nname",
    ],
)
def test_invalid_hosts(host):
    with pytest.raises(UsageError):
        validate_host(host)
    with pytest.raises(UsageError):
        SshTarget(host=host)


@pytest.mark.parametrize("user", ["root", "ubuntu", "ec2-user", "_svc", "a.b"])
def test_valid_users(user):
    assert validate_user(user) == user


@pytest.mark.parametrize("user", ["-oProxyCommand=x", "a b", "a;b", "", "1abc", "x" * 33, "$(id)"])
def test_invalid_users(user):
    with pytest.raises(UsageError):
        validate_user(user)


def test_paths_must_exist(tmp_path):
    with pytest.raises(UsageError, match="ssh key"):
        SshTarget(host="node1", key_path=tmp_path / "missing")
    with pytest.raises(UsageError, match="ssh config file"):
        SshTarget(host="node1", config_file=tmp_path / "missing")
    with pytest.raises(UsageError, match="port"):
        SshTarget(host="node1", port=0)


def test_ssh_argv_shape(tmp_path):
    key = tmp_path / "id_test"
    key.write_text("not a real key; only the path is used\n")
    config = tmp_path / "config"
    config.write_text("")
    target = SshTarget(host="node1", user="alice", key_path=key, port=2222, config_file=config)
    argv = ssh_argv(target, ["echo", "hi there"], connect_timeout_s=7)
    assert argv[0] == "ssh"
    assert argv[argv.index("-i") + 1] == str(key)
    assert argv[argv.index("-p") + 1] == "2222"
    assert argv[argv.index("-F") + 1] == str(config)
    assert "ConnectTimeout=7" in argv and "BatchMode=yes" in argv
    assert "ServerAliveInterval=2" in argv and "ServerAliveCountMax=3" in argv
    assert argv[-3:] == ["alice@node1", "--", "echo 'hi there'"]
    # the key's contents are never part of anything we build or keep
    assert not any("not a real key" in part for part in argv)
    assert "not a real key" not in repr(target)


def test_default_port_and_no_user_leave_them_to_ssh():
    argv = ssh_argv(SshTarget(host="10.1.2.3"), ["true"])
    assert "-p" not in argv and "-i" not in argv and "-F" not in argv
    assert argv[-3:] == ["10.1.2.3", "--", "true"]


@pytest.mark.parametrize("args", [NASTY_ARGS])
def test_remote_command_round_trips_through_a_posix_shell(args, tmp_path):
    """What the remote login shell parses is exactly our argv, and nothing in it runs."""
    marker = tmp_path / "injected"
    args = [arg.format(marker=marker) for arg in args]
    command = ssh_argv(SshTarget(host="node1"), ["printf", "%s\\0", *args])[-1]
    assert shlex.split(command) == ["printf", "%s\\0", *args]
    for shell in ("sh", "bash"):
        completed = subprocess.run([shell, "-c", command], capture_output=True, check=True)
        assert completed.stdout.split(b"\0")[:-1] == [arg.encode() for arg in args]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node1", ("node1", None, 22)),
        ("alice@node1", ("node1", "alice", 22)),
        ("alice@node1:2222", ("node1", "alice", 2222)),
        ("10.0.0.5:22", ("10.0.0.5", None, 22)),
        ("root@[fe80::1]:2200", ("fe80::1", "root", 2200)),
        ("::1", ("::1", None, 22)),
    ],
)
def test_parse_target(text, expected):
    target = parse_target(text)
    assert (target.host, target.user, target.port) == expected


@pytest.mark.parametrize("text", ["alice@node1:22x", "root@a;touch /tmp/pwned", "bad user@node1", "node1:0"])
def test_parse_target_rejects(text):
    with pytest.raises(UsageError):
        parse_target(text)


def test_no_local_shell_anywhere():
    """The launch modules never hand a string to a local shell."""
    folder = Path(stash_core.launch.__file__).parent
    modules = sorted(folder.rglob("*.py"))
    names = {module.relative_to(folder).as_posix() for module in modules}
    assert {"ssh.py", "multinode.py", "cluster/lifecycle.py", "cluster/cmd.py", "supervisor.py"} <= names
    for module in modules:
        source = module.read_text()
        assert "shell=True" not in source, module.name
        assert "os.system" not in source and "os.popen" not in source, module.name


@pytest.mark.parametrize(
    ("text", "shown", "port_option"),
    [
        ("node1", "node1", False),
        ("node1:22", "node1:22", True),  # written, so it wins over a config file's Port
        ("alice@node1:2222", "alice@node1:2222", True),
        ("root@[::1]:22924", "root@[::1]:22924", True),  # was root@::1:22924, which reads back otherwise
        ("[fe80::1]", "fe80::1", False),
    ],
)
def test_a_host_reads_back_as_given_and_a_written_port_is_passed(text, shown, port_option):
    target = parse_target(text)
    assert str(target) == shown
    back = parse_target(str(target))
    assert (back.host, back.user, back.port) == (target.host, target.user, target.port)
    assert ("-p" in ssh_argv(target, ["true"])) is port_option
