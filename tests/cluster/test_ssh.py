"""The OpenSSH layer against real sshd's in the emulated cluster: quoting, errors, remote_check."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from clusterkit import cluster_fixture

import stash_core
from stash_core.errors import MeasurementError, UsageError
from stash_core.launch import cluster
from stash_core.launch.ssh import (
    AuthRefusedError,
    HostUnreachableError,
    SshTarget,
    parse_target,
    remote_check,
    run_remote,
)

pytestmark = pytest.mark.cluster

cluster_state = cluster_fixture(2, "ssh", bandwidth="1gbit", latency="0ms")

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hosts(cluster_state) -> list[SshTarget]:
    return cluster.cluster_hosts(cluster_state)


def test_arguments_arrive_exactly_and_nothing_is_injected(hosts, tmp_path):
    marker = tmp_path / "injected"
    tricky = [
        "a b",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"; touch {marker}",
        "it's",
        '"q"',
        "*",
        "\\",
        "",
    ]
    completed = run_remote(
        hosts[0], [sys.executable, "-c", "import sys; print(repr(sys.argv[1:]))", *tricky], 30
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == repr(tricky)
    assert not marker.exists()


def test_injection_host_is_rejected_before_anything_runs():
    pwned = Path("/tmp/pwned")
    pwned.unlink(missing_ok=True)
    with pytest.raises(UsageError, match="invalid host name"):
        run_remote(SshTarget(host="a;touch /tmp/pwned"), ["true"], 5)
    with pytest.raises(UsageError, match="invalid host name"):
        parse_target("root@a;touch /tmp/pwned")
    assert not pwned.exists()


def test_unreachable_host_names_the_host(cluster_state, hosts):
    try:
        cluster.set_link(1, down=True, state_dir=cluster_state)
        with pytest.raises(HostUnreachableError, match=re.escape(f"cannot reach host {hosts[1].host}: ")):
            run_remote(hosts[1], ["true"], 20, connect_timeout_s=2)
    finally:
        cluster.set_link(1, down=False, state_dir=cluster_state)


def _trusting_config(cluster_state, tmp_path) -> Path:
    """An ssh config that trusts the nodes' host keys and offers only the key given with -i."""
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host *\n  UserKnownHostsFile {cluster_state / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
        "  IdentitiesOnly yes\n"
    )
    return config


def test_refused_key_is_reported_as_authentication(cluster_state, hosts, tmp_path):
    other_key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    config = _trusting_config(cluster_state, tmp_path)  # offers only the other key
    target = SshTarget(host=hosts[0].host, user="root", key_path=other_key, config_file=config)
    with pytest.raises(AuthRefusedError, match=re.escape(f"authentication refused by host {hosts[0].host}")):
        run_remote(target, ["true"], 20)


def test_a_key_ssh_will_not_load_is_named(cluster_state, hosts, tmp_path):
    """A copy of the node's own key at mode 644: ssh ignores it, and the host's refusal is not the fault."""
    loose_key = tmp_path / "loose_key"
    loose_key.write_bytes(Path(cluster.cluster_status(cluster_state)["key_path"]).read_bytes())
    loose_key.chmod(0o644)
    config = _trusting_config(cluster_state, tmp_path)
    target = SshTarget(host=hosts[0].host, user="root", key_path=loose_key, config_file=config)
    with pytest.raises(AuthRefusedError, match=re.escape(f"ssh could not use the key {loose_key}: bad perm")):
        run_remote(target, ["true"], 20)


def test_missing_command_and_timeout(hosts):
    missing = f"command 'no-such-command-stash' not found on host {hosts[0].host}"
    with pytest.raises(UsageError, match=re.escape(missing)):
        run_remote(hosts[0], ["no-such-command-stash", "--flag"], 20)
    with pytest.raises(MeasurementError, match="timed out after 1 s"):
        run_remote(hosts[0], ["sleep", "3"], 1)


@pytest.mark.slow  # imports torch on the node
def test_remote_check_reports_versions(hosts):
    import torch

    info = remote_check(hosts[1], python=sys.executable, workdir=str(REPO_ROOT))
    assert info["stash_version"] == stash_core.__version__
    assert info["torch_version"] == torch.__version__
    assert info["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert info["gpu_count"] == len(info["gpus"])


def test_remote_check_without_stash(hosts):
    bare_python = "/usr/bin/python3"
    if not Path(bare_python).exists():
        pytest.skip(f"no {bare_python} here")
    probe = subprocess.run([bare_python, "-c", "import stash_core"], cwd="/", capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{bare_python} can import stash_core here")
    with pytest.raises(UsageError, match=re.escape(f"Stash not installed on {hosts[0].host}")):
        remote_check(hosts[0], python=bare_python, workdir="/")
    no_python = f"python 'no-such-python' not found on host {hosts[0].host}"
    with pytest.raises(UsageError, match=re.escape(no_python)):
        remote_check(hosts[0], python="no-such-python")
