"""Bringing clusters up and down: nothing is left behind, whatever happened before. The cluster here is this
process's "life" (clusterkit.cluster_name)."""

from __future__ import annotations

import json
import subprocess

import psutil
import pytest
from clusterkit import cluster_name, leftovers, stash_argv, stash_env

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch import cluster
from stash_core.launch.cluster import sshd as cluster_sshd

pytestmark = pytest.mark.cluster

NAME = cluster_name("life")


@pytest.fixture
def state_dir(tmp_path):
    path = tmp_path / "state"
    try:
        yield path
    finally:
        cluster.cluster_down(path, name=NAME)


def test_down_removes_everything_and_twice_is_fine(state_dir):
    up = cluster.cluster_up(2, bandwidth="100mbit", state_dir=state_dir, name=NAME)
    sshd_pids = [node["sshd_pid"] for node in up["nodes"]]
    assert all(psutil.pid_exists(pid) for pid in sshd_pids)
    assert len(leftovers()) >= 5  # 3 namespaces, the root link, 2 sshd

    actions = cluster.cluster_down(state_dir)

    assert any(f"deleted namespace stash-{NAME}-n1" in action for action in actions)
    assert leftovers() == []
    assert not state_dir.exists()
    assert cluster.cluster_down(state_dir, name=NAME) == []
    assert cluster.cluster_status(state_dir, name=NAME)["up"] is False


def test_down_without_state_file_and_up_twice_refused(state_dir):
    cluster.cluster_up(1, state_dir=state_dir, name=NAME)
    with pytest.raises(UsageError, match="already exists"):
        cluster.cluster_up(1, state_dir=state_dir, name=NAME)
    (state_dir / "state.json").unlink()

    cluster.cluster_down(state_dir, name=NAME)

    assert leftovers() == []  # found by their stash-* names; sshd ended via `ip netns pids`


def test_failed_setup_is_rolled_back(state_dir, monkeypatch):
    real_start_sshd = cluster_sshd.start_sshd

    def start_one_then_fail(state_dir_arg, index, *layout):
        if index == 1:
            raise MeasurementError("simulated failure while starting sshd on node 1")
        return real_start_sshd(state_dir_arg, index, *layout)

    monkeypatch.setattr(cluster_sshd, "start_sshd", start_one_then_fail)
    with pytest.raises(MeasurementError, match="simulated failure"):
        cluster.cluster_up(3, state_dir=state_dir, name=NAME)
    assert leftovers() == []
    assert not (state_dir / "state.json").exists()


def test_a_failed_setup_leaves_a_folder_the_user_made(state_dir, monkeypatch):
    """The roll-back removes the cluster's files, not the (empty) folder that was there before."""

    def fail(*args):
        raise MeasurementError("simulated failure while starting sshd")

    state_dir.mkdir()
    monkeypatch.setattr(cluster_sshd, "start_sshd", fail)
    with pytest.raises(MeasurementError, match="simulated failure"):
        cluster.cluster_up(1, state_dir=state_dir, name=NAME)
    assert leftovers() == []
    assert state_dir.is_dir() and list(state_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "between 1 and 16"),
        ({"nodes": 17}, "between 1 and 16"),
        ({"nodes": 2, "bandwidth": "lots"}, "invalid bandwidth"),
        ({"nodes": 2, "latency": "1 parsec"}, "invalid latency"),
        ({"nodes": 2, "loss_pct": 120.0}, "invalid loss"),
    ],
)
def test_bad_arguments_touch_nothing(state_dir, kwargs, message):
    with pytest.raises(UsageError, match=message):
        cluster.cluster_up(state_dir=state_dir, name=NAME, **kwargs)
    assert leftovers() == []


def test_cli_up_status_set_down_leaves_nothing(tmp_path):
    state = tmp_path / "cli-state"
    env = stash_env()
    try:
        up = subprocess.run(
            stash_argv("cluster", "up", "--name", NAME, "--nodes", "2", "--bandwidth", "300mbit",
                       "--state-dir", str(state)),
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert f"stash-{NAME}-n1" in up.stdout and "rate 300mbit" in up.stdout
        change = ["cluster", "set", "--node", "1", "--down", "--bandwidth", "50mbit"]
        change += ["--state-dir", str(state)]
        cut = subprocess.run(stash_argv(*change), capture_output=True, text=True, env=env, timeout=60)
        assert cut.returncode == 0 and "LINK DOWN" in cut.stdout
        status = json.loads(
            subprocess.run(
                stash_argv("cluster", "status", "--json", "--state-dir", str(state)),
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            ).stdout  # fmt: skip
        )
        assert [node["link_up"] for node in status["nodes"]] == [True, False]
        assert status["nodes"][1]["shaping"]["rate_bps"] == 50_000_000
    finally:
        down = subprocess.run(
            stash_argv("cluster", "down", "--state-dir", str(state)), capture_output=True, text=True, env=env
        )
    assert down.returncode == 0 and f"deleted namespace stash-{NAME}-n1" in down.stdout
    assert leftovers() == []
    again = subprocess.run(
        stash_argv("cluster", "down", "--name", NAME, "--state-dir", str(state)),
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert again.returncode == 0 and f"no emulated cluster {NAME} was up" in again.stdout
