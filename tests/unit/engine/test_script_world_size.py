"""A script whose work per process depends on the world size (threads, batch size per process): the profile
records what each run actually ran and either gives a coherent breakdown or says clearly that the runs are not
comparable, naming R0/R1 and the cause; never a share above 100% without that warning."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from support import stash_main

from stash_core.analysis.coherence import DIFFERENT_WORK, IMPOSSIBLE, share_findings

pytestmark = pytest.mark.launches  # every test here starts real measuring processes

HEAD = """
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                                    torch.nn.Linear(256, 4)))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
"""
LOOP = """
data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 4, (4096,)))
loader = DataLoader(data, batch_size=BATCH, shuffle=True)
for epoch in range(1000):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""
THREADS = HEAD + "torch.set_num_threads(max(1, os.cpu_count() // WORLD))\nBATCH = 32\n" + LOOP
BATCHES = HEAD + "torch.set_num_threads(1)\nBATCH = 64 // WORLD\n" + LOOP

FAST = ["--iterations", "30", "--max-phase-seconds", "15", "--progress", "none", "--no-store", "--device",
        "cpu", "--workers", "2", "--no-probes", "--stalls", "compute,interconnect"]  # fmt: skip


def profile(tmp_path: Path, source: str) -> tuple[dict, str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / "result.json"
    # main() in this process (the script's processes are real): no interpreter and imports to start first
    done = stash_main("profile", "--script", str(script), "--out", str(out), *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(out.read_text()), done.stdout


def check_never_silent(doc: dict, stdout: str) -> None:
    """A share beyond 100% either way by more than the noise comes with the impossible-run warning, on the
    first line of the warnings and in the command's output (or with the one of runs that did different
    work, which names the cause)."""
    breakdown = doc["breakdown"]
    if share_findings(breakdown):
        assert breakdown["warnings"][0].startswith((IMPOSSIBLE, DIFFERENT_WORK)), breakdown["warnings"]
        assert IMPOSSIBLE in stdout or DIFFERENT_WORK in stdout


def test_threads_that_depend_on_the_world_size_are_recorded_and_said(tmp_path: Path) -> None:
    doc, stdout = profile(tmp_path, THREADS)
    cores = os.cpu_count() or 1
    threads = {phase["name"]: phase["script"]["threads"] for phase in doc["phases"]}
    assert threads == {"R0": cores, "R1": max(1, cores // 2)}
    check_never_silent(doc, stdout)
    if cores > 1:
        first = doc["breakdown"]["warnings"][0]
        assert first.startswith((IMPOSSIBLE, DIFFERENT_WORK)), doc["breakdown"]["warnings"]
        assert f"torch threads per process R0 {cores}, R1 {cores // 2}" in first and "To do:" in first
        assert doc["spec"]["threads_per_worker"] is None  # no single figure: each run has its own
        assert "R0" in stdout and "R1" in stdout and "torch threads per process" in stdout


def test_a_batch_size_that_depends_on_the_world_size_is_recorded_and_said(tmp_path: Path) -> None:
    doc, stdout = profile(tmp_path, BATCHES)
    sizes = {phase["name"]: phase["script"]["batch_size"] for phase in doc["phases"]}
    assert sizes == {"R0": 64, "R1": 32}
    assert {phase["script"]["threads"] for phase in doc["phases"]} == {1}
    assert doc["spec"]["threads_per_worker"] == 1  # as the script ran them
    assert doc["spec"]["batch_size"] is None  # no single figure (it kept R0's 64)
    check_never_silent(doc, stdout)
    first = doc["breakdown"]["warnings"][0]
    assert first.startswith((IMPOSSIBLE, DIFFERENT_WORK)) and "batch size per process R0 64, R1 32" in first
