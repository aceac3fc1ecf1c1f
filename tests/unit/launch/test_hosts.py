"""The machines of an emulated-cluster run as launch/hosts.py builds them: the link it records is the
bottleneck of the nodes used, and a change of the links during the run is said."""

from __future__ import annotations

from pathlib import Path

import pytest

from stash_core.errors import UsageError
from stash_core.launch import cluster, hosts
from stash_core.launch.hosts import bottleneck_link, hosts_from_cluster, link_change_warning
from stash_core.launch.ssh import SshTarget
from stash_core.spec import ProfileSpec


def shaping(rate_bps: int | None, latency_us: int = 0, loss_pct: float = 0.0) -> dict:
    return {"rate_bps": rate_bps, "latency_us": latency_us, "loss_pct": loss_pct}


def status(*shapings: dict, netem: bool = True) -> dict:
    nodes = [
        {"index": index, "namespace": f"stash-n{index}", "address": f"10.213.0.{10 + index}", "shaping": link}
        for index, link in enumerate(shapings)
    ]
    return {"up": True, "nodes": nodes, "netem": netem, "cpu_sets": None}


def test_the_link_recorded_is_the_slowest_of_the_nodes_used():
    uneven = status(shaping(10**9), shaping(2 * 10**8, 500), shaping(10**8, 2000, 1.0))
    assert bottleneck_link(uneven, 1) == {"rate_bps": 10**9, "latency_us": 0, "loss_pct": 0.0, "netem": True}
    assert bottleneck_link(uneven, 2) == {
        "rate_bps": 2 * 10**8,
        "latency_us": 500,
        "loss_pct": 0.0,
        "netem": True,
    }
    assert bottleneck_link(uneven, 3)["rate_bps"] == 10**8  # the third node limits a run on all three
    # an unlimited node limits nothing; only all unlimited is no limit
    assert bottleneck_link(status(shaping(None), shaping(3 * 10**8)), 2)["rate_bps"] == 3 * 10**8
    assert bottleneck_link(status(shaping(None), shaping(None), netem=False), 2) == {
        "rate_bps": None, "latency_us": 0, "loss_pct": 0.0, "netem": False,
    }  # fmt: skip


@pytest.fixture
def two_nodes(monkeypatch):
    """An emulated cluster of two nodes, as the cluster package would report it: node 1 is the slow one."""
    current = {"status": status(shaping(10**9), shaping(2 * 10**8))}
    targets = [SshTarget(f"10.213.0.{10 + index}", "root") for index in range(2)]
    monkeypatch.setattr(hosts, "require_present", lambda name, state_dir: None)
    monkeypatch.setattr(cluster, "cluster_hosts", lambda state_dir=None, name=None: targets)
    monkeypatch.setattr(cluster, "cluster_status", lambda state_dir=None, name=None: current["status"])
    return current


def test_a_run_on_the_cluster_records_its_slowest_link_not_node_0s(two_nodes, tmp_path: Path):
    remote = hosts_from_cluster(2, tmp_path)
    assert remote.link["rate_bps"] == 2 * 10**8
    assert hosts_from_cluster(1, tmp_path).link["rate_bps"] == 10**9


def test_a_change_of_the_links_during_a_run_is_a_warning(two_nodes, tmp_path: Path):
    spec = ProfileSpec(model="probe", batch_size=None, nodes=2, cluster="emulated")
    remote = hosts_from_cluster(2, tmp_path)
    assert link_change_warning(remote, spec, tmp_path) is None
    two_nodes["status"] = status(shaping(10**9), shaping(5 * 10**7))  # `stash cluster set --node 1 ...`
    warning = link_change_warning(remote, spec, tmp_path)
    assert warning is not None and "changed while it ran" in warning
    assert "from rate 200 Mbit/s" in warning and "to rate 50 Mbit/s" in warning
    # named hosts have no emulated link to compare
    named = ProfileSpec(model="probe", batch_size=None, nodes=2, hosts=["a", "b"])
    assert link_change_warning(hosts.hosts_from_names(["a", "b"]), named, None) is None


