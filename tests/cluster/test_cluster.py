"""A 2-node emulated cluster: namespaces, sshd on each node, node-to-node TCP, shaping, cut links."""

from __future__ import annotations

import subprocess

import pytest
from clusterkit import (
    CONNECT_SRC,
    RECEIVER_SRC,
    SENDER_SRC,
    cluster_fixture,
    layout,
    netns_popen,
    netns_python,
)

from stash_core.errors import UsageError
from stash_core.launch import cluster
from stash_core.launch.ssh import run_remote

pytestmark = pytest.mark.cluster

cluster_state = cluster_fixture(2, "links", bandwidth="1gbit", latency="0ms")


@pytest.fixture(scope="module")
def names(cluster_state):
    """The cluster's layout: node i's namespace and address."""
    return layout(cluster_state)


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def _connect(from_namespace: str, address: str, timeout_s: float = 2.0) -> subprocess.CompletedProcess:
    return netns_python(from_namespace, CONNECT_SRC, address, "22", str(timeout_s))


def _receive_mbps(sender_ns: str, receiver_ns: str, receiver_addr: str, payload_bytes: int) -> float:
    """Throughput of one TCP transfer between two namespaces, timed at the receiver."""
    receiver = netns_popen(receiver_ns, RECEIVER_SRC, receiver_addr, "5201")
    try:
        assert receiver.stdout.readline().strip() == "ready"
        sent = netns_python(sender_ns, SENDER_SRC, receiver_addr, "5201", str(payload_bytes))
        assert sent.returncode == 0, sent.stderr
        out, err = receiver.communicate(timeout=60)
    finally:
        receiver.kill()
        receiver.wait()
    total_bytes, seconds = out.split()
    assert int(total_bytes) == payload_bytes, err
    return int(total_bytes) * 8 / float(seconds) / 1e6


def test_namespaces_addresses_and_qdiscs(cluster_state, names):
    prefix = f"stash-{names.name}-"
    assert {prefix + "n0", prefix + "n1", prefix + "hub"} <= set(_namespaces())
    status = cluster.cluster_status(cluster_state)
    assert status["up"] is True
    assert status["subnet"] == names.subnet and names.address_prefix.startswith("10.213.")
    assert [node["address"] for node in status["nodes"]] == [f"{names.address_prefix}{i}" for i in (10, 11)]
    assert status["master_addr"] == names.node_address(0)
    for node in status["nodes"]:
        assert node["sshd_alive"] and node["link_up"] is True
        # shaped on both ends: node side (egress) and bridge side (the node's ingress)
        assert any("tbf" in qdisc for qdisc in node["qdiscs"])
        assert any("tbf" in qdisc and "rate 1Gbit" in qdisc for qdisc in node["ingress_qdiscs"])
        bridge_side = subprocess.run(
            ["tc", "-n", names.hub_namespace, "qdisc", "show", "dev", f"stash-v{node['index']}b"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "tbf" in bridge_side and "rate 1Gbit" in bridge_side


def test_sshd_answers_on_each_node_inside_its_namespace(cluster_state, names):
    # plain OpenSSH with the generated client config, by node name
    by_name = subprocess.run(
        ["ssh", "-F", str(cluster_state / "ssh_config"), names.node_namespace(1), "true"], capture_output=True
    )
    assert by_name.returncode == 0, by_name.stderr
    for index, target in enumerate(cluster.cluster_hosts(cluster_state)):
        # the command runs inside the node: its only non-loopback address is the node's, and the
        # client config hands the node's interface name to gloo/NCCL
        shown = run_remote(
            target,
            ["sh", "-c", "ip -o -4 addr show dev stash0; printenv GLOO_SOCKET_IFNAME"],
            20,
            check=True,
        )
        assert f"inet {names.node_address(index)}/24" in shown.stdout
        assert shown.stdout.split()[-1] == cluster.NODE_IFNAME


def test_tcp_between_nodes(names):
    n0, n1 = names.node_namespace(0), names.node_namespace(1)
    there = _connect(n0, names.node_address(1))
    back = _connect(n1, names.node_address(0))
    assert there.returncode == 0, there.stdout
    assert back.returncode == 0, back.stdout


@pytest.mark.quiet  # two measured transfers
def test_lower_bandwidth_is_slower(cluster_state, names):
    payload_bytes = 3_000_000
    n0, n1, n1_address = names.node_namespace(0), names.node_namespace(1), names.node_address(1)
    try:
        for node in (0, 1):
            cluster.set_link(node, bandwidth="50mbit", state_dir=cluster_state)
        slow_mbps = _receive_mbps(n0, n1, n1_address, payload_bytes)
        for node in (0, 1):
            cluster.set_link(node, bandwidth="200mbit", state_dir=cluster_state)
        fast_mbps = _receive_mbps(n0, n1, n1_address, payload_bytes)
    finally:
        for node in (0, 1):
            cluster.set_link(node, bandwidth="1gbit", state_dir=cluster_state)
    assert slow_mbps < fast_mbps
    # the shaping really caps the link: an unshaped veth moves several Gbit/s
    assert slow_mbps < 2 * 50


def test_link_down_blocks_traffic_and_up_restores_it(cluster_state, names):
    n0, n1 = names.node_namespace(0), names.node_namespace(1)
    a0, a1 = names.node_address(0), names.node_address(1)
    try:
        shaping = cluster.set_link(1, down=True, state_dir=cluster_state)
        assert shaping["down"] is True
        assert cluster.cluster_status(cluster_state)["nodes"][1]["link_up"] is False
        assert _connect(n0, a1, timeout_s=1.0).returncode == 1
        assert _connect(n1, a0, timeout_s=1.0).returncode == 1
        assert _connect(n0, a0, timeout_s=1.0).returncode == 0  # node 0 itself is fine
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)
    assert cluster.cluster_status(cluster_state)["nodes"][1]["link_up"] is True
    assert _connect(n0, a1, timeout_s=5.0).returncode == 0


@pytest.mark.quiet  # two measured connection times
def test_latency_adds_delay_when_kernel_has_netem(cluster_state, names):
    if not cluster.cluster_status(cluster_state)["netem"]:
        pytest.skip("kernel has no netem qdisc (sch_netem); latency is not emulated here")

    def connect_s() -> float:
        result = _connect(names.node_namespace(0), names.node_address(1), timeout_s=5.0)
        assert result.returncode == 0, result.stdout
        return float(result.stdout.split()[1])

    plain_s = connect_s()
    try:
        cluster.set_link(1, latency="40ms", state_dir=cluster_state)
        delayed_s = connect_s()
    finally:
        cluster.set_link(1, latency="0ms", state_dir=cluster_state)
    assert delayed_s > plain_s
    assert delayed_s >= 0.04  # a SYN/SYN-ACK round trip crosses the delayed link at least once


def test_set_link_rejects_bad_values(cluster_state):
    with pytest.raises(UsageError, match="no node 5"):
        cluster.set_link(5, bandwidth="10mbit", state_dir=cluster_state)
    with pytest.raises(UsageError, match="invalid bandwidth"):
        cluster.set_link(0, bandwidth="fast", state_dir=cluster_state)
    assert cluster.cluster_status(cluster_state)["nodes"][0]["shaping"]["rate_bps"] == 1_000_000_000
