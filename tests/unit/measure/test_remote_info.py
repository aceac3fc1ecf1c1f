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
