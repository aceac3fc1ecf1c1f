"""torchrun across two emulated nodes over ssh: results, failures, and nothing left running.

The failure tests run a plain-Python worker module (no torch import in the workers) so that
each launch costs only the two torchrun agents; the success test does a real gloo all-reduce.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from clusterkit import (
    cluster_fixture,
    layout,
    port_taken,
    tagged_processes,
    wait_until,
)

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch import cluster, multinode
from stash_core.launch.ssh import ssh_argv

pytestmark = pytest.mark.cluster

cluster_state = cluster_fixture(2, "multi", bandwidth="1gbit", latency="0ms")

ALLREDUCE_SRC = """
import datetime, os
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ["STASH_RDZV_TIMEOUT_S"])))
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} world={dist.get_world_size()} sum={value.item():g}", flush=True)
dist.destroy_process_group()
"""

# argv: MODE [RANK]; prints "ready rank=R", then: die -> RANK kills itself, others wait; hang -> all wait
PLAIN_WORKER_SRC = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
print(f"ready rank={rank}", flush=True)
if sys.argv[1] == "die" and rank == int(sys.argv[2]):
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(300)
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("multinode-work")
    (path / "stash_test_allreduce.py").write_text(ALLREDUCE_SRC)
    (path / "stash_test_plain.py").write_text(PLAIN_WORKER_SRC)
    return path


@pytest.fixture(scope="module")
def hosts(cluster_state):
    return cluster.cluster_hosts(cluster_state)


def _node_1(cluster_state) -> str:
    """How a failure names node 1: "node 1 (its address)", as a pattern."""
    return re.escape(f"node 1 ({layout(cluster_state).node_address(1)})")


def _launch(hosts, workdir, module, module_args, on_line, timeout_s=120.0, master_port=None) -> None:
    multinode.launch_torchrun_over_ssh(
        targets=hosts,
        nproc_per_node=1,
        module=module,
        module_args=module_args,
        master_addr=hosts[0].host,
        master_port=master_port or multinode.free_port(),
        env={"OMP_NUM_THREADS": "1"},
        python=sys.executable,
        workdir=str(workdir),
        timeout_s=timeout_s,
        on_line=on_line,
        rdzv_timeout_s=30,
    )


@pytest.mark.slow
def test_allreduce_across_two_nodes(hosts, workdir, no_leftovers):
    lines: list[tuple[int, str]] = []
    _launch(hosts, workdir, "stash_test_allreduce", [], lambda node, line: lines.append((node, line)))
    assert sorted(lines) == [(0, "rank=0 world=2 sum=3"), (1, "rank=1 world=2 sum=3")]


def test_host_down_before_start_fails_fast(cluster_state, hosts, workdir, no_leftovers):
    started = time.monotonic()
    try:
        cluster.set_link(1, down=True, state_dir=cluster_state)
        with pytest.raises(MeasurementError, match=_node_1(cluster_state) + " is unreachable"):
            _launch(hosts, workdir, "stash_test_plain", ["hang"], lambda node, line: None)
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)
    assert time.monotonic() - started < 15


def test_master_port_in_use_is_a_clear_usage_error(cluster_state, hosts, workdir, no_leftovers):
    port = multinode.free_port()
    with port_taken(layout(cluster_state).node_namespace(0), port):
        with pytest.raises(UsageError, match=f"port {port} is already in use on the master, node 0"):
            _launch(hosts, workdir, "stash_test_plain", ["hang"], lambda node, line: None, master_port=port)


@pytest.mark.slow
def test_killed_rank_fails_the_run_and_ends_every_process(cluster_state, hosts, workdir, no_leftovers):
    lines: list[tuple[int, str]] = []
    with pytest.raises(MeasurementError, match=_node_1(cluster_state) + " exited with code"):
        _launch(
            hosts, workdir, "stash_test_plain", ["die", "1"], lambda node, line: lines.append((node, line))
        )
    assert (1, "ready rank=1") in lines


@pytest.mark.slow
def test_hanging_run_times_out_and_ends_every_process(hosts, workdir, no_leftovers):
    with pytest.raises(MeasurementError, match="did not finish within 8 s"):
        _launch(hosts, workdir, "stash_test_plain", ["hang"], lambda node, line: None, timeout_s=8)


@pytest.mark.slow
def test_ctrl_c_ends_every_process_and_propagates(hosts, workdir, no_leftovers):
    seen: set[int] = set()

    def interrupt_when_both_ready(node: int, line: str) -> None:
        seen.add(node)
        if seen == {0, 1}:
            raise KeyboardInterrupt  # what Ctrl-C raises in the caller's thread

    with pytest.raises(KeyboardInterrupt):
        _launch(hosts, workdir, "stash_test_plain", ["hang"], interrupt_when_both_ready)
    assert seen == {0, 1}


@pytest.mark.slow
def test_cut_link_mid_run_is_reported_and_the_cut_off_node_cleans_up(
    cluster_state, hosts, workdir, nodes, no_leftovers
):
    """Node 1 vanishes from the network: its ssh times out, and its sshd, noticing the silent
    client, closes the session, whose supervisor then ends node 1's processes by itself."""
    seen: set[int] = set()

    def cut_node_1_when_both_ready(node: int, line: str) -> None:
        seen.add(node)
        if seen == {0, 1}:
            cluster.set_link(1, down=True, state_dir=cluster_state)

    try:
        with pytest.raises(MeasurementError, match=_node_1(cluster_state) + " lost its ssh connection"):
            _launch(hosts, workdir, "stash_test_plain", ["hang"], cut_node_1_when_both_ready)
        # checked while the link is still down: no help from the launcher can reach node 1
        assert wait_until(lambda: not tagged_processes(nodes), 20), f"left running: {tagged_processes(nodes)}"
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)


def test_remote_side_ends_when_its_ssh_dies(hosts, nodes, no_leftovers):
    """No sweep from the launcher here: the supervisor alone must end its processes."""
    tag = f"test-{uuid.uuid4().hex[:8]}"
    sleeper = [sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(300)"]
    remote = [sys.executable, "-c", multinode.SUPERVISOR_SRC, "run", tag, "/", "--", *sleeper]
    ssh = subprocess.Popen(ssh_argv(hosts[1], remote), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert ssh.stdout.readline().strip() == b"ready"
        assert len(tagged_processes(nodes, tag)) == 1
        assert tagged_processes(nodes) == tagged_processes(nodes, tag)  # seen without its tag too
        ssh.send_signal(signal.SIGKILL)  # the connection drops without any goodbye
        ssh.wait()
        assert wait_until(lambda: not tagged_processes(nodes, tag), 15)
    finally:
        ssh.kill()
        ssh.wait()


def test_bad_arguments_are_refused_before_any_ssh(hosts, workdir):
    with pytest.raises(UsageError, match="invalid module name"):
        _launch(hosts, workdir, "os; rm -rf /", [], lambda node, line: None)
    with pytest.raises(UsageError, match="cpu sets for 2 nodes"):
        multinode.launch_torchrun_over_ssh(
            hosts, 1, "m", [], hosts[0].host, 29500, {}, sys.executable, str(workdir), 10,
            lambda node, line: None, cpu_sets=[[0]],
        )  # fmt: skip
