"""Several named emulated clusters on one machine: each has its own namespaces, addresses, link and state;
`down` takes only its own; `up` refuses a name or an address range in use; a profile or probe whose
cluster vanished says "the emulated cluster NAME is not up" in one line.

The clusters here are this process's "a", "b", "c", "d" and "x" (clusterkit.cluster_name), called ta ... tx
below.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from clusterkit import (
    cluster_name,
    leftovers,
    node_namespace_ids,
    stash_argv,
    stash_env,
    tagged_processes,
    wait_until,
)

from stash_core.errors import UsageError
from stash_core.launch import cluster
from stash_core.launch.cluster import net as cluster_net
from stash_core.launch.cluster.names import gone_message
from stash_core.launch.ssh import run_remote
from stash_core.measure import protocol

pytestmark = pytest.mark.cluster

TA, TB, TC, TD, TX = (cluster_name(label) for label in "abcdx")

MODEL = [
    "--model", f"{Path(__file__).resolve().parent / 'netmodel.py'}:make", "--input-shape", "3,16,16",
    "--num-classes", "10", "--batch-size", "8", "--workers", "1", "--nodes", "2",
]  # fmt: skip


@pytest.fixture
def made(tmp_path):
    """State folders of the clusters a test brings up; each is taken down after it, whatever happened. Each
    is named as its cluster's own folder (stash-cluster-NAME): `down` finds the cluster once state is gone."""
    folders: list[Path] = []
    yield folders
    for state_dir in folders:
        cluster.cluster_down(state_dir)
    assert leftovers() == []


def _namespaces() -> set[str]:
    return set(cluster_net.all_namespaces())


def _stash(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        stash_argv(*args), capture_output=True, text=True, env=stash_env(), timeout=timeout_s
    )


def test_two_clusters_side_by_side_and_down_takes_only_its_own(made, tmp_path):
    # folders named as the clusters' own (/run/stash-cluster-NAME): once a cluster is down, its path names it
    ta, tb = tmp_path / f"stash-cluster-{TA}", tmp_path / f"stash-cluster-{TB}"
    made += [ta, tb]
    a = cluster.cluster_up(2, bandwidth="300mbit", latency="0ms", state_dir=ta, name=TA)
    up_b = _stash("cluster", "up", "--name", TB, "--nodes", "1", "--state-dir", str(tb))
    assert up_b.returncode == 0, up_b.stderr
    others = next(
        line for line in up_b.stdout.splitlines() if line.startswith("other emulated clusters here")
    )
    assert f"emulated cluster {TB} up" in up_b.stdout and TA in others.split(": ")[1].split(", ")
    b = cluster.cluster_status(tb)  # the folder says which cluster it holds
    assert (a["name"], b["name"]) == (TA, TB) and a["up"] and b["up"]
    assert a["subnet"] != b["subnet"] and "10.213.0.0/24" not in (a["subnet"], b["subnet"])
    assert [node["namespace"] for node in a["nodes"]] == [f"stash-{TA}-n0", f"stash-{TA}-n1"]
    assert {f"stash-{TA}-hub", f"stash-{TA}-n0", f"stash-{TA}-n1", f"stash-{TB}-hub", f"stash-{TB}-n0"} <= (
        _namespaces()
    )
    assert cluster_net.root_links(cluster.Layout(TA)) == [f"svh-{TA}"]

    # the same name, from another folder: refused, and that folder's `down` leaves the live one alone
    with pytest.raises(UsageError, match=f"emulated cluster {TA} already exists"):
        cluster.cluster_up(1, state_dir=tmp_path / "ta-again", name=TA)
    actions = cluster.cluster_down(tmp_path / "ta-again", name=TA)
    assert any(f"left the namespaces of the emulated cluster {TA} alone" in action for action in actions)
    # the command says it as a failure: the cluster is still up (it exited 0, as if taken down)
    left = _stash("cluster", "down", "--name", TA, "--state-dir", str(tmp_path / "ta-again"))
    assert left.returncode == 1 and f"emulated cluster {TA} alone" in left.stdout, (left.stdout, left.stderr)
    # an address range in use: refused before anything is made
    with pytest.raises(UsageError, match=f"address range {a['subnet']} is already in use"):
        cluster.cluster_up(1, state_dir=tmp_path / "tx", name=TX, subnet=a["subnet"])
    # the default cluster's `down` (no state anywhere) touches neither
    cluster.cluster_down(tmp_path / "no-such-state")
    assert cluster.cluster_status(ta)["up"] and cluster.cluster_status(tb)["up"]

    down = _stash("cluster", "down", "--state-dir", str(ta))
    assert down.returncode == 0, down.stderr
    assert f"deleted namespace stash-{TA}-n1" in down.stdout and TB not in down.stdout
    assert not any(name.startswith(f"stash-{TA}-") for name in _namespaces())
    assert {f"stash-{TB}-hub", f"stash-{TB}-n0"} <= _namespaces()
    status_b = cluster.cluster_status(tb)
    assert status_b["up"] and not status_b["gone"] and TA not in status_b["other_clusters"]
    # and tb still works: ssh into its node, which sees its own address
    target = cluster.cluster_hosts(tb)[0]
    shown = run_remote(target, ["ip", "-o", "-4", "addr", "show", "stash0"], 30)
    assert shown.returncode == 0 and f"inet {b['nodes'][0]['address']}/24" in shown.stdout
    ssh = subprocess.run(
        ["ssh", "-F", b["ssh_config"], f"stash-{TB}-n0", "true"], capture_output=True, text=True, timeout=30
    )
    assert ssh.returncode == 0, ssh.stderr


