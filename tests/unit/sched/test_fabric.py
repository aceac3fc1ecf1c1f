"""The link model (fabric.py) against hand-computed cases: max-min fair rates, the communication terms read
from a trace's slowdown at the reference bandwidth, and a spread job's time as bandwidth changes."""

from __future__ import annotations

import pytest

from stash_core.sched import Cluster, Policy, TraceJob, simulate
from stash_core.sched.fabric import Fabric, comm_of, max_min_rates, ring_gbit
from stash_core.sched.links import Links

NODE_GBPS, UPLINK_GBPS = 100.0, 60.0


def capacity(link: int) -> float:
    return NODE_GBPS if link >= 0 else UPLINK_GBPS


def test_one_flow_gets_its_link():
    assert max_min_rates({7: [0]}, capacity) == {7: pytest.approx(100.0, abs=1e-6)}


def test_two_equal_flows_halve_their_link():
    assert max_min_rates({1: [0, 1], 2: [0, 1]}, capacity) == {1: pytest.approx(50.0, abs=1e-6),
                                                              2: pytest.approx(50.0, abs=1e-6)}  # fmt: skip


def test_a_switch_uplink_shared_by_two_nodes():
    # A crosses nodes 0, 2 and both switch uplinks; B nodes 1, 3 and both uplinks; C nodes 0 and 1 (one
    # switch). Uplinks: 60 / 2 = 30 is the lowest share, so A = B = 30; node 0 then has 100 - 30 = 70 left for
    # C alone, node 1 as much: C = 70.
    rates = max_min_rates({"A": [0, 2, -1, -2], "B": [1, 3, -1, -2], "C": [0, 1]}, capacity)
    assert rates == {"A": pytest.approx(30.0, abs=1e-6), "B": pytest.approx(30.0, abs=1e-6),
                     "C": pytest.approx(70.0, abs=1e-6)}  # fmt: skip


def test_a_small_flow_beside_big_ones_is_slowed_at_most_by_the_flows_it_shares_with():
    # 10 MB of gradients beside two jobs of 100 MB on one 100 Gbit/s link: three flows, 100/3 each. The
    # small job's communication (slowdown 1.1 read at 100 Gbit/s: 10 Gbit per consolidated second) takes
    # 10 / (100/3) = 0.3 s per second: 3 times its 0.1 s alone, not the 21 times that sharing the bytes
    # back to back (10 + 100 + 100 MB over the link) would give.
    links = Links(Fabric(100.0, 100.0, reference_gbps=100.0))
    for index in (0, 1, 2):
        links.add(index, [0, 1])
    assert sorted(links.reallocate({0, 1})) == [0, 1, 2]
    assert links.rate[0] == pytest.approx(100.0 / 3, abs=1e-6)
    small = comm_of(2, 10e6, 1.1, 100.0)
    big = comm_of(2, 100e6, 2.0, 100.0)
    alone, shared = small.slowdown(100.0) - 1, small.slowdown(links.rate[0]) - 1
    assert (alone, shared) == (pytest.approx(0.1, abs=1e-6), pytest.approx(0.3, abs=1e-6))
    assert shared <= 3 * alone + 1e-12
    assert big.slowdown(links.rate[1]) - 1 == pytest.approx(3.0, abs=1e-6)  # 1 x 3 as well
    links.remove(2, [0, 1])
    assert sorted(links.reallocate({0, 1})) == [0, 1] and links.rate[0] == pytest.approx(50.0, abs=1e-6)


