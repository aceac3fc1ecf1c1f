"""`stash show` says which machines a run spanned: the emulated cluster and its links as they were emulated
(a delay asked without netem is not), or the hosts; the text said neither, only the probe table's limit."""

from __future__ import annotations

from stash_core.cli.show import machines_line

NETWORK = {"kind": "emulated", "rate_bps": 200_000_000, "latency_us": 0, "loss_pct": 0.0, "netem": True}


def test_an_emulated_cluster_s_links_and_hosts_are_said() -> None:
    spec = {"cluster": "emulated", "cluster_name": "lab", "network": NETWORK, "hosts": ["root@10.213.1.10"]}
    assert machines_line(spec) == "machines: emulated cluster lab, links 200 Mbit/s, delay 0 us, loss 0%"
    no_netem = {**spec, "network": {**NETWORK, "netem": False, "latency_us": 5000}}
    assert machines_line(no_netem) == (
        "machines: emulated cluster lab, links 200 Mbit/s (delay and loss not emulated: no netem)"
    )
    unlimited = {**spec, "network": {**NETWORK, "rate_bps": None, "netem": False}}
    assert machines_line(unlimited) == "machines: emulated cluster lab, links unlimited"
    assert machines_line({"hosts": ["a:22", "b:22"]}) == "machines: hosts a:22, b:22"
    assert machines_line({"hosts": []}) is None and machines_line({}) is None


def test_each_host_is_said_with_what_it_reported_where_the_run_kept_it() -> None:
    """The store now keeps what each host reported (runs.hosts): `stash show` names the hosts with it."""
    reported = [{"host": "a:22", "cpu_count": 2, "gpu_count": 0, "torch_version": "2.13.0"},
                {"host": "b:22", "cpu_count": 64, "gpu_count": 8, "torch_version": "2.13.0"}]  # fmt: skip
    assert machines_line({"hosts": ["a:22", "b:22"]}, reported) == (
        "machines: hosts a:22 (2 CPUs, 0 GPU(s), torch 2.13.0), b:22 (64 CPUs, 8 GPU(s), torch 2.13.0)"
    )
    # a run stored before, or a cell edited into anything: the hosts as given, nothing invented
    for odd in (None, {"a": 1}, [reported[0]], [{"cpu_count": "2"}, 7]):
        assert machines_line({"hosts": ["a:22", "b:22"]}, odd) == "machines: hosts a:22, b:22", odd
    assert "\x1b" not in machines_line({"hosts": ["a"]}, [{"torch_version": "2\x1b[2J"}])