def test_a_profile_or_probe_on_a_vanished_cluster_says_it_is_gone(made, tmp_path):
    state = tmp_path / f"stash-cluster-{TC}"  # the name's own folder name: after `down` the path names it
    made.append(state)
    cluster.cluster_up(2, latency="0ms", state_dir=state, name=TC)
    where = ["--cluster", "emulated", "--cluster-state", str(state)]
    profile = ["profile", *MODEL, *where, "--stalls", "network", "--iterations", "5", "--no-store",
               "--out", str(tmp_path / "run.json"), "--progress", "none"]  # fmt: skip
    probe = ["probe", "--workers", "1", "--nodes", "2", *where, "--no-store", "--max-size", "64KiB"]
    # its state still there: taken down and up again (`up` refuses a name whose state exists)
    lost = (
        f"stash: the emulated cluster {TC} is not up: it lost a namespace or its hub (take it down and up "
        f"again: sudo stash cluster down --name {TC}, then sudo stash cluster up --nodes N --name {TC})"
    )
    expected = f"stash: {gone_message(TC)}"

    # what an older `stash cluster down` of another cluster did: every stash namespace removed, our state kept
    for namespace in cluster_net.live_namespaces(cluster.Layout(TC)):
        for pid in cluster_net.namespace_pids(namespace):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        subprocess.run(["ip", "netns", "del", namespace], check=True)
    status = _stash("cluster", "status", "--state-dir", str(state))
    assert f"emulated cluster {TC} GONE" in status.stdout and status.returncode == 1
    for args in (profile, probe):
        result = _stash(*args)
        assert result.returncode == 2
        assert result.stderr.strip() == lost  # one line, no traceback
    assert not (tmp_path / "run.json").exists()  # refused before any run

    # taken down: no state left at all, the same line
    cluster.cluster_down(state)
    assert not state.exists()
    for args in (profile, probe):
        result = _stash(*args)
        said = result.stderr.strip()
        # the clusters other tests have up beside it are named after it ("; up here: ...")
        assert result.returncode == 2 and said.splitlines() == [said], said
        assert said == expected or said.startswith(f"{expected}; up here: "), said


@pytest.mark.slow
def test_a_cluster_taken_down_mid_profile_is_said_to_be_gone(made, tmp_path):
    state = tmp_path / f"stash-cluster-{TD}"
    made.append(state)
    cluster.cluster_up(2, bandwidth="200mbit", latency="0ms", state_dir=state, name=TD)
    nodes = node_namespace_ids(state)  # kept: `down` below takes the names away
    out = tmp_path / "run.json"
    argv = stash_argv(
        "profile", *MODEL, "--cluster", "emulated", "--cluster-state", str(state), "--stalls", "network",
        "--iterations", "80", "--no-probes", "--out", str(out), "--no-store", "--progress", "json",
    )  # fmt: skip
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=stash_env()
    )
    try:
        for line in process.stdout:
            message = protocol.parse(line)
            if message and message[0] == "PROGRESS" and message[1].get("phase") == "R1n":
                break
        else:
            raise AssertionError(f"the profile ended before R1n measured: {process.stderr.read()}")
        cluster.cluster_down(state)
        started = time.monotonic()
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert time.monotonic() - started < 60
    assert process.returncode in (1, 2) and "Traceback" not in stderr
    assert gone_message(TD) in stderr and "cannot reach host" not in stderr
    assert wait_until(lambda: not tagged_processes(nodes), 20), f"left running: {tagged_processes(nodes)}"
    assert json.loads(out.read_text())["status"] == "failed"
