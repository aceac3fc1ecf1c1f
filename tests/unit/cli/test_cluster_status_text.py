"""`stash cluster status` shows a link's shaping as emulated: without the kernel's netem only the rate is,
so a delay or loss that was asked for is said as not emulated, never printed as if it were."""

from __future__ import annotations

import pytest

from stash_core.cli.cluster_text import format_cluster_status, format_shaping

SHAPED = {"rate_bps": 1e9, "latency_us": 1000, "loss_pct": 0.5, "down": False}


def status(netem: bool) -> dict:
    node = {"index": 0, "namespace": "stash-n0", "address": "10.213.0.10", "link_up": True,
            "sshd_alive": True, "shaping": SHAPED}  # fmt: skip
    return {"name": "default", "up": True, "nodes": [node], "subnet": "10.213.0.0/24", "state_dir": "/run/x",
            "netem": netem, "ssh_config": "/run/x/ssh_config"}  # fmt: skip


def test_with_netem_the_delay_and_loss_are_shown() -> None:
    assert format_shaping(SHAPED) == "rate 1gbit, delay 1000us, loss 0.5%"
    assert "delay 1000us, loss 0.5%, sshd" in format_cluster_status(status(netem=True))


def test_without_netem_the_delay_is_said_as_not_emulated() -> None:
    text = format_cluster_status(status(netem=False))
    assert "rate 1gbit (delay 1000us, loss 0.5% asked, not emulated: no netem)" in text
    assert ", delay 1000us" not in text and "no netem qdisc" in text
    assert format_shaping({"rate_bps": 2e8, "latency_us": 0, "loss_pct": 0}, netem=False) == "rate 200mbit"
    # a zero loss needs no netem: only the delay asked is said ("loss 0% asked, not emulated")
    delay_only = format_shaping({"rate_bps": 2e8, "latency_us": 5000, "loss_pct": 0}, netem=False)
    assert delay_only == "rate 200mbit (delay 5000us asked, not emulated: no netem)"


def test_cluster_set_without_netem_says_the_delay_is_not_emulated(monkeypatch, capsys) -> None:
    from stash_core.cli.main import main
    from stash_core.launch import cluster

    monkeypatch.setattr(cluster, "cluster_status", lambda state_dir=None, name=None: status(netem=False))
    monkeypatch.setattr(cluster, "set_link", lambda index, **kw: {**SHAPED, "warning": "no netem qdisc"})
    assert main(["cluster", "set", "--node", "0", "--latency", "1ms", "--loss", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "node 0: rate 1gbit (delay 1000us, loss 0.5% asked, not emulated: no netem)" in out
    assert ", delay 1000us" not in out


def test_cluster_set_checks_every_node_before_it_changes_one(monkeypatch, capsys) -> None:
    """--node 0,5 on a cluster of one node changed node 0, then stopped at node 5."""
    from stash_core.cli.main import main
    from stash_core.launch import cluster

    changed: list[int] = []
    monkeypatch.setattr(cluster, "cluster_status", lambda state_dir=None, name=None: status(netem=True))
    monkeypatch.setattr(cluster, "set_link", lambda index, **kw: (changed.append(index), SHAPED)[1])
    assert main(["cluster", "set", "--node", "0,5", "--bandwidth", "200mbit"]) == 2
    err = capsys.readouterr().err.strip()
    assert changed == [] and err.count("\n") == 0
    assert "has no node 5 (nodes 0..0); nothing was changed" in err
    assert main(["cluster", "set", "--node", "0,0", "--bandwidth", "200mbit"]) == 0
    assert changed == [0]  # once


def test_a_half_built_cluster_has_no_ssh_command_to_show() -> None:
    """The client config is written last: a setup cut short printed `ssh -F None stash-n0`."""
    half = {**status(netem=True), "up": False, "ssh_config": None}
    text = format_cluster_status(half)
    assert "-F None" not in text and "ssh: no client config (its setup did not finish)" in text
    assert "ssh: ssh -F /run/x/ssh_config stash-n0" in format_cluster_status(status(netem=True))


def test_cluster_set_with_nothing_to_change_is_refused(monkeypatch, capsys) -> None:
    from stash_core.cli.main import main
    from stash_core.launch import cluster

    monkeypatch.setattr(cluster, "cluster_status", lambda state_dir=None, name=None: status(netem=True))
    monkeypatch.setattr(cluster, "set_link", lambda index, **kw: pytest.fail("nothing was to be changed"))
    assert main(["cluster", "set", "--node", "0"]) == 2
    assert "nothing to change" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "code"),
    [({}, 0), ({"up": False}, 1), ({"gone": True}, 1), ({"nodes": []}, 1)],
)
def test_cluster_status_exits_1_for_a_cluster_that_cannot_be_used(monkeypatch, capsys, change, code) -> None:
    from stash_core.cli.main import main
    from stash_core.launch import cluster

    current = {**status(netem=True), "gone": False, **change}
    monkeypatch.setattr(cluster, "cluster_status", lambda state_dir=None, name=None: current)
    assert main(["cluster", "status"]) == code
    capsys.readouterr()


def test_a_cluster_that_lost_one_namespace_names_it_not_all_of_them() -> None:
    """After `ip netns del` of one node's namespace it said "its namespaces are gone"."""
    lost = status(netem=True)
    lost["nodes"] = [{**lost["nodes"][0], "exists": True},
                     {**lost["nodes"][0], "index": 1, "namespace": "stash-n1", "exists": False}]  # fmt: skip
    text = format_cluster_status({**lost, "gone": True, "up": False})
    assert "namespace stash-n1 gone: stash cluster down, then up again" in text
    assert "its namespaces" not in text


def test_a_node_whose_namespace_is_gone_is_not_shown_as_running() -> None:
    """`ip netns delete` of a node leaves its sshd running in the lost namespace: the node read "link ?
    ... sshd running", as if it could be reached."""
    gone = status(netem=True)
    gone["nodes"][0] |= {"exists": False, "link_up": None}
    gone |= {"up": False, "gone": True}
    line = format_cluster_status(gone).splitlines()[1]
    assert "link GONE" in line and "namespace gone, sshd left running in it" in line
    assert "sshd running" not in line.replace("sshd left running", "")
    gone["nodes"][0]["sshd_alive"] = False
    assert format_cluster_status(gone).splitlines()[1].endswith("namespace gone")
    assert "namespace gone" not in format_cluster_status(status(netem=True))


def test_cluster_set_of_several_nodes_without_netem_warns_once(monkeypatch, capsys) -> None:
    """--node 0,1 printed the same no-netem warning once per node."""
    from stash_core.cli.main import main
    from stash_core.launch import cluster

    two = status(netem=False)
    two["nodes"] = [two["nodes"][0], {**two["nodes"][0], "index": 1, "namespace": "stash-n1"}]
    monkeypatch.setattr(cluster, "cluster_status", lambda state_dir=None, name=None: two)
    monkeypatch.setattr(cluster, "set_link", lambda index, **kw: {**SHAPED, "warning": "no netem qdisc"})
    assert main(["cluster", "set", "--node", "0,1", "--latency", "1ms"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("node ") == 2
    assert captured.err.count("warning: no netem qdisc") == 1


def test_no_cluster_says_the_state_folder_it_looked_in() -> None:
    """`cluster status --state-dir DIR` said "no emulated cluster default", not where it had looked."""
    empty = {"name": "default", "up": False, "nodes": [], "state_dir": "/tmp/elsewhere"}
    assert format_cluster_status(empty) == "no emulated cluster default (no state in /tmp/elsewhere)"
