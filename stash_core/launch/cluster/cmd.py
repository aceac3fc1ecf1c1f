"""One setup command of the emulated cluster (ip, tc, ssh-keygen, sshd): an argv, never a shell."""

from __future__ import annotations

import subprocess

from stash_core.errors import MeasurementError


def run_cmd(argv: list[str], check: bool = True, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    """Run argv (no shell); with check, MeasurementError carrying its last stderr line when it fails."""
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, shell=False)
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"cluster command timed out: {' '.join(argv)}") from None
    if check and completed.returncode != 0:
        reason = (completed.stderr or completed.stdout).strip().splitlines()
        raise MeasurementError(
            f"cluster command failed: {' '.join(argv)}: {reason[-1] if reason else 'no message'}"
        )
    return completed
