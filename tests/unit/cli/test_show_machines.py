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
