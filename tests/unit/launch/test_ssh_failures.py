"""ssh's and the remote shell's failures become one line that names the missing program."""

from __future__ import annotations

import re
import subprocess

import pytest

from stash_core.errors import UsageError
from stash_core.launch.ssh import SshTarget, raise_for_ssh_failure

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
