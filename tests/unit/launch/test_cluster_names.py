"""Names, addresses and state folders of several emulated clusters on one machine (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stash_core.errors import UsageError
from stash_core.launch.cluster import gone as cluster_gone
from stash_core.launch.cluster import net as cluster_net
from stash_core.launch.cluster import state as cluster_state
from stash_core.launch.cluster.names import (
    ANY_NAMESPACE_RE,
    DEFAULT_LAYOUT,
    Layout,
    check_name,
    gone_message,
    parse_subnet,
    state_dir_for,
)
from stash_core.launch.hosts import cluster_name_of, default_cluster_state_dir, hosts_from_cluster
from stash_core.launch.ssh import SshTarget


def test_the_default_cluster_keeps_its_historical_names():
    layout = DEFAULT_LAYOUT
    assert (layout.name, layout.subnet) == ("default", "10.213.0.0/24")
    assert (layout.hub_namespace, layout.node_namespace(2), layout.root_veth) == (
        "stash-hub",
        "stash-n2",
        "stash-vh",
    )
    assert (layout.root_address, layout.node_address(15)) == ("10.213.0.1", "10.213.0.25")


def test_a_named_cluster_has_its_own_namespaces_link_and_addresses():
    layout = Layout("bench", "10.213.7.0/24")
    assert (layout.hub_namespace, layout.node_namespace(0)) == ("stash-bench-hub", "stash-bench-n0")
    assert layout.root_veth == "svh-bench" and len(Layout("a" * 11).root_veth) <= 15  # a link name's limit
    assert (layout.root_address, layout.node_address(1)) == ("10.213.7.1", "10.213.7.11")
    assert layout.address_prefix == "10.213.7."


@pytest.mark.parametrize(
    ("namespace", "default_owns", "bench_owns"),
    [
        ("stash-hub", True, False),
        ("stash-n3", True, False),
        ("stash-bench-hub", False, True),
        ("stash-bench-n12", False, True),
        ("stash-benchx-n0", False, False),
        ("stash-n1-hub", False, False),  # the hub of a cluster called n1
        ("stash-probe123", False, False),
        ("other-n1", False, False),
    ],
)
def test_each_cluster_owns_only_its_namespaces(namespace, default_owns, bench_owns):
    assert DEFAULT_LAYOUT.owns_namespace(namespace) is default_owns
    assert Layout("bench").owns_namespace(namespace) is bench_owns


def test_root_links_are_told_apart():
    assert Layout("bench").owns_root_link("svh-bench")
    assert not Layout("bench").owns_root_link("stash-vh") and not Layout("bench").owns_root_link("svh-benchx")
    assert not DEFAULT_LAYOUT.owns_root_link("svh-bench")


def test_namespace_names_say_which_cluster_they_belong_to():
    names = {"stash-hub": None, "stash-n0": None, "stash-ab1-n3": "ab1", "stash-hub-hub": "hub"}
    for namespace, name in names.items():
        assert ANY_NAMESPACE_RE.match(namespace).group("name") == name
    assert ANY_NAMESPACE_RE.match("stash-probe7") is None


@pytest.mark.parametrize("name", ["default", "bench", "a", "u1000", "abcdefghijk"])
def test_good_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "Bench", "1abc", "a-b", "a_b", "abcdefghijkl", "a b", "../x", None, 3])
def test_bad_names_are_refused(name):
    with pytest.raises(UsageError, match="invalid cluster name"):
        check_name(name)


@pytest.mark.parametrize(
    ("text", "subnet"),
    [
        ("10.213.9.0/24", "10.213.9.0/24"),
        ("10.213.9.0", "10.213.9.0/24"),
        ("192.168.77.0/24", "192.168.77.0/24"),
        ("172.31.5.0/24", "172.31.5.0/24"),
    ],
)
def test_subnets(text, subnet):
    assert parse_subnet(text) == subnet


@pytest.mark.parametrize("text", ["10.213.9.0/16", "10.213.9.5/24", "8.8.8.0/24", "nonsense", "::1/120", ""])
def test_bad_subnets_are_refused(text):
    with pytest.raises(UsageError, match="invalid subnet"):
        parse_subnet(text)


@pytest.mark.parametrize(
    "text", ["127.1.2.0/24", "0.0.0.0/24", "240.0.0.0/24", "169.254.3.0/24", "192.0.2.0/24", "172.32.0.0/24"]
)
def test_only_the_private_ranges_of_rfc_1918_are_taken(text):
    """Loopback (127.1.2.0/24 failed with sshd's "Server listening on ..." as its error), "this network",
    reserved, link-local and documentation ranges count as private to ipaddress: 0.0.0.0/24 and
    240.0.0.0/24 came up."""
    with pytest.raises(UsageError, match=r"expected a private IPv4 /24 \(in 10.0.0.0/8, 172.16.0.0/12 or"):
        parse_subnet(text)


def test_state_folders(monkeypatch):
    monkeypatch.delenv("STASH_CLUSTER_STATE", raising=False)
    assert state_dir_for("default") == Path("/run/stash-cluster")
    assert state_dir_for("bench") == Path("/run/stash-cluster-bench")
    monkeypatch.setenv("STASH_CLUSTER_STATE", "/tmp/elsewhere")
    assert state_dir_for("default") == default_cluster_state_dir() == Path("/tmp/elsewhere")
    assert default_cluster_state_dir("bench") == Path(
        "/run/stash-cluster-bench"
    )  # the variable is the default's
    with pytest.raises(UsageError, match="invalid cluster name"):
        default_cluster_state_dir("Bad")


def test_a_relative_state_folder_is_taken_from_where_the_command_runs(tmp_path, monkeypatch):
    """Its paths go into the nodes' sshd_config, where a relative AuthorizedKeysFile is read from the home
    folder: a cluster brought up with --state-dir relstate said it was up and refused every connection."""
    monkeypatch.chdir(tmp_path)
    assert cluster_state.resolve("bench", Path("relstate")) == ("bench", tmp_path / "relstate")
    monkeypatch.setenv("STASH_CLUSTER_STATE", "relstate")
    assert cluster_state.resolve(None, None) == ("default", tmp_path / "relstate")


def test_a_state_folder_names_its_cluster(tmp_path):
    assert cluster_state.resolve(None, tmp_path) == ("default", tmp_path)
    assert cluster_state.resolve("bench", tmp_path) == ("bench", tmp_path)
    cluster_state.save_state(
        tmp_path, cluster_state.new_state(tmp_path, None, Layout("bench", "10.213.3.0/24"))
    )
    assert cluster_state.resolve(None, tmp_path) == ("bench", tmp_path)
    with pytest.raises(UsageError, match="holds the emulated cluster bench, not other"):
        cluster_state.resolve("other", tmp_path)
    assert cluster_state.resolve("other", None) == ("other", Path("/run/stash-cluster-other"))
    # a folder without state: the name its path gives away
    assert cluster_state.resolve(None, tmp_path / "stash-cluster-ta")[0] == "ta"
    assert cluster_state.resolve(None, tmp_path / "stash-cluster-Bad")[0] == "default"


def test_the_owner_token_is_the_state_folder_or_a_digest(tmp_path):
    assert cluster_net.owner_token(tmp_path) == str(tmp_path)
    long_dir = tmp_path / ("x" * 300)
    token = cluster_net.owner_token(long_dir)
    assert token.startswith("sha256:") and len(token) < 255 and token == cluster_net.owner_token(long_dir)


def test_gone_is_one_line_that_says_how_to_bring_it_back():
    said = "the emulated cluster bench is not up (start it: sudo stash cluster up --nodes N --name bench)"
    assert gone_message("bench") == said


def test_without_state_a_profile_hears_the_cluster_is_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_net, "live_cluster_names", lambda: [])  # none up here, whatever runs beside
    with pytest.raises(UsageError) as raised:
        hosts_from_cluster(2, tmp_path / "never-up")
    assert str(raised.value) == gone_message("default")
    with pytest.raises(UsageError, match="^the emulated cluster nosuchclu is not up"):
        hosts_from_cluster(2, name="nosuchclu")


def test_a_cluster_not_up_names_the_ones_that_are(tmp_path, monkeypatch):
    """`--cluster emulated` without --cluster-name, while only revm was up: "the emulated cluster default is
    not up", nothing of revm."""
    monkeypatch.setattr(cluster_net, "live_cluster_names", lambda: ["revm", "default"])
    with pytest.raises(UsageError) as raised:
        hosts_from_cluster(2, tmp_path / "never-up")
    assert str(raised.value) == f"{gone_message('default')}; up here: revm (--cluster-name NAME chooses one)"


def test_a_machine_without_ip_still_hears_the_cluster_is_not_up(tmp_path, monkeypatch):
    """Naming the clusters that are up runs `ip netns list`: without iproute2 the refusal became "No such file
    or directory: ip" (exit 1)."""

    def no_ip():
        raise FileNotFoundError(2, "No such file or directory", "ip")

    monkeypatch.setattr(cluster_net, "live_cluster_names", no_ip)
    with pytest.raises(UsageError) as raised:
        hosts_from_cluster(2, tmp_path / "never-up")
    assert str(raised.value) == gone_message("default")


@pytest.fixture
def bench_up_elsewhere(tmp_path, monkeypatch) -> Path:
    """A cluster bench that exists, its state in a folder of its own (what its hub records)."""
    real = tmp_path / "real"
    real.mkdir()
    state = cluster_state.new_state(real, None, Layout("bench", "10.213.3.0/24"))
    state["nodes"].append(
        cluster_state.new_node(0, {"rate_bps": None, "latency_us": 0, "loss_pct": 0.0}, None)
    )
    cluster_state.save_state(real, state)
    monkeypatch.setattr(cluster_net, "all_namespaces", lambda: ["stash-bench-hub", "stash-bench-n0"])
    monkeypatch.setattr(cluster_net, "hub_owner", lambda layout: str(real))
    return real


def test_a_wrong_state_folder_is_said_not_a_cluster_gone(bench_up_elsewhere, tmp_path):
    """--cluster-state /run/nonexistent --cluster-name bench said "the emulated cluster bench is gone" while
    it was up; the folder is named, and where the cluster keeps its state."""
    with pytest.raises(UsageError) as raised:
        hosts_from_cluster(1, tmp_path / "nothere", name="bench")
    assert str(raised.value) == (
        f"--cluster-state {tmp_path / 'nothere'} holds no emulated cluster (no state.json there); the "
        f"emulated cluster bench exists and its state is in {bench_up_elsewhere}"
    )
    # its own folder (no --cluster-state) holds nothing either: where its state is
    with pytest.raises(
        UsageError, match=f"^the emulated cluster bench exists but its state is in {bench_up_elsewhere}"
    ):
        hosts_from_cluster(1, name="bench")
    # no cluster of that name at all: gone (or never up), as before
    assert cluster_gone.no_state_message("other", tmp_path / "nothere", "--cluster-state", True) is None
    assert cluster_gone.no_state_message("bench", bench_up_elsewhere, "--cluster-state", True) is None


def test_cluster_set_with_a_wrong_state_folder_names_it(bench_up_elsewhere, tmp_path, capsys):
    from stash_core.cli.main import main

    assert main(["cluster", "set", "--name", "bench", "--up", "--state-dir", str(tmp_path / "nothere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"stash: --state-dir {tmp_path / 'nothere'} holds no emulated cluster (no state.json there); the "
        f"emulated cluster bench exists and its state is in {bench_up_elsewhere}"
    )


def test_state_without_namespaces_is_gone(tmp_path, monkeypatch):
    state = cluster_state.new_state(tmp_path, None, Layout("bench", "10.213.3.0/24"))
    state["nodes"].append(
        cluster_state.new_node(0, {"rate_bps": None, "latency_us": 0, "loss_pct": 0.0}, None)
    )
    cluster_state.save_state(tmp_path, state)
    live: list[str] = []
    monkeypatch.setattr(cluster_net, "all_namespaces", lambda: list(live))
    monkeypatch.setattr(cluster_net, "hub_owner", lambda layout: str(tmp_path))
    assert cluster_gone.is_gone(tmp_path)
    with pytest.raises(UsageError, match="^the emulated cluster bench is not up"):
        hosts_from_cluster(1, tmp_path)
    live += ["stash-bench-hub", "stash-n0", "stash-bench-n0"]
    state["nodes"][0]["namespace"] = "stash-bench-n0"
    cluster_state.save_state(tmp_path, state)
    assert not cluster_gone.is_gone(tmp_path)
    cluster_state.save_state(tmp_path, {**state, "taken_down": True})  # `cluster down` has begun
    assert cluster_gone.is_gone(tmp_path)
    cluster_state.save_state(tmp_path, state)
    # a cluster of the same name brought up again from another folder: this one is gone
    monkeypatch.setattr(cluster_net, "hub_owner", lambda layout: "/run/stash-cluster-bench")
    assert cluster_gone.is_gone(tmp_path)


def test_a_failed_node_of_a_vanished_cluster_is_said_to_be_gone(tmp_path, monkeypatch):
    from stash_core.launch.node_failure import failure_reason

    config = tmp_path / "ssh_config"
    config.write_text("")
    target = SshTarget(host="10.213.3.10", config_file=config)
    stranger = SshTarget(host="10.213.3.11")
    monkeypatch.setattr(cluster_gone, "is_gone", lambda state_dir: True)
    assert cluster_gone.gone_reason(target) is None  # not a cluster's target (yet)
    cluster_gone.remember([target, stranger], "bench", tmp_path)
    assert cluster_gone.gone_reason(target) == gone_message("bench")
    assert cluster_gone.gone_reason(stranger) is None
    reason = failure_reason(target, 255, ["ssh: connect to host 10.213.3.10 port 22: No route to host"])
    assert reason == f"lost its ssh connection: {gone_message('bench')}"
    monkeypatch.setattr(cluster_gone, "is_gone", lambda state_dir: False)
    monkeypatch.setattr(cluster_gone, "SETTLE_S", 0.1)
    assert "cannot reach host 10.213.3.10" in failure_reason(
        target, 255, ["ssh: connect to host x: No route"]
    )


def test_the_cluster_name_of_a_spec_or_arguments():
    class Spec:
        cluster_name = "bench"

    assert cluster_name_of(Spec()) == "bench" and cluster_name_of(object()) is None


def test_a_cluster_that_lost_a_namespace_is_told_to_go_down_first(bench_up_elsewhere, monkeypatch):
    """It was told "start it: stash cluster up", which refuses a name whose state still exists."""
    monkeypatch.setattr(cluster_net, "all_namespaces", lambda: ["stash-bench-hub"])  # n0 deleted by hand
    with pytest.raises(UsageError) as raised:
        cluster_gone.require_present("bench", bench_up_elsewhere)
    said = str(raised.value)
    assert said.startswith("the emulated cluster bench is not up: it lost a namespace or its hub")
    assert said.endswith("sudo stash cluster down --name bench, then sudo stash cluster up --nodes N --name bench)")


def test_status_of_a_live_cluster_with_state_elsewhere_says_where(bench_up_elsewhere, capsys, monkeypatch):
    """It said "no emulated cluster bench (stray namespaces: ...)", inviting the user to delete a live one."""
    from stash_core.cli.main import main

    monkeypatch.setattr(cluster_net, "live_namespaces", lambda layout: ["stash-bench-hub", "stash-bench-n0"])
    assert main(["cluster", "status", "--name", "bench"]) == 1
    said = capsys.readouterr().out.strip()
    assert "stray" not in said and said.startswith("the emulated cluster bench exists but its state is in ")
    assert str(bench_up_elsewhere) in said


def test_down_of_an_empty_state_folder_names_the_folder_not_a_cluster_guessed(tmp_path, capsys, monkeypatch):
    from stash_core.cli.main import main

    monkeypatch.setattr(cluster_net, "live_cluster_names", lambda: [])  # none up here, whatever runs beside
    folder = tmp_path / "st"
    folder.mkdir()
    assert main(["cluster", "down", "--state-dir", str(folder)]) == 0
    assert capsys.readouterr().out.strip() == f"no emulated cluster with its state in {folder} was up"


def test_down_of_a_mistyped_name_names_the_clusters_that_are_up(tmp_path, capsys, monkeypatch):
    """`cluster down --name rev82` said only "no emulated cluster rev82 was up" and exited 0: the cluster
    meant, rev28, went on running unnoticed."""
    from stash_core.cli.main import main

    monkeypatch.setattr(cluster_net, "live_cluster_names", lambda: ["default", "rev28"])
    assert main(["cluster", "down", "--name", "rev82", "--state-dir", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out.strip() == "no emulated cluster rev82 was up (up: default, rev28)"
    # a state folder, no name: whichever cluster was meant, default among them
    assert main(["cluster", "down", "--state-dir", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out.strip().endswith("was up (up: default, rev28)")
