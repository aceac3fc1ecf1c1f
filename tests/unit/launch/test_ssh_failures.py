"""ssh's and the remote shell's failures become one line that names the missing program."""

from __future__ import annotations

import re
import shutil
import subprocess

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