def test_a_link_change_without_netem_names_no_delay_it_never_had(two_nodes, tmp_path: Path):
    """Without the netem qdisc only the rate is emulated: the warning said "delay 1000 us" all the same."""
    spec = ProfileSpec(model="probe", batch_size=None, nodes=2, cluster="emulated")
    two_nodes["status"] = status(shaping(10**9, 1000), shaping(2 * 10**8, 1000), netem=False)
    remote = hosts_from_cluster(2, tmp_path)
    two_nodes["status"] = status(shaping(10**9, 1000), shaping(5 * 10**7, 1000), netem=False)
    warning = link_change_warning(remote, spec, tmp_path)
    assert "(from rate 200 Mbit/s to rate 50 Mbit/s)" in warning and "delay" not in warning


def test_the_machines_are_recorded_as_given_two_on_one_address_told_apart():
    """The result file kept bare addresses: two sshd ports of one address read as one machine twice."""
    remote = hosts.hosts_from_names(["root@127.0.0.1:22922", "127.0.0.1:22923", "[::1]:2200"], "alice", None,
                                    "python3", None, None, 29500, 60)  # fmt: skip
    assert remote.host_texts == ["root@127.0.0.1:22922", "alice@127.0.0.1:22923", "alice@[::1]:2200"]


def _host_info(stash_version: str) -> dict:
    return {"torch_version": "2.13.0", "python_version": "3.11.2", "stash_version": stash_version}


def test_a_host_with_another_stash_version_is_refused_before_any_run(monkeypatch):
    """Its workers would print another version's protocol lines: the run failed as 'printed no result'."""
    from stash_core import __version__

    versions = {"10.0.0.1": __version__, "10.0.0.2": "0.1.0\x1b[31m"}
    monkeypatch.setattr(hosts, "remote_check", lambda target, **_: _host_info(versions[target.host]))
    remote = hosts.hosts_from_names(list(versions), None, None, "python3", None, None, 29500, 60)
    with pytest.raises(hosts.UsageError) as refused:
        hosts.check_hosts(remote)
    assert str(refused.value) == f"10.0.0.2 runs Stash 0.1.0\\x1b[31m and this is Stash {__version__}: " \
        "install this version there"
    versions["10.0.0.2"] = __version__
    assert [info["host"] for info in hosts.check_hosts(remote)] == ["10.0.0.1", "10.0.0.2"]


