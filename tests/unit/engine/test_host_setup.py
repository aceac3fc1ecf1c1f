"""engine/host_setup.py: what a profile on hosts settles before its first run, and what it warns of."""

from __future__ import annotations

from stash_core.engine.host_setup import settle_on_hosts
from stash_core.launch.hosts import RemoteHosts
from stash_core.launch.ssh import parse_target
from stash_core.spec import ProfileSpec


class _Quiet:
    def message(self, text: str) -> None:
        pass


CHECKED: list[tuple] = []  # (node 0's host, the master address checked, whether it was given)


def _settle(monkeypatch, nodes: int, workers: int, link: dict | None, cpu_sets=None, stalls=None) -> tuple:
    info = {"host": "10.0.0.1", "cpu_count": 2, "gpu_count": 0, "cuda_available": False,
            "stash_version": "x", "torch_version": "2"}  # fmt: skip
    monkeypatch.setattr(
        "stash_core.engine.host_setup.check_hosts", lambda remote, **_: [info] * len(remote.targets)
    )
    monkeypatch.setattr("stash_core.engine.host_setup.version_warnings", lambda infos: [])
    def checked(target, python, workdir, addr, given):
        CHECKED.append((target.host, addr, given))

    monkeypatch.setattr("stash_core.engine.host_setup.check_master_address", checked)
    targets = [parse_target(f"10.0.0.{1 + index}") for index in range(nodes)]
    remote = RemoteHosts(targets, "python3", ".", cpu_sets=cpu_sets, link=link)
    spec = ProfileSpec(model="resnet10", batch_size=8, workers_per_node=workers, nodes=nodes, device="auto")
    if stalls is not None:
        spec.stalls = list(stalls)
    warnings: list[str] = []
    settle_on_hosts(spec, remote, {}, _Quiet(), warnings)
    return spec, warnings


def test_an_emulated_cluster_whose_workers_outnumber_this_machines_cores_is_warned_of(monkeypatch):
    """`--workers 2 --nodes 2` on a cluster of a 2-core machine without --split-cpus: R1n put 4 workers on
    2 cores and the network stall held their competition, without a word."""
    link = {"rate_bps": 10**9}
    _, warnings = _settle(monkeypatch, nodes=2, workers=2, link=link)
    assert len(warnings) == 1
    said = "the emulated cluster's 2 nodes share this machine's 2 cores: the 4 workers x 1 thread(s)"
    assert said in warnings[0]
    assert "--split-cpus" in warnings[0]
    assert _settle(monkeypatch, nodes=2, workers=1, link=link)[1] == []  # 2 workers, 2 cores
    assert _settle(monkeypatch, nodes=2, workers=1, link=link, cpu_sets=[[0], [1]])[1] == []
    assert _settle(monkeypatch, nodes=2, workers=2, link=None)[1] == []  # real hosts: cores of their own


def test_the_default_master_address_is_checked_before_the_first_run(monkeypatch):
    """Node 0's host name, the default master address, was found not to be its address (an ssh_config
    alias) at the run across the machines, after the runs on one machine had been made for nothing."""
    CHECKED.clear()
    _settle(monkeypatch, nodes=2, workers=1, link=None)
    assert CHECKED == [("10.0.0.1", "10.0.0.1", False)]
    CHECKED.clear()
    _settle(monkeypatch, nodes=1, workers=1, link=None)
    assert CHECKED == []  # one machine: no rendezvous across machines
    _settle(monkeypatch, nodes=2, workers=1, link=None, stalls=["compute", "interconnect"])
    assert CHECKED == []  # no run across the machines is planned
