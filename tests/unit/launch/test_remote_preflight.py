"""The node-side preflight check, run here as a node runs it: its source text with `python -c`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from stash_core.launch import multinode_preflight


def _preflight(*args: str) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", multinode_preflight.PREFLIGHT_SRC, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_workdir_and_torch(tmp_path):
    assert _preflight(str(tmp_path)) == {"workdir_ok": True, "torch": True}
    assert _preflight(str(tmp_path / "missing"))["workdir_ok"] is False


def test_master_port_and_address_on_node_0(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        taken = _preflight(str(tmp_path), "127.0.0.1", str(port))
    assert taken["port_free"] is False and taken["port_error"]
    assert taken["addr_local"] is True
    with socket.socket() as probe:
        probe.bind(("", 0))
        free_port = probe.getsockname()[1]
    free = _preflight(str(tmp_path), "127.0.0.1", str(free_port))
    assert free["port_free"] is True
    foreign = _preflight(str(tmp_path), "192.0.2.1", str(free_port))  # TEST-NET-1: never ours
    assert foreign["addr_local"] is False and foreign["addr_error"]


def test_bad_arguments_are_a_usage_message():
    completed = subprocess.run(
        [sys.executable, "-c", multinode_preflight.PREFLIGHT_SRC, "/", "only-an-address"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 2 and "usage:" in completed.stderr


def test_a_master_address_not_of_node_0_is_refused_before_any_run(monkeypatch, tmp_path):
    """--master-addr 10.9.9.9 was found at R1n, after R0 and R1 had run (half a minute for nothing); the
    check runs over ssh (here a local shell stands in for it) before the first run."""
    import pytest

    from stash_core.errors import UsageError
    from stash_core.launch import ssh
    from stash_core.launch.multinode_preflight import check_master_address

    monkeypatch.setattr(ssh, "ssh_argv", lambda target, argv, *_: ["sh", "-c", ssh.remote_command(argv)])
    node0 = ssh.parse_target("127.0.0.1:2201")
    with pytest.raises(UsageError, match=r"^master address 192\.0\.2\.1 is not an address of node 0 "
                                         r"\(127\.0\.0\.1:2201\): "):  # fmt: skip
        check_master_address(node0, sys.executable, str(tmp_path), "192.0.2.1")
    check_master_address(node0, sys.executable, str(tmp_path), "127.0.0.1")
    # the default, node 0's host name, when that is an ssh_config alias: said with what to give instead
    with pytest.raises(UsageError, match=r"^master address box-alias\.invalid is not an address of node 0 .*"
                                         r"\(the default, node 0's host name as --hosts gives it: give "
                                         r"--master-addr, an address of node 0"):  # fmt: skip
        check_master_address(node0, sys.executable, str(tmp_path), "box-alias.invalid", given=False)


def test_a_probes_default_master_address_is_said_with_what_to_give(monkeypatch, tmp_path):
    """`stash probe --hosts ALIAS,...` (ssh_config aliases) said only "Temporary failure in name
    resolution": the run's own check (a probe has no earlier one) now says to give --master-addr."""
    import pytest

    from stash_core.errors import UsageError
    from stash_core.launch import ssh
    from stash_core.launch.multinode_preflight import preflight

    monkeypatch.setattr(ssh, "ssh_argv", lambda target, argv, *_: ["sh", "-c", ssh.remote_command(argv)])
    nodes = [ssh.parse_target("127.0.0.1:2201"), ssh.parse_target("127.0.0.1:2202")]
    with pytest.raises(UsageError, match=r"\(the default, node 0's host name as --hosts gives it: give "):
        preflight(nodes, sys.executable, str(tmp_path), "box-alias.invalid", 29500, master_given=False)
    with pytest.raises(UsageError) as given:
        preflight(nodes, sys.executable, str(tmp_path), "box-alias.invalid", 29500)
    assert "the default" not in str(given.value)
