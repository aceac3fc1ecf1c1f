"""Placements on a cluster of switches, nodes and GPUs, and their locality levels."""

from __future__ import annotations

from stash_core.decide.sched import Cluster


def test_a_small_job_gets_the_fullest_node_that_holds_it():
    cluster = Cluster(1, 3, 8, free=[8, 3, 5])
    assert cluster.place(3, "node") == {1: 3}  # best fit keeps the empty node for a big job


def test_a_job_bigger_than_a_node_takes_its_fewest_nodes_under_one_switch():
    cluster = Cluster(2, 2, 8)
    placement = cluster.place(16, "node")
    assert len(placement) == 2 and {cluster.switch_of(n) for n in placement} == {0}
    assert cluster.level_of(placement, 16) == "node"


def test_levels_relax_from_node_to_switch_to_any():
    cluster = Cluster(2, 2, 4, free=[2, 2, 1, 0])
    assert cluster.place(4, "node") is None  # no node has 4 free
    assert cluster.place(4, "switch") == {0: 2, 1: 2}
    assert cluster.level_of({0: 2, 1: 2}, 4) == "switch"
    assert cluster.place(5, "switch") is None
    spread = cluster.place(5, "any")
    assert sum(spread.values()) == 5 and cluster.level_of(spread, 5) == "any"
    assert cluster.place(6, "any") is None  # only 5 free


def test_take_and_give_back():
    cluster = Cluster(1, 2, 4)
    cluster.take({0: 3})
    assert cluster.free == [1, 4]
    cluster.give_back({0: 3})
    assert cluster.free == [4, 4]
