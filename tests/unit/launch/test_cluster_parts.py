"""The parts of the emulated cluster that need no root: names, state file, qdiscs, ssh configs."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest

from stash_core.errors import UsageError
from stash_core.launch import cluster
from stash_core.launch.cluster import state as cluster_state
from stash_core.launch.cluster.names import DEFAULT_LAYOUT, Layout, hub_veth, node_address, node_namespace
from stash_core.launch.cluster.shaping import check_loss, qdisc_args, shaping_warning, tbf_args
from stash_core.launch.cluster.sshd import write_client_config, write_sshd_config

SHAPING = {"rate_bps": 200_000_000, "latency_us": 1000, "loss_pct": 0.5}


def test_names_are_ours_and_teardown_finds_them():
    assert (node_namespace(3), node_address(3), hub_veth(3)) == ("stash-n3", "10.213.0.13", "stash-v3b")
    assert DEFAULT_LAYOUT.owns_namespace("stash-n12") and DEFAULT_LAYOUT.owns_namespace("stash-hub")
    assert not DEFAULT_LAYOUT.owns_namespace("stash-probe7") and not DEFAULT_LAYOUT.owns_namespace("other-n1")
    assert all(DEFAULT_LAYOUT.owns_root_link(name) for name in ("stash-vh", "stash-br0", "stash-v0b"))
    assert not DEFAULT_LAYOUT.owns_root_link("eth0")


def test_public_names_stay_importable_from_cluster():
    names = ["cluster_up", "cluster_down", "cluster_status", "set_link", "cluster_hosts", "cluster_cpu_sets",
             "cluster_support_problem", "node_cpu_sets", "parse_bandwidth_bps", "parse_latency_us",
             "node_address", "node_namespace", "DEFAULT_STATE_DIR", "HUB_NAMESPACE", "NODE_IFNAME",
             "WORKER_ENV", "MAX_NODES", "DEFAULT_NAME", "Layout"]  # fmt: skip
    assert [name for name in names if not hasattr(cluster, name)] == []


def test_state_is_written_atomically_and_read_back(tmp_path):
    assert cluster_state.load_state(tmp_path) is None
    with pytest.raises(UsageError, match="no emulated cluster default is up"):
        cluster_state.require_state(tmp_path)
    state = cluster_state.new_state(tmp_path, None)
    state["nodes"].append(cluster_state.new_node(0, SHAPING, [0, 1]))
    cluster_state.save_state(tmp_path, state)
    assert json.loads((tmp_path / "state.json").read_text()) == state
    assert cluster_state.require_state(tmp_path)["nodes"][0]["namespace"] == "stash-n0"
    assert (state["name"], state["subnet"], state["root_address"]) == (
        "default",
        "10.213.0.0/24",
        "10.213.0.1",
    )
    assert not list(tmp_path.glob("*.tmp"))


def test_removing_state_files_spares_what_is_not_ours(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    cluster_state.save_state(state_dir, cluster_state.new_state(state_dir, None))
    for name in ("ssh_config", "id_ed25519"):
        (state_dir / name).write_text("x")
    (state_dir / "n0").mkdir()
    (state_dir / "n0" / "sshd_config").write_text("x")
    assert cluster_state.remove_state_files(state_dir) == [f"removed 4 state file(s) from {state_dir}"]
    assert not state_dir.exists()

    state_dir.mkdir()
    cluster_state.save_state(state_dir, cluster_state.new_state(state_dir, None))
    (state_dir / "notes.txt").write_text("the user's")
    cluster_state.remove_state_files(state_dir)
    assert [path.name for path in state_dir.iterdir()] == ["notes.txt"]
    assert cluster_state.remove_state_files(tmp_path / "missing") == []


def test_a_folder_that_holds_no_clusters_state_is_never_emptied_nor_filled(tmp_path):
    """A user's ~/.ssh given as --state-dir: `cluster down` removed its key pair, authorized_keys, known_hosts
    and node-like folders; `cluster up` made ssh-keygen ask to overwrite the key, then its roll-back removed
    them. Now down removes nothing there and up refuses the folder before it writes anything."""
    ssh = tmp_path / "ssh"
    (ssh / "n1").mkdir(parents=True)
    for name in ("id_ed25519", "id_ed25519.pub", "authorized_keys", "known_hosts", "config", "state.json"):
        (ssh / name).write_text("the user's")
    (ssh / "n1" / "notes.txt").write_text("the user's")
    before = sorted(str(path.relative_to(ssh)) for path in ssh.rglob("*"))
    assert cluster_state.remove_state_files(ssh) == []
    assert sorted(str(path.relative_to(ssh)) for path in ssh.rglob("*")) == before
    with pytest.raises(UsageError, match="already holds known_hosts, id_ed25519, id_ed25519.pub"):
        cluster_state.refuse_foreign_files(ssh)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        cluster_state.refuse_foreign_files(tmp_path / "a-file")
    cluster_state.refuse_foreign_files(tmp_path / "new")  # a new folder, or an empty one, is taken
    (tmp_path / "empty").mkdir()
    cluster_state.refuse_foreign_files(tmp_path / "empty")


@pytest.mark.parametrize(
    ("path", "says"),
    [("/tmp/a b", "holds a space"), ("/tmp/a%h", "holds '%'"), ("/tmp/${HOME}", "holds '$'"),
     ('/tmp/a"b', "holds '\"'"), ("/tmp/a\\b", "holds '\\\\'"), ("/tmp/#x", "holds '#'")],
)  # fmt: skip
def test_a_state_folder_ssh_would_read_otherwise_is_refused(path, says):
    """ssh_config and sshd_config hold the state folder's paths: a space split them (sshd -t failed), a %h
    was expanded to the host (the cluster came up, but no node's host key was trusted)."""
    with pytest.raises(UsageError, match=f"^--state-dir {re.escape(path)} {re.escape(says)}, which ssh"):
        cluster_state.check_state_dir_path(Path(path), f"--state-dir {path}")
    cluster_state.check_state_dir_path(Path("/run/stash-cluster-bench"), "the state folder")
    cluster_state.check_state_dir_path(Path("/tmp/pytest-of-root/x_y-1.2+3@4,5=6~7:8"), "--state-dir")


def test_a_state_folder_the_user_made_before_the_cluster_stays(tmp_path):
    """A taken-down (or rolled-back) cluster empties the folder it was given of its files; the folder itself
    goes only when the setup made it."""
    mine = tmp_path / "mine"
    mine.mkdir()
    cluster_state.save_state(mine, cluster_state.new_state(mine, None, made_state_dir=False))
    (mine / "ssh_config").write_text("x")
    assert cluster_state.remove_state_files(mine) == [f"removed 2 state file(s) from {mine}"]
    assert mine.is_dir() and not list(mine.iterdir())
    made = tmp_path / "made"
    made.mkdir()
    cluster_state.save_state(made, cluster_state.new_state(made, None, made_state_dir=True))
    cluster_state.remove_state_files(made)
    assert not made.exists()


def test_a_state_folder_below_a_file_is_refused_before_it_is_made(tmp_path):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(
        UsageError, match=f"^--state-dir {tmp_path}/a-file/sub: {tmp_path}/a-file is a file, not"
    ):
        cluster_state.refuse_foreign_files(tmp_path / "a-file" / "sub")


def test_the_clusters_own_state_folder_is_not_called_an_option(tmp_path, monkeypatch):
    """Without --state-dir, a file where the cluster's own folder goes was called "--state-dir PATH"."""
    from stash_core.launch.cluster import lifecycle

    own = tmp_path / "stash-cluster-fixcown"
    own.write_text("x")
    monkeypatch.setattr(lifecycle, "state_dir_for", lambda name: own)
    monkeypatch.setattr(lifecycle, "cluster_support_problem", lambda: None)
    monkeypatch.setattr(lifecycle, "_machine_lock", contextlib.nullcontext)
    monkeypatch.setattr(lifecycle.net, "live_namespaces", lambda layout: [])
    monkeypatch.setattr(lifecycle.net, "root_links", lambda layout: [])
    with pytest.raises(UsageError) as raised:
        lifecycle.cluster_up(1, name="fixcown")
    assert str(raised.value) == (
        f"the state folder {own} of the emulated cluster fixcown is a file; remove it, or give the cluster "
        "another folder with --state-dir"
    )
    assert own.read_text() == "x"


def test_qdiscs_with_netem_put_the_rate_below_the_delay():
    root, rate = qdisc_args(SHAPING, netem_ok=True)
    assert root == ["root", "handle", "1:", "netem", "delay", "1000us", "limit", "100000", "loss", "0.5%"]
    assert rate == ["parent", "1:1", "handle", "10:", *tbf_args(200_000_000)]


def test_qdiscs_without_netem_or_without_a_rate():
    assert qdisc_args(SHAPING, netem_ok=False) == [["root", "handle", "10:", *tbf_args(200_000_000)]]
    assert qdisc_args({**SHAPING, "rate_bps": None}, netem_ok=False) == []
    unlimited = qdisc_args({"rate_bps": None, "latency_us": 0, "loss_pct": 0.0}, netem_ok=True)
    assert unlimited == []
    assert "missing netem" not in (shaping_warning(SHAPING, netem_ok=True) or "")
    assert shaping_warning(SHAPING, netem_ok=True) is None
    assert "latency 1000us and loss 0.5% are not emulated" in shaping_warning(SHAPING, netem_ok=False)


def test_tbf_bucket_holds_a_gso_packet_and_a_few_ms():
    assert tbf_args(8_000)[tbf_args(8_000).index("burst") + 1] == str(64 * 1024)
    assert tbf_args(10_000_000_000)[4] == str(int(10e9 / 8 * 0.004))


@pytest.mark.parametrize("bad", [-1, 101, True, "5"])
def test_loss_must_be_a_percentage(bad):
    with pytest.raises(UsageError, match="invalid loss"):
        check_loss(bad)


def test_client_config_pins_every_node_and_passes_the_worker_env(tmp_path):
    for index in range(2):
        node_dir = tmp_path / f"n{index}"
        node_dir.mkdir()
        (node_dir / "ssh_host_ed25519_key.pub").write_text(f"ssh-ed25519 KEY{index} stash-n{index}\n")
    config = write_client_config(tmp_path, 2).read_text()
    known_hosts = (tmp_path / "known_hosts").read_text().splitlines()
    assert known_hosts == ["stash-n0,10.213.0.10 ssh-ed25519 KEY0", "stash-n1,10.213.0.11 ssh-ed25519 KEY1"]
    assert "Host stash-n1 10.213.0.11\n    HostName 10.213.0.11\n" in config
    assert "Host stash-n* 10.213.0.*\n" in config and "StrictHostKeyChecking yes" in config
    assert "SetEnv GLOO_SOCKET_IFNAME=stash0 NCCL_SOCKET_IFNAME=stash0 TP_SOCKET_IFNAME=stash0" in config


def test_sshd_config_listens_on_the_node_only(tmp_path):
    (tmp_path / "n1").mkdir(mode=0o700)
    (tmp_path / "n1" / "ssh_host_ed25519_key").write_text("not generated: it exists\n")
    config = write_sshd_config(tmp_path, 1).read_text().splitlines()
    assert "ListenAddress 10.213.0.11:22" in config
    assert f"PidFile {tmp_path / 'n1' / 'sshd.pid'}" in config
    assert "AcceptEnv GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME TP_SOCKET_IFNAME" in config
    assert "PasswordAuthentication no" in config


def test_a_named_cluster_has_its_own_ssh_names_and_addresses(tmp_path):
    layout = Layout("bench", "10.213.4.0/24")
    for index in range(2):
        (tmp_path / f"n{index}").mkdir()
        (tmp_path / f"n{index}" / "ssh_host_ed25519_key.pub").write_text(f"ssh-ed25519 KEY{index} x\n")
    config = write_client_config(tmp_path, 2, layout).read_text()
    known_hosts = (tmp_path / "known_hosts").read_text().splitlines()
    assert known_hosts[1] == "stash-bench-n1,10.213.4.11 ssh-ed25519 KEY1"
    assert "Host stash-bench-n* 10.213.4.*\n" in config and "10.213.0." not in config
    assert "ListenAddress 10.213.4.11:22" in write_sshd_config(tmp_path, 1, layout).read_text().splitlines()
    state = cluster_state.new_state(tmp_path, None, layout)
    state["nodes"].append(cluster_state.new_node(0, SHAPING, None, layout))
    assert (state["name"], state["root_address"]) == ("bench", "10.213.4.1")
    assert (state["nodes"][0]["namespace"], state["nodes"][0]["address"]) == ("stash-bench-n0", "10.213.4.10")
    assert Layout.of_state(state) == layout


def test_the_command_line_takes_the_node_counts_and_indexes_the_cluster_has():
    """`cluster up --nodes 17` passed the option check (240) and failed later; `set --node` said 0 .. 239."""
    from stash_core.cli import network
    from stash_core.launch.cluster.names import MAX_NODES

    assert network.MAX_NODES == MAX_NODES


def test_a_ctrl_c_while_a_link_is_shaped_lets_the_state_record_it_first(tmp_path, monkeypatch):
    import os
    import signal

    from stash_core.launch.cluster import status as cluster_status_module

    state = cluster_state.new_state(tmp_path, None)
    state["nodes"].append(cluster_state.new_node(0, SHAPING, [0, 1]))
    cluster_state.save_state(tmp_path, state)

    def shape_then_interrupted(state, node):  # the Ctrl-C lands between the tc calls
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(cluster_status_module, "shape_node", shape_then_interrupted)
    monkeypatch.setattr(cluster_status_module.gone, "require_present", lambda name, state_dir: None)
    monkeypatch.setattr(cluster_status_module.net, "set_hub_veth", lambda layout, veth, up: None)
    with pytest.raises(KeyboardInterrupt):
        cluster.set_link(0, bandwidth="5mbit", down=True, state_dir=tmp_path)
    saved = cluster_state.require_state(tmp_path)["nodes"][0]
    assert (saved["shaping"]["rate_bps"], saved["down"]) == (5e6, True)


def test_a_ctrl_c_during_down_is_held_until_the_whole_cluster_is_down(tmp_path, monkeypatch):
    import os
    import signal

    from stash_core.launch.cluster import lifecycle, net

    deleted = []

    def delete_namespace(namespace):
        if not deleted:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C after the first namespace
        deleted.append(namespace)
        return f"deleted {namespace}"

    monkeypatch.setattr(net, "live_namespaces", lambda layout: ["stash-x-n0", "stash-x-n1"])
    monkeypatch.setattr(net, "namespace_pids", lambda namespace: [])
    monkeypatch.setattr(net, "delete_namespace", delete_namespace)
    monkeypatch.setattr(net, "delete_root_links", lambda layout: ["deleted the links"])
    monkeypatch.setattr(net, "hub_owner", lambda layout: None)
    with pytest.raises(KeyboardInterrupt):
        lifecycle.cluster_down(tmp_path / "state", "x")
    assert deleted == ["stash-x-n0", "stash-x-n1"]  # it went on to the end: no half cluster


def test_a_state_folder_other_accounts_can_write_is_refused_to_up_and_to_every_reader(tmp_path):
    """A world-writable --state-dir was taken: any account could then put its key in authorized_keys (root
    on the nodes, which share this machine's files) or a ProxyCommand in the ssh config a profile runs."""
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UsageError, match="writable by other accounts: anyone who can write there"):
        cluster_state.refuse_shared_folder(shared, "--state-dir x")
    below = shared / "state"  # a private folder in a folder others can change is no better
    below.mkdir(mode=0o700)
    with pytest.raises(UsageError, match=f"{shared} can be changed by other accounts"):
        cluster_state.refuse_shared_folder(below, "--state-dir x")
    with pytest.raises(UsageError, match="writable by other accounts"):
        cluster_state.require_state(shared)  # a profile or probe reading it
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    cluster_state.refuse_shared_folder(private, "--state-dir x")
    sticky = tmp_path / "sticky"  # as /tmp: others write there, but replace no one's entries
    sticky.mkdir()
    sticky.chmod(0o1777)
    cluster_state.refuse_shared_folder(sticky / "state", "--state-dir x")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"name": "dmg", "nodes": [{}]}', "node 0 has no valid index"),
        ('{"version": 1, "name": "dmg", "nodes": "abc"}', "nodes is not a list"),
        ('{"version": 1, "name": "dmg", "nodes": [1, 2]}', "node 0 is not a JSON object"),
        ('{"version": 1, "name": 5}', "name is not a text"),
        ("[1]", "not a JSON object"),
    ],
)
def test_a_damaged_state_file_is_one_line_and_down_still_takes_the_cluster_down(tmp_path, capsys, text, why):
    """A state.json edited by hand ended status, set, profile and probe with a KeyError or TypeError."""
    from stash_core.cli.main import main

    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    (state_dir / "state.json").write_text(text)
    with pytest.raises(cluster_state.DamagedState, match=re.escape(f"is damaged ({why})")):
        cluster_state.load_state(state_dir)
    assert main(["cluster", "status", "--name", "dmg", "--state-dir", str(state_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"stash: the emulated cluster's state file {state_dir / 'state.json'} is damaged")
    assert len(err.splitlines()) == 1
    assert main(["cluster", "down", "--name", "dmg", "--state-dir", str(state_dir)]) == 0
    assert f"is damaged ({why}): taken down by the cluster's names" in capsys.readouterr().out
    assert (state_dir / "state.json").read_text() == text  # not ours to remove


def test_a_damaged_state_still_names_its_cluster_where_it_can_be_read(tmp_path):
    """The advice named no --name, and down without one took a folder not named after the cluster for the
    default cluster's: the cluster recorded was never touched."""
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    (state_dir / "state.json").write_text('{"name": "dmg", "nodes": [{"index": "0"}]}')
    assert cluster_state.resolve(None, state_dir)[0] == "dmg"
    advice = re.escape(f"`stash cluster down --name dmg --state-dir {state_dir}`")
    with pytest.raises(cluster_state.DamagedState, match=advice):
        cluster_state.load_state(state_dir)
