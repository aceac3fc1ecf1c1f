"""Multi-machine profiling without machines: planning, validation, job transport, refusals before any ssh."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SMALL, one_line_error, stash_here

from stash_core.engine.machine import validate
from stash_core.engine.plan import plan_phases
from stash_core.engine.profiler import add_communication
from stash_core.errors import UsageError
from stash_core.launch.hosts import RemoteHosts, hosts_from_names, validate_python, validate_workdir
from stash_core.launch.ssh import SshTarget
from stash_core.measure.worker_job import encode_worker_job, read_worker_job
from stash_core.spec import ProfileSpec
from stash_core.spec_checks import check_cluster_state


def spec(**changes) -> ProfileSpec:
    return ProfileSpec(model="resnet18", batch_size=2, device="cpu", **changes)


@pytest.mark.parametrize(
    ("reference_workers", "chain", "r1_workers"),
    [
        (None, ["R0", "R1", "R1n"], 4),
        (4, ["R0", "R1", "R1n"], 4),
        (2, ["R0", "R1", "R1n"], 2),
        (1, ["R0", "R1n"], None),
    ],
)
def test_the_single_machine_reference_fits_the_first_machine(reference_workers, chain, r1_workers):
    planned_chain, plans = plan_phases(spec(workers_per_node=2, nodes=2, hosts=["a", "b"]), reference_workers)
    assert planned_chain == chain
    by_name = {plan.name: plan for plan in plans}
    assert (by_name["R1"].workers if "R1" in by_name else None) == r1_workers
    assert (by_name["R1n"].workers_per_node, by_name["R1n"].nodes) == (2, 2)


def test_network_alone_needs_only_the_reference_and_the_spread_run():
    _, plans = plan_phases(spec(workers_per_node=1, nodes=2, hosts=["a", "b"], stalls=["network"]), 2)
    assert [(plan.name, plan.workers, plan.nodes) for plan in plans] == [("R1", 2, 1), ("R1n", 2, 2)]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"nodes": 2}, "say which machines"),
        ({"nodes": 2, "hosts": ["a"]}, r"1 host\(s\) for --nodes 2"),
        ({"nodes": 2, "hosts": ["a", "b"], "cluster": "emulated"}, "either --hosts or --cluster"),
        ({"cluster": "aws"}, "only cluster kind"),
        ({"cluster_bandwidth": "1gbit"}, "--cluster emulated only"),
        ({"nodes": 2, "hosts": ["a", "b"], "disk_read_mbps": 5.0}, "--disk-read-mbps"),
        ({"ssh_user": "ubuntu"}, "need --hosts"),
        ({"master_addr": "10.0.0.1"}, "--master-addr applies to --hosts only"),
        ({"nodes": 2, "cluster": "emulated", "master_addr": "10.0.0.1"}, "--master-addr applies to --hosts"),
        ({"master_port": 29555}, "--master-port and --comm-timeout need --hosts"),
        ({"comm_timeout_s": 30}, "--master-port and --comm-timeout need --hosts"),
    ],
)
def test_inconsistent_machine_options_are_refused(changes, message):
    with pytest.raises(UsageError, match=message):
        validate(spec(**changes), cuda_devices=0)


def test_a_cluster_state_folder_needs_the_cluster():
    """--cluster-state is no field of the spec: checked beside it, for `stash profile` and `stash probe`."""
    with pytest.raises(UsageError, match="^--cluster-state applies to --cluster emulated only$"):
        check_cluster_state(spec(), "/run/stash-cluster-bench")
    check_cluster_state(spec(nodes=2, cluster="emulated"), "/run/stash-cluster-bench")
    check_cluster_state(spec(), None)
    validate(spec(nodes=2, hosts=["a", "b"], master_addr="10.0.0.1", master_port=29555), cuda_devices=0)


def test_remote_specs_skip_this_machines_core_count():
    validate(spec(workers_per_node=512, nodes=2, hosts=["a", "b"]), cuda_devices=0)  # the hosts decide


@pytest.mark.parametrize(
    "host", ["a;touch /tmp/pwned", "-oProxyCommand=touch /tmp/pwned", "$(touch /tmp/pwned)", "a b", ""]
)
def test_host_names_that_could_inject_are_refused(host):
    with pytest.raises(UsageError, match="invalid host name|empty"):
        hosts_from_names([host])
    assert not Path("/tmp/pwned").exists()


def test_users_pythons_and_workdirs_are_checked():
    with pytest.raises(UsageError, match="invalid user name"):
        hosts_from_names(["gpu-a"], user="root;id")
    for bad in ("python3; id", "-c", "py thon", "$(id)"):
        with pytest.raises(UsageError, match="--python"):
            validate_python(bad)
    assert validate_python("/opt/venv/bin/python3") == "/opt/venv/bin/python3"
    with pytest.raises(UsageError, match="--workdir"):
        validate_workdir("/srv/stash\nid")
    remote = hosts_from_names(["ubuntu@gpu-a:2222", "gpu-b"], user="admin", python="python3.11")
    assert [str(target) for target in remote.targets] == ["ubuntu@gpu-a:2222", "admin@gpu-b"]
    assert remote.workdir == "." and remote.for_nodes(1).host_names == ["gpu-a"]


def test_capacity_is_gpus_or_cores_or_the_nodes_cpu_set():
    remote = RemoteHosts([SshTarget("a"), SshTarget("b")], "python3", ".", cpu_sets=[[0, 1], [2]])
    assert remote.capacity({"cpu_count": 8, "gpu_count": 4}, "cuda") == 4
    assert remote.capacity({"cpu_count": 8}, "cpu") == 2
    assert remote.capacity({"cpu_count": 8}, "cpu", node=1) == 1
    assert RemoteHosts([SshTarget("a")], "python3", ".").capacity({"cpu_count": 8}, "cpu") == 8


def test_the_job_travels_inline_and_long_jobs_are_compressed(tmp_path):
    job = {"phase": "R1n", "model": "resnet18", "exclude_files": []}
    args = encode_worker_job(job)
    assert args[0] == "--job-json" and read_worker_job(args) == job
    big = {**job, "exclude_files": [f"/data/class{i}/img{i}.jpg" for i in range(5000)]}
    args = encode_worker_job(big)
    assert args[0] == "--job-zb64" and len(args[1]) < 100_000 and read_worker_job(args) == big
    path = tmp_path / "job.json"
    path.write_text('{"phase": "R0"}')
    assert read_worker_job(["--job", str(path)]) == {"phase": "R0"}


def _phase(name: str, workers: int, nodes: int, backward_s: float) -> dict:
    return {"name": name, "workers": workers, "nodes": nodes, "status": "completed",
            "parts_mean_s": {"backward_s": backward_s}}  # fmt: skip


def test_the_breakdown_says_which_runs_the_network_figure_compares():
    doc = {"phases": [_phase("R1", 4, 1, 0.1), _phase("R1n", 8, 2, 0.3)], "spec": {}, "model": {}}
    result = {"stalls": {"network": {"seconds": 0.2, "note": ""}}, "warnings": []}
    add_communication(result, doc, ["R0", "R1", "R1n"])
    assert result["network_reference"] == "R1 (4 workers, 1 machine) vs R1n (2x4 workers)"
    assert result["stalls"]["network"]["note"] == result["network_reference"]
    assert any("larger ring" in warning for warning in result["warnings"])
    one = {"phases": [_phase("R0", 1, 1, 0.1), _phase("R1n", 2, 2, 0.3)], "spec": {}, "model": {}}
    result = {"stalls": {"network": {"seconds": 0.2}}, "warnings": []}
    add_communication(result, one, ["R0", "R1n"])
    assert result["network_reference"] == "R0 (1 worker, 1 machine) vs R1n (2x1 workers)"


def test_cli_refuses_an_injected_host_before_anything_runs(tmp_path, capsys, monkeypatch):
    marker = tmp_path / "pwned"
    result = stash_here(
        capsys, monkeypatch, "profile", *SMALL, "--workers", "1", "--nodes", "2", "--hosts",
        f"a;touch {marker},b", "--db", str(tmp_path / "r.duckdb"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "invalid host name" in one_line_error(result)
    assert (
        not marker.exists() and not (tmp_path / "r.duckdb").exists() and not (tmp_path / "results").exists()
    )
    checked = stash_here(capsys, monkeypatch, "remote", "check", f"x;touch {marker}", cwd=tmp_path)
    assert checked.returncode == 2 and "invalid host name" in one_line_error(checked)
    assert not marker.exists()


def test_cli_cluster_status_without_a_cluster_and_a_missing_cluster(tmp_path, capsys, monkeypatch):
    status = stash_here(capsys, monkeypatch, "cluster", "status", "--state-dir", str(tmp_path / "none"))
    assert status.returncode == 1 and "no emulated cluster" in status.stdout  # not up: `status || up`
    profile = stash_here(
        capsys, monkeypatch, "profile", *SMALL, "--nodes", "2", "--cluster", "emulated", "--cluster-state",
        str(tmp_path / "none"), "--db", str(tmp_path / "r.duckdb"),
    )  # fmt: skip
    assert profile.returncode == 2 and "the emulated cluster default is not up" in one_line_error(profile)
