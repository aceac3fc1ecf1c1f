"""`stash profile` and `stash probe` across the emulated cluster: network stall against the link's limit,
probes against the tc rate, and the faults (host down, rank killed, link cut, busy port, no Stash).

One 2-node cluster for the module, without CPU splitting: R1 (2 workers on node 0) and R1n (1 worker on
each node) then use the same two cores, so their difference is the network alone. The model
(netmodel.py) has 6.3 MB of gradients and almost no compute, so the network dominates.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
from clusterkit import (
    cluster_fixture,
    only_sshd_left,
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

cluster_state = cluster_fixture(2, bandwidth="200mbit", latency="0ms")

MODEL = [
    "--model", f"{Path(__file__).resolve().parent / 'netmodel.py'}:make", "--input-shape", "3,16,16",
    "--num-classes", "10", "--batch-size", "8", "--workers", "1", "--nodes", "2",
]  # fmt: skip


def _profile(
    state: Path, tmp: Path, *args: str, timeout_s: float = 300
) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp / f"run-{len(list(tmp.glob('run-*.json')))}.json"
    argv = stash_argv(
        "profile", *MODEL, "--cluster", "emulated", "--cluster-state", str(state), "--stalls", "network",
        "--out", str(out), "--db", str(tmp / "results.duckdb"), "--progress", "none", *args,
    )  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, env=stash_env(), timeout=timeout_s)
    return result, (json.loads(out.read_text()) if out.exists() else {})


@pytest.fixture
def no_leftovers(cluster_state):
    """After the test: no process of any launch alive anywhere, only sshd in the node namespaces."""
    yield
    assert wait_until(lambda: not tagged_processes(), 20), f"left running: {tagged_processes()}"
    assert wait_until(lambda: only_sshd_left(cluster_state), 20)


@pytest.fixture(scope="module")
def two_bandwidths(cluster_state, tmp_path_factory):
    """The same profile at 200 and 800 Mbit/s (set by --cluster-bandwidth for each profile)."""
    tmp = tmp_path_factory.mktemp("bandwidths")
    runs = {}
    for rate in ("200mbit", "800mbit"):
        runs[rate] = _profile(cluster_state, tmp, "--iterations", "12", "--cluster-bandwidth", rate)
    return tmp, runs


@pytest.mark.slow
def test_lower_bandwidth_gives_the_larger_network_stall(two_bandwidths):
    _, runs = two_bandwidths
    for result, doc in runs.values():
        assert result.returncode == 0, result.stderr
        assert [phase["name"] for phase in doc["phases"]] == ["R1", "R1n"]
        assert doc["breakdown"]["network_reference"] == "R1 (2 workers, 1 machine) vs R1n (2x1 workers)"
        assert "network figure compares R1 (2 workers, 1 machine) vs R1n (2x1 workers)" in result.stdout
        assert doc["spec"]["cluster_bandwidth"] in ("200mbit", "800mbit")
        assert [rank["node"] for rank in doc["phases"][1]["ranks"]] == [0, 1]  # every rank reported back
    slow = runs["200mbit"][1]["breakdown"]["stalls"]["network"]["seconds"]
    fast = runs["800mbit"][1]["breakdown"]["stalls"]["network"]["seconds"]
    assert slow > fast > 0


@pytest.mark.slow
def test_measured_gradient_allreduce_stays_above_the_link_limit(two_bandwidths):
    _, runs = two_bandwidths
    for rate_bps, (_, doc) in zip((200e6, 800e6), runs.values(), strict=True):
        network = doc["breakdown"]["communication"]["network"]
        assert network["link_gbps"] == pytest.approx(rate_bps / 1e9)
        # physics: the ring moves 2(n-1)/n x gradient bytes through a link of that rate
        assert network["link_lower_bound_s"] == pytest.approx(doc["model"]["grad_bytes"] * 8 / rate_bps)
        assert network["allreduce_s"] > network["link_lower_bound_s"]
        # and the stall itself cannot beat the wire either (nothing of it hides behind this tiny backward)
        assert doc["breakdown"]["stalls"]["network"]["seconds"] > 0.5 * network["link_lower_bound_s"]


@pytest.mark.slow
def test_probe_bus_bandwidth_follows_the_tc_rate_and_is_stored(two_bandwidths):
    tmp, runs = two_bandwidths
    peaks = {}
    for rate, (_, doc) in runs.items():
        probe = next(probe for probe in doc["probes"] if probe["phase"] == "R1n")
        assert probe["nodes"] == 2 and probe["world_size"] == 2
        assert {row["scope"] for row in probe["p2p"]} == {"inter_node"}
        # the largest message: tc's token bucket lets small ones through faster than the rate
        peaks[rate] = max(probe["allreduce"], key=lambda row: row["size_bytes"])["busbw_gbps"]
    # within a sensible factor of the shaped rate (headers, gloo's CPU cost on 2 cores)
    assert 0.5 * 0.2 < peaks["200mbit"] < 1.25 * 0.2
    assert 0.3 * 0.8 < peaks["800mbit"] < 1.25 * 0.8
    assert peaks["800mbit"] > peaks["200mbit"]
    with duckdb.connect(str(tmp / "results.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT p.nodes, count(*) FROM probes p JOIN runs r USING (run_id) "
            "WHERE p.kind = 'allreduce' AND p.phase = 'R1n' GROUP BY p.nodes"
        ).fetchall()
    expected = sum(len(doc["probes"][-1]["allreduce"]) for _, doc in runs.values())
    assert rows == [(2, expected)]


def test_stash_probe_across_two_nodes(cluster_state, tmp_path):
    out = tmp_path / "probe.json"
    result = subprocess.run(
        stash_argv(
            "probe", "--workers", "1", "--nodes", "2", "--cluster", "emulated", "--cluster-state",
            str(cluster_state), "--max-size", "4MiB", "--p2p-size", "1MiB", "--out", str(out), "--db",
            str(tmp_path / "p.duckdb"),
        ),  # fmt: skip
        capture_output=True, text=True, env=stash_env(), timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "p2p inter_node" in result.stdout and "alpha-beta fit" in result.stdout
    probe = json.loads(out.read_text())
    assert probe["nodes"] == 2 and probe["link_gbps"] == pytest.approx(0.2)
    largest = max(probe["allreduce"], key=lambda row: row["size_bytes"])
    assert largest["size_bytes"] == 4 * 1024 * 1024
    assert 0.1 < largest["busbw_gbps"] < 0.25  # the 200 Mbit/s link
    with duckdb.connect(str(tmp_path / "p.duckdb"), read_only=True) as con:
        stored = con.execute(
            "SELECT count(*), min(nodes) FROM probes WHERE probe_id = ?", [probe["probe_id"]]
        )
        assert stored.fetchone() == (len(probe["allreduce"]) + len(probe["p2p"]), 2)


def test_host_down_before_start_fails_fast_and_is_recorded(cluster_state, tmp_path, no_leftovers):
    started = time.monotonic()
    try:
        cluster.set_link(1, down=True, state_dir=cluster_state)
        result, doc = _profile(cluster_state, tmp_path, "--iterations", "5")
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)
    assert result.returncode == 2
    assert "cannot reach host 10.213.0.11" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - started < 60
    assert doc["status"] == "failed" and doc["phases"] == []


def test_busy_master_port_and_missing_stash_are_clear(cluster_state, tmp_path, no_leftovers):
    port = 29777
    with port_taken("stash-n0", port):
        result, doc = _profile(cluster_state, tmp_path, "--iterations", "5", "--master-port", str(port))
    assert result.returncode == 2
    assert f"port {port} is already in use on the master" in result.stderr
    assert doc["status"] == "failed" and doc["phases"][0]["status"] == "failed"

    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 without Stash here")
    result, _ = _profile(cluster_state, tmp_path, "--python", "/usr/bin/python3", "--workdir", "/tmp")
    assert result.returncode == 2
    assert "Stash not installed on 10.213.0.10" in result.stderr or "torch is not usable" in result.stderr


def _start_profile(state: Path, tmp: Path) -> tuple[subprocess.Popen, Path]:
    out = tmp / "run.json"
    argv = stash_argv(
        "profile", *MODEL, "--cluster", "emulated", "--cluster-state", str(state), "--stalls", "network",
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
        victims = worker_processes(node=1)
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
def test_link_cut_mid_run_fails_within_bounded_time(cluster_state, tmp_path, no_leftovers):
    process, out = _start_profile(cluster_state, tmp_path)
    try:
        _wait_for_r1n_progress(process)
        cluster.set_link(1, down=True, state_dir=cluster_state)
        started = time.monotonic()
        _, stderr = process.communicate(timeout=120)
        elapsed_s = time.monotonic() - started
        # checked while the link is still down: node 1's processes end without help from the launcher
        assert wait_until(lambda: not tagged_processes(), 30), f"left running: {tagged_processes()}"
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)
        process.kill()
    assert elapsed_s < 60
    assert process.returncode == 1
    assert "node 1 (10.213.0.11) lost its ssh connection" in stderr and "run R1n" in stderr
    doc = json.loads(out.read_text())
    assert [(p["name"], p["status"]) for p in doc["phases"]] == [("R1", "completed"), ("R1n", "failed")]


def test_remote_check_reports_what_a_node_offers(cluster_state):
    import sys

    import stash_core

    result = subprocess.run(
        stash_argv(
            "remote", "check", "10.213.0.11", "--ssh-config", str(cluster_state / "ssh_config"),
            "--python", sys.executable, "--workdir", str(Path(stash_core.__file__).resolve().parents[1]),
        ),  # fmt: skip
        capture_output=True, text=True, env=stash_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"stash     {stash_core.__version__}" in result.stdout
    assert "torch     2." in result.stdout and "gpus      0" in result.stdout
