"""Placements on a cluster of switches, nodes and GPUs, and their locality levels."""

from __future__ import annotations

import random

from stash_core.sched import Cluster
from stash_core.sched.topology import _fill


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


def test_spreading_fills_the_emptiest_nodes_first():
    cluster = Cluster(2, 2, 4, free=[2, 3, 1, 4])
    assert cluster.place(5, "any") == {1: 3, 0: 2}  # one switch holds 5: tighter than spreading
    assert cluster.place(6, "any") == {3: 4, 1: 2}  # no switch holds 6: the emptiest nodes, wherever
    assert cluster.place(4, "node") == {3: 4}
    assert cluster.place(3, "node") == {1: 3}  # best fit: 3 free beats 4 free


def test_the_free_gpu_index_follows_takes_and_give_backs():
    cluster = Cluster(2, 2, 4)
    cluster.take({0: 3, 2: 1})
    assert (cluster.switch_free, cluster.total_free) == ([5, 7], 12)
    cluster.give_back({0: 3})
    assert (cluster.switch_free, cluster.total_free) == ([8, 7], 15)


def test_a_job_bigger_than_a_switch_is_consolidated_on_its_fewest_switches():
    cluster = Cluster(3, 2, 4)  # switches of 8 GPUs
    placement = cluster.place(12, "node")
    assert len(placement) == 3 and len(cluster.switches_of(placement)) == 2
    assert cluster.level_of(placement, 12) == "node"  # crossing two switches is what 12 GPUs must do
    assert cluster.level_of({0: 4, 1: 2, 2: 2, 3: 4}, 12) == "switch"  # 4 nodes on 2 switches
    assert cluster.level_of({0: 4, 2: 4, 4: 4}, 12) == "any"  # a third switch it need not cross


def test_a_big_job_relaxes_to_more_nodes_then_more_switches():
    cluster = Cluster(3, 2, 4, free=[4, 3, 3, 2, 4, 0])
    assert cluster.place(12, "node") is None  # no two switches give 12 GPUs on 3 nodes
    assert cluster.place(12, "switch") == {0: 4, 1: 3, 2: 3, 3: 2}
    cluster = Cluster(3, 2, 4, free=[4, 1, 2, 3, 4, 0])
    assert cluster.place(12, "switch") is None  # the two emptiest switches hold 5 + 5
    spread = cluster.place(12, "any")
    assert sum(spread.values()) == 12 and cluster.level_of(spread, 12) == "any"


def test_a_big_job_finds_a_node_tight_placement_on_any_set_of_switches():
    # 3 switches x 2 nodes x 4 GPUs, free [4, 4 | 3, 3 | 4, 0]: the two emptiest switches (0 and 1) need 4
    # nodes for 12 GPUs, switches 0 and 2 only 3 (nodes 0, 1 and 4)
    cluster = Cluster(3, 2, 4, free=[4, 4, 3, 3, 4, 0])
    assert cluster.place(12, "node") == {0: 4, 1: 4, 4: 4}
    assert cluster.level_of({0: 4, 1: 4, 4: 4}, 12) == "node"


def test_spreading_takes_the_nodes_a_sort_by_free_gpus_gives():
    # The placement "any" walks the nodes emptiest first, ties by node number, without sorting them: the
    # same nodes, in the same order, as taking them from the sorted list.
    rng = random.Random(0)
    for _ in range(3000):
        shape = Cluster(rng.randint(1, 4), rng.randint(1, 8), rng.choice([1, 2, 4, 8]))
        free = [rng.randint(0, shape.gpus_per_node) for _ in shape.free]
        cluster = Cluster(shape.switches, shape.nodes_per_switch, shape.gpus_per_node, free=free)
        gpus = rng.randint(1, cluster.total_gpus)
        order = sorted(range(len(cluster.free)), key=cluster.free.__getitem__, reverse=True)
        want = _fill(order, cluster.free, gpus)
        got = cluster._emptiest_first(gpus)
        assert got == want and (want is None or list(got) == list(want))


def test_the_nodes_per_free_count_follow_every_take_and_give_back():
    # The best fit and the emptiest nodes are read from nodes_with: after any takes and give-backs it holds
    # exactly the nodes with each free count, and placing gives what a scan of the free list gives.
    rng = random.Random(1)
    cluster, held = Cluster(3, 4, 8), []
    for _ in range(2000):
        if held and rng.random() < 0.45:
            cluster.give_back(held.pop(rng.randrange(len(held))))
        else:
            gpus = rng.choice([1, 2, 3, 4, 8, 12, 16, 40])
            placement = cluster.place(gpus, rng.choice(["node", "switch", "any"]))
            if placement is not None:
                cluster.take(placement)
                held.append(placement)
        for have, nodes in enumerate(cluster.nodes_with):
            assert nodes == {node for node, free in enumerate(cluster.free) if free == have}
        gpus = rng.randint(1, 8)
        scan = [have for have in range(gpus, 9) if have in cluster.free]
        want = {cluster.free.index(scan[0]): gpus} if scan else None
        assert cluster._place_at(gpus, "node") == want
