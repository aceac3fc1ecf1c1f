"""`stash spot-profile --cluster NAME`: the PS on node 0 and each worker on its own node of an emulated
cluster; a count the cluster cannot hold is left out and said so; the workload file says where it ran and
`stash spot` plans from it.

The cluster here is this process's "spot" (clusterkit.cluster_name); the fixture brings it up and takes it
down by name.
"""

from __future__ import annotations

import json

import pytest
from clusterkit import cluster_name

from stash_core.cli.main import main
from stash_core.launch import cluster
from stash_core.launch.cluster.names import state_dir_for

pytestmark = pytest.mark.cluster

NAME = cluster_name("spot")
TINY = """
from torch import nn


def tiny(num_classes=10):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 256), nn.ReLU(), nn.Linear(256, num_classes))
"""


@pytest.fixture(scope="module")
def spot_cluster():
    try:
        yield cluster.cluster_up(5, bandwidth="500mbit", latency="1ms", name=NAME)
    finally:
        cluster.cluster_down(name=NAME)
        assert not state_dir_for(NAME).joinpath("state.json").exists()


@pytest.mark.slow
@pytest.mark.quiet  # measured exchange bandwidths, against each other and the link's rate
def test_a_ps_profile_on_the_cluster_nodes_writes_a_workload_that_plans(spot_cluster, tmp_path, capsys):
    (tmp_path / "tiny.py").write_text(TINY)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({"g": [100.0, -1.0, 1000.0, 1.0, 0.3]}))
    db = str(tmp_path / "r.duckdb")
    # 7 workers need 8 nodes: left out on this 5-node cluster
    status = main(["spot-profile", "--model", f"{tmp_path / 'tiny.py'}:tiny", "--input-shape", "3,16,16",
                   "--num-classes", "10", "--batch", "4", "--workers", "1,2,4,7", "--duration-s", "2",
                   "--cluster", NAME, "--workload", str(workload), "--db", db])  # fmt: skip
    out = capsys.readouterr()
    assert status == 0, out.err
    assert f"left out 7 worker(s): the emulated cluster {NAME} has 5 node(s)" in out.out
    assert f"measured on the emulated cluster {NAME}" in out.out

    doc = json.loads(workload.read_text())
    assert doc["source"]["cluster"] == NAME and doc["source"]["nodes"] == 5
    assert doc["source"]["link"]["rate_bps"] == 500e6
    runs = doc["contention_fit"]["runs"]
    assert [r["workers"] for r in runs] == [1, 2, 4] and all(r["exchanges"] > 0 for r in runs)
    assert runs[0]["p_bottleneck"] == 0  # one worker never waits for another
    # the exchanges crossed the shaped links (loopback moves GB/s): 0.8 MB each way at 62.5 MB/s, faster only
    # by the tbf's burst; four workers share the PS node's link
    assert 0 < doc["solo_bandwidth_mbps"] <= 2 * 500 / 8
    assert runs[2]["bandwidth_mbps"] < runs[0]["bandwidth_mbps"]
    assert doc["a1"] > 0 and isinstance(doc["b1"], float)
    assert any("500 Mbit/s" in note for note in doc["contention_fit"]["notes"])

    doc["compute_s"] = {"g3.4xlarge": 0.9, "g3.8xlarge": 0.95}
    workload.write_text(json.dumps(doc))
    status = main(["spot", "--workload", str(workload), "--instances", "g3.4xlarge:3,g3.8xlarge:3",
                   "--target-loss", "0.8", "--budget-s", "3000", "--db", db, "--json"])  # fmt: skip
    plan = json.loads(capsys.readouterr().out)
    assert status == 0 and plan["best"]["within_budget"]


def test_a_cluster_too_small_for_the_fit_is_refused_in_one_line(spot_cluster, tmp_path, capsys):
    status = main(["spot-profile", "--model", "resnet10", "--workers", "1,4,7", "--cluster", NAME,
                   "--workload", str(tmp_path / "w.json"), "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and f"the emulated cluster {NAME} has 5 node(s)" in err and "Traceback" not in err
    assert not (tmp_path / "w.json").exists()


def test_a_cluster_whose_state_is_in_another_folder_is_found_with_cluster_state(
    spot_cluster, tmp_path, capsys
):
    """spot-profile had no --cluster-state: a cluster brought up with --state-dir was said to be "not up"."""
    job = ["spot-profile", "--model", "resnet10", "--workers", "1,4,7", "--cluster", NAME,
           "--workload", str(tmp_path / "w.json"), "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    assert main([*job, "--cluster-state", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "not up" not in err and str(empty) in err and "Traceback" not in err
    assert main([*job, "--cluster-state", str(state_dir_for(NAME))]) == 2  # found there: too small for 7
    assert f"the emulated cluster {NAME} has 5 node(s)" in capsys.readouterr().err
    assert main(["spot-profile", "--model", "resnet10", "--workers", "1,2,4", "--cluster-state", str(empty),
                 "--workload", str(tmp_path / "w.json")]) == 2  # fmt: skip
    assert "give --cluster NAME too" in capsys.readouterr().err
    assert not (tmp_path / "w.json").exists()
