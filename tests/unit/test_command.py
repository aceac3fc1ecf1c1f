"""A Ctrl-C while the command line loads ends `stash` and `python -m stash_core` alike: "stash: interrupted"
and exit status 130, no traceback (`python -m stash_core` once bypassed the guard and died by SIGINT)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

# Imported at start-up from PYTHONPATH: the Ctrl-C arrives exactly while the command line's module loads.
INTERRUPT_ON_LOAD = """
import sys

class _Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "stash_core.cli.main":
            raise KeyboardInterrupt

sys.meta_path.insert(0, _Interrupt())
"""


@pytest.mark.parametrize(
    "command",
    [["-m", "stash_core", "runs"], ["-c", "from stash_core.command import run; run()", "runs"]],
    ids=["python -m stash_core", "stash"],
)
def test_a_ctrl_c_while_the_command_line_loads_is_one_line_and_status_130(tmp_path: Path, command) -> None:
    (tmp_path / "sitecustomize.py").write_text(INTERRUPT_ON_LOAD)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "stash: interrupted"