@pytest.mark.parametrize(
    ("resolved", "master"),
    [
        ({"vm": ["127.0.0.1"], "127.0.0.1": ["127.0.0.1"]}, "127.0.0.1"),
        ({"vm": ["127.0.1.1", "::1"], "127.0.0.1": ["127.0.0.1"]}, "127.0.0.1"),
        ({"vm": ["127.0.0.1", "10.0.0.5"], "127.0.0.1": ["127.0.0.1"]}, "vm"),
        ({"127.0.0.1": ["127.0.0.1"]}, "vm"),  # vm does not resolve here
    ],
)
def test_hosts_that_are_all_this_machine_meet_on_loopback(monkeypatch, resolved, master):
    """`--hosts vm,127.0.0.1` where /etc/hosts maps the machine's name to 127.0.0.1: node 0 was told `vm`,
    which is neither loopback's address nor `localhost`, so its gloo sockets listened on every interface."""
    import socket

    def getaddrinfo(name, port):
        if name not in resolved:
            raise socket.gaierror("Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0)) for address in resolved[name]]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    remote = hosts.hosts_from_names(["vm:2201", "127.0.0.1:2202"], python="python3", master_port=29500)
    assert remote.rendezvous_addr() == master
    given = hosts.hosts_from_names(["vm", "127.0.0.1"], None, None, "python3", None, "10.1.1.1", 29500, 60)
    assert given.rendezvous_addr() == "10.1.1.1"  # a master address given is kept


def test_an_ssh_user_that_no_host_would_use_is_refused():
    """`--hosts root@a,bob@b --ssh-user alice` (and `remote check root@h --ssh-user alice`) ran as root and
    bob without a word of alice; a host without a user of its own still takes it."""
    said = r"--ssh-user alice: every host names its own user \(root@a, bob@b\)"
    with pytest.raises(hosts.UsageError, match=said):
        hosts.hosts_from_names(["root@a", "bob@b"], "alice", None, "python3", None, None, 29500, 60)
    mixed = hosts.hosts_from_names(["root@a", "b"], "alice", None, "python3", None, None, 29500, 60)
    assert [target.user for target in mixed.targets] == ["root", "alice"]
    from stash_core.cli.main import main

    assert main(["remote", "check", "root@127.0.0.1:2299", "--ssh-user", "alice"]) == 2


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", "[::]", "0", "::0", "[::0]", "0:0::0"])
def test_a_wildcard_master_address_is_refused(wildcard):
    """`--master-addr 0.0.0.0` was taken: the rendezvous store listened on every interface of node 0, and the
    other nodes would have dialled their own."""
    with pytest.raises(UsageError, match="is no one machine's address"):
        hosts.hosts_from_names(["a:2201", "b:2202"], python="python3", master_addr=wildcard)
    given = hosts.hosts_from_names(["a:2201", "b:2202"], master_addr="10.1.1.1")
    assert given.rendezvous_addr() == "10.1.1.1"


def test_a_model_file_a_host_lacks_is_refused_before_any_run(monkeypatch, capsys, tmp_path):
    """`--model mlp.py:make --hosts a,b` without --workdir launched R0, which failed on the host with "model
    file not found: mlp.py", and a failed run was saved: the files are looked for in the host check."""
    from stash_core import __version__
    from stash_core.engine.host_setup import files_of
    from stash_core.measure import remote_info

    asked: list[tuple] = []

    def check(target, **given):
        asked.append(given["files"])
        missing = [name for name in given["files"] if target.host == "10.0.0.2"]
        return {**_host_info(__version__), "missing_files": missing}

    monkeypatch.setattr(hosts, "remote_check", check)
    remote = hosts.hosts_from_names(["10.0.0.1", "10.0.0.2"], None, None, "python3", None, None, 29500, 60)
    spec = ProfileSpec(model="mlp.py:make", batch_size=8, nodes=2, hosts=["10.0.0.1", "10.0.0.2"])
    with pytest.raises(UsageError, match=r"mlp\.py is not a file on 10\.0\.0\.2 \(in the login folder"):
        hosts.check_hosts(remote, files=files_of(spec))
    assert asked == [("mlp.py",), ("mlp.py",)]
    assert files_of(ProfileSpec(model="resnet18", batch_size=8)) == ()
    # the host's side: what is no file in its working folder is named
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.py").write_text("")
    capsys.readouterr()
    assert remote_info.main(["no-such-model.py", "here.py"]) == 0
    assert json.loads(capsys.readouterr().out)["missing_files"] == ["no-such-model.py"]


def test_hosts_are_reached_with_the_ssh_config_given(tmp_path):
    """`remote check` took --ssh-config, `profile` and `probe` did not: the hosts of a config had to be put in
    ~/.ssh to be profiled."""
    config = tmp_path / "cfg"
    config.write_text("Host lab\n  HostName 127.0.0.1\n")
    spec = ProfileSpec(model="resnet18", batch_size=8, nodes=2, hosts=["lab", "lab2"], ssh_config=str(config))
    remote = hosts.remote_hosts(spec)
    assert [target.config_file for target in remote.targets] == [config, config]
    from stash_core.launch.ssh import ssh_argv

    argv = ssh_argv(remote.targets[0], ["true"])
    assert argv[argv.index("-F") + 1] == str(config)


def test_two_hosts_that_are_one_machine_are_warned_of():
    """--hosts 127.0.0.1:2222,127.0.0.2:2222 reached one machine twice, and nothing said so."""
    from stash_core.launch.hosts import same_machine_warning

    one = {"hostname": "vm", "machine_id": "3d12"}
    infos = [{"host": "127.0.0.1", **one}, {"host": "127.0.0.2", **one}]
    said = same_machine_warning(infos)
    assert said is not None and said.startswith("hosts 127.0.0.1, 127.0.0.2 are one machine")
    apart = [{"host": "a", "hostname": "ubuntu", "machine_id": "1"}, {"host": "b", "hostname": "ubuntu",
                                                                          "machine_id": "2"}]  # fmt: skip
    assert same_machine_warning(apart) is None  # one image's host name on two machines
    assert same_machine_warning([{"host": "a", "hostname": "vm"}, {"host": "b", "hostname": "vm"}]) is None
