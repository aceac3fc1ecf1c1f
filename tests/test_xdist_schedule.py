"""CI's pytest-xdist scheduling (xdist_schedule.py): a worker that dies mid-file costs the test it died in,
the other tests of its file still run, and the run ends (pytest-xdist's own loadfile scheduling hung)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FILES = {
    "test_a.py": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    # the worker dies here, with one test of the file left: a replacement must be given it, alone
    "test_b.py": "import os\n\n\ndef test_dies():\n    os._exit(1)\n\n\ndef test_after():\n    pass\n",
    "test_c.py": "def test_three():\n    pass\n",
}
LIMIT_S = 120  # a pytest-xdist start-up is a few seconds; the unmended run waited forever


@pytest.mark.parametrize(
    ("workers", "dies", "says"),
    [(1, "os._exit(1)", "exit status 1"), (2, "os.kill(os.getpid(), 9)", "signal SIGKILL")],
)
def test_a_worker_that_dies_fails_its_test_and_the_rest_of_its_file_runs(tmp_path, workers, dies, says):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text.replace("os._exit(1)", dies))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    argv = [sys.executable, "-m", "pytest", "-p", "xdist_schedule", "-p", "no:cacheprovider", "-q",
            "-n", str(workers), "--dist", "loadfile", "-rf"]  # fmt: skip
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LIMIT_S)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 1 and "1 failed, 4 passed" in summary, result.stdout + result.stderr
    assert "crashed while running 'test_b.py::test_dies'" in result.stdout
    assert f"] ended by {says}; the machine had " in result.stdout


def test_a_test_that_hangs_is_ended_at_the_suite_s_timeout_and_the_run_goes_on(tmp_path):
    """The suite's faulthandler settings (pyproject.toml), at 2 s here: the hanging test fails with its
    stack printed, its worker is replaced, and the tests after it run."""
    for name, text in FILES.items():
        (tmp_path / name).write_text(text.replace("os._exit(1)", "__import__('time').sleep(600)"))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfaulthandler_timeout = 2\nfaulthandler_exit_on_timeout = true\n"
    )
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    argv = [sys.executable, "-m", "pytest", "-p", "xdist_schedule", "-p", "no:cacheprovider", "-q",
            "-n", "2", "--dist", "loadfile", "-rf"]  # fmt: skip
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LIMIT_S)
    assert "1 failed, 4 passed" in result.stdout.strip().splitlines()[-1], result.stdout + result.stderr
    assert "Timeout (0:00:02)!" in result.stderr and "in test_dies" in result.stderr, result.stderr