def test_comm_terms_from_the_slowdown_at_the_reference_bandwidth():
    # 2 GPUs, 1 GB of gradients: the ring sends 2 x 1/2 x 1e9 x 8 = 8 Gbit per iteration. Slowdown 1.5 at
    # 10 Gbit/s with 1 s iterations: 0.5 s exposed of 0.8 s sent, 0.3 s hidden behind backward.
    assert ring_gbit(2, 1e9) == pytest.approx(8.0, abs=1e-9)
    comm = comm_of(2, 1e9, 1.5, 10.0, iteration_s=1.0)
    assert (comm.gbit, comm.overlap) == (pytest.approx(8.0, abs=1e-9), pytest.approx(0.3, abs=1e-9))
    assert comm.slowdown(10.0) == pytest.approx(1.5, abs=1e-9)  # the trace's own figure at its reference
    assert comm.slowdown(100.0) == pytest.approx(1.0, abs=1e-9)  # 0.08 s sent, all hidden
    assert comm.slowdown(5.0) == pytest.approx(2.3, abs=1e-9)  # 1.6 - 0.3 exposed
    # without an iteration count: no overlap, the slowdown scales with reference / rate
    assert comm_of(2, 1e9, 1.5, 10.0).slowdown(20.0) == pytest.approx(1.25, abs=1e-9)
    assert comm_of(4, 1e9, 1.0, 10.0).slowdown(1.0) == 1.0  # insensitive


def spread_job_finish(node_gbps: float, iterations: bool) -> float:
    # 1 switch x 2 nodes x 4 GPUs: A (3 GPUs) takes node 0, B (3) node 1, X (2 GPUs, 100 s, slowdown 1.5
    # at 10 Gbit/s, 1 GB of gradients) is spread over both by `spread` at time 1
    x = TraceJob("X", 2, 1.0, 100.0, None, 1.5, "trace", 1e9, 100.0, 1.0 if iterations else None)
    jobs = [TraceJob(n, 3, 0.0, 1000.0, None, 1.0, "trace", None, 1000.0) for n in "AB"] + [x]
    fabric = Fabric(node_gbps, node_gbps, reference_gbps=10.0)
    return simulate(jobs, Cluster(1, 2, 4), Policy("spread"), fabric=fabric)[2].finish_s


@pytest.mark.parametrize(
    "node_gbps, iterations, finish_s",
    [
        (10.0, False, 151.0),  # 1 + 100 x 1.5
        (100.0, False, 106.0),  # 1 + 100 x (1 + 0.5 x 10/100)
        (5.0, False, 201.0),  # 1 + 100 x (1 + 0.5 x 10/5)
        (100.0, True, 101.0),  # 0.08 s sent per 1 s iteration, hidden behind 0.3 s of backward
        (5.0, True, 231.0),  # 1.6 s sent - 0.3 hidden = 1.3 exposed: 1 + 100 x 2.3
    ],
)
def test_bandwidth_changes_a_spread_jobs_time(node_gbps, iterations, finish_s):
    assert spread_job_finish(node_gbps, iterations) == pytest.approx(finish_s, abs=1e-6)


@pytest.mark.parametrize("node_gbps, start_s", [(5.0, 101.0), (10.0, 51.0), (100.0, 6.0)])
def test_the_network_timer_is_what_spreading_costs_on_these_links(node_gbps, start_s):
    # X and Z (3 GPUs each) hold one node each until 1000; Y (2 GPUs, estimated 100 s, slowdown 1.5 read at
    # 10 Gbit/s) is skipped at 1. Its timer = (slowdown on these links - 1) x 100: at 5 Gbit/s 1 + 0.5 x 2,
    # 100 s; at 10 Gbit/s 50 s; at 100 Gbit/s 1 + 0.5 x 0.1, 5 s
    jobs = [TraceJob(n, 3, 0.0, 1000.0, None, 1.0, "trace", None, 1000.0) for n in "XZ"]
    jobs.append(TraceJob("Y", 2, 1.0, 100.0, None, 1.5, "trace", None, 100.0))
    fabric = Fabric(node_gbps, node_gbps, reference_gbps=10.0)
    y = simulate(jobs, Cluster(1, 2, 4), Policy("network-delay", scale=1.0), fabric=fabric)[2]
    assert y.start_s == pytest.approx(start_s, abs=1e-6)
