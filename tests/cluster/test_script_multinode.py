"""A user's DDP script across 2 nodes of the emulated cluster (its own cluster, this process's "script"): the
script, unmodified, runs under torchrun on both nodes, and the profile gives a network stall, R1n against R1,
with the breakdown adding up to the realistic iteration time. No process is left behind on either node.
"""

from __future__ import annotations

import json
import math
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterkit import cluster_name, only_sshd_left, stash_argv, stash_env, tagged_processes, wait_until

from stash_core.launch import cluster

pytestmark = pytest.mark.cluster

NAME = cluster_name("script")

# DDP set up by the script from torchrun's environment; 6.3 MB of gradients and little compute, so the
# 200 Mbit/s link dominates the iteration.
DDP = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(768, 2048), torch.nn.ReLU(),
                                                    torch.nn.Linear(2048, 10)))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 768), torch.randint(0, 10, (8,))
for step in range(100_000):
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def script_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state = tmp_path_factory.mktemp("script-cluster")
    try:
        cluster.cluster_up(2, bandwidth="200mbit", latency="0ms", state_dir=state, name=NAME)
        yield state
    finally:
        cluster.cluster_down(state, name=NAME)


@pytest.mark.slow
@pytest.mark.quiet  # the network stall: R1n's measured iteration against R1's
def test_a_ddp_script_over_two_nodes_gives_a_network_stall(script_cluster: Path, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(DDP))
    out = tmp_path / "run.json"
    argv = stash_argv(
        "profile", "--script", str(script), "--workers", "1", "--nodes", "2", "--cluster", "emulated",
        "--cluster-state", str(script_cluster), "--cluster-name", NAME, "--stalls", "network",
        "--iterations", "12", "--max-phase-seconds", "60", "--device", "cpu", "--no-probes",
        "--out", str(out), "--no-store", "--progress", "none",
    )  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=stash_env(), timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(out.read_text())
    assert [phase["name"] for phase in doc["phases"]] == ["R1", "R1n"]
    assert doc["phases"][1]["nodes"] == 2 and doc["model"]["kind"] == "script"
    breakdown = doc["breakdown"]
    network = breakdown["stalls"]["network"]
    assert network["status"] == "measured" and network["seconds"] > 0, network
    named = sum(entry["seconds"] or 0.0 for entry in breakdown["stalls"].values())
    assert math.isclose(named + breakdown["unattributed_s"], breakdown["iteration_s"], rel_tol=1e-9)
    # Both nodes' ranks came back, with the forward pass split through the DDP wrapper.
    assert {rank["node"] for rank in doc["phases"][1]["ranks"]} == {0, 1}
    assert doc["phases"][1]["parts_mean_s"]["forward_s"] > 0
    left = tagged_processes  # on the cluster's nodes
    assert wait_until(lambda: not left(script_cluster), 20), f"left running: {left(script_cluster)}"
    assert wait_until(lambda: only_sshd_left(script_cluster), 20)
