"""remote_info prints one JSON line describing this host (what remote_check reads over ssh)."""

from __future__ import annotations

import json
import platform

import torch

import stash_core
from stash_core.measure import remote_info


def test_collect_describes_this_host():
    info = remote_info.collect()
    assert info["stash_version"] == stash_core.__version__
    assert info["torch_version"] == torch.__version__
    assert info["python_version"] == platform.python_version()
    assert info["gpu_count"] == len(info["gpus"])
    assert info["gpu_status"]


def test_main_prints_one_json_line(capsys):
    assert remote_info.main() == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["torch_version"] == torch.__version__


def test_what_a_host_sends_is_printed_as_text():
    """A host's name, Python and GPU names reached the terminal raw: colour, title and clear-screen escapes
    acted on it (the JSON output escaped them already)."""
    from stash_core.cli.remote_text import format_remote_info

    info = {"hostname": "evil\x1b[31mRED\x1b]0;title\x07", "python_version": "3.11\x1b[2J",
            "python_executable": "/x", "torch_version": "2.13", "stash_version": "0.1", "cpu_count": 2,
            "gpus": [{"name": "GPU\x1b[5m"}]}  # fmt: skip
    text = format_remote_info("10.0.0.1", info)
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b[31mRED\\x1b]0;title\\x07" in text and "GPU\\x1b[5m" in text


def test_a_host_with_another_stash_version_is_told_so():
    """A profile refuses such a host; the check said nothing of it and exited 0."""
    from stash_core import __version__
    from stash_core.cli.remote_text import format_remote_info

    info = {"hostname": "n1", "python_version": "3.11", "python_executable": "/x", "torch_version": "2.13",
            "stash_version": "0.1.0", "cpu_count": 2, "gpus": []}  # fmt: skip
    told = f"stash     0.1.0 (this machine runs {__version__}: a profile needs the same version on every " \
        "host)"
    assert told in format_remote_info("n1", info).splitlines()
    assert f"stash     {__version__}" in format_remote_info("n1", {**info, "stash_version": __version__})


def test_a_host_counts_the_cores_its_processes_may_use():
    """A host whose shell runs on one core of two (a container's cpuset, a taskset) reported both, so a
    profile over hosts would put two workers where one core serves them; a local profile counts one."""
    import os
    import subprocess
    import sys

    import pytest

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores to leave one out")
    source = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from stash_core.measure import remote_info; print(remote_info.collect()['cpu_count'])"
    )
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"
