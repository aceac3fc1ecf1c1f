"""`stash profile` across the emulated cluster when something goes wrong: host down, busy port, no Stash, a
rank killed, a link cut mid-run; and `stash remote check` of a node. Nothing is left running on the nodes.

One 2-node cluster for the module at 200 Mbit/s; the model (netmodel.py) has 6.3 MB of gradients and almost no
compute, so R1n runs long enough to be cut.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from clusterkit import (
    NET_MODEL,
    cluster_fixture,
    layout,
    net_profile,
    port_taken,
    stash_argv,
    stash_env,
    tagged_processes,
    wait_until,
    worker_processes,
)

from stash_core.launch import cluster
from stash_core.measure import protocol

pytestmark = pytest.mark.cluster

cluster_state = cluster_fixture(2, "faults", bandwidth="200mbit", latency="0ms")


def test_host_down_before_start_fails_fast_and_is_recorded(cluster_state, tmp_path, no_leftovers):
    started = time.monotonic()
    try:
        cluster.set_link(1, down=True, state_dir=cluster_state)
        result, doc = net_profile(cluster_state, tmp_path, "--iterations", "5")
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)
    assert result.returncode == 2
    assert f"cannot reach host {layout(cluster_state).node_address(1)}" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60
    assert doc["status"] == "failed" and doc["phases"] == []


def test_busy_master_port_and_missing_stash_are_clear(cluster_state, tmp_path, no_leftovers):
    port = 29777
    with port_taken(layout(cluster_state).node_namespace(0), port):
        result, doc = net_profile(cluster_state, tmp_path, "--iterations", "5", "--master-port", str(port))
    assert result.returncode == 2
    assert f"port {port} is already in use on the master" in result.stderr
    assert doc["status"] == "failed" and doc["phases"][0]["status"] == "failed"

    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 without Stash here")
    result, _ = net_profile(cluster_state, tmp_path, "--python", "/usr/bin/python3", "--workdir", "/tmp")
    assert result.returncode == 2
    node_0 = layout(cluster_state).node_address(0)
    assert f"Stash not installed on {node_0}" in result.stderr or "torch is not usable" in result.stderr


def _start_profile(state: Path, tmp: Path) -> tuple[subprocess.Popen, Path]:
    out = tmp / "run.json"
    argv = stash_argv(
        "profile", *NET_MODEL, "--cluster", "emulated", "--cluster-state", str(state), "--stalls", "network",
        # R1 (2 workers on one node, ~0.02 s per iteration) is done in a second; R1n (~0.3 s) still runs
        # when its first progress line comes after 10 iterations
        "--iterations", "80", "--no-probes",
        "--out", str(out), "--no-store", "--progress", "json",
    )  # fmt: skip
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=stash_env()
    )
    return process, out


def _wait_for_r1n_progress(process: subprocess.Popen) -> None:
    for line in process.stdout:
        message = protocol.parse(line)
        if message and message[0] == "PROGRESS" and message[1].get("phase") == "R1n":
            return
    raise AssertionError(f"the profile ended before R1n measured: {process.stderr.read()}")


@pytest.mark.slow
def test_killed_rank_fails_the_run_and_ends_every_process(cluster_state, tmp_path, no_leftovers):
    process, out = _start_profile(cluster_state, tmp_path)
    try:
        _wait_for_r1n_progress(process)
        victims = worker_processes(cluster_state, node=1)
        assert len(victims) == 1
        victims[0].kill()
        started = time.monotonic()
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert time.monotonic() - started < 60
    assert process.returncode == 1
    assert "run R1n" in stderr and "failed" in stderr and "Traceback" not in stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed"
    assert [(p["name"], p["status"]) for p in doc["phases"]] == [("R1", "completed"), ("R1n", "failed")]
    assert doc["breakdown"]["reference_phase"] == "R1"  # what did complete is kept


@pytest.mark.slow
def test_link_cut_mid_run_fails_within_bounded_time(cluster_state, tmp_path, nodes, no_leftovers):
    process, out = _start_profile(cluster_state, tmp_path)
    try:
        _wait_for_r1n_progress(process)
        cluster.set_link(1, down=True, state_dir=cluster_state)
        started = time.monotonic()
        _, stderr = process.communicate(timeout=120)
        elapsed_s = time.monotonic() - started
        # checked while the link is still down: node 1's processes end without help from the launcher
        assert wait_until(lambda: not tagged_processes(nodes), 30), f"left running: {tagged_processes(nodes)}"
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)
        process.kill()
    assert elapsed_s < 60
    assert process.returncode == 1
    node_1 = layout(cluster_state).node_address(1)
    assert f"node 1 ({node_1}) lost its ssh connection" in stderr and "run R1n" in stderr
    doc = json.loads(out.read_text())
    assert [(p["name"], p["status"]) for p in doc["phases"]] == [("R1", "completed"), ("R1n", "failed")]


def test_remote_check_reports_what_a_node_offers(cluster_state):
    import sys

    import stash_core

    result = subprocess.run(
        stash_argv(
            "remote", "check", layout(cluster_state).node_address(1),
            "--ssh-config", str(cluster_state / "ssh_config"),
            "--python", sys.executable, "--workdir", str(Path(stash_core.__file__).resolve().parents[1]),
        ),  # fmt: skip
        capture_output=True, text=True, env=stash_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"stash     {stash_core.__version__}" in result.stdout
    assert "torch     2." in result.stdout and "gpus      0" in result.stdout
