"""The memory probe's CPU peak is the training step's, not the import of torch's compiler that the step's
optimizer would make (some 70 MB at resnet10's size, counted as the step's before the stand-in)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO

# In a new interpreter (the peak is the process's): the probe's peak, and whether the compiler got imported.
PROBE = """
import sys
{preload}
from stash_core.measure.memprobe import peak_step_bytes
print(peak_step_bytes("resnet10", 8, "cpu", 10, (3, 32, 32)), "torch._dynamo" in sys.modules)
"""


def _peak(preload: str) -> tuple[int, bool]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(preload=preload)],
        capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    peak, imported = done.stdout.split()
    return int(peak), imported == "True"


@pytest.mark.slow  # two new interpreters
def test_the_cpu_peak_leaves_out_the_compilers_import():
    served, imported = _peak("")
    # the compiler imported before the probe's window opens: what the step itself holds, with the real guards
    step_only, _ = _peak("import torch._dynamo")
    assert not imported
    assert 0 < served < 1.3 * step_only  # the compiler's import in the window made it some 1.7x
