"""`stash profile` and `stash probe` across the emulated cluster: the network stall against the link's limit,
probes against the tc rate, and the stall predicted at a bandwidth never profiled against a profile there
(the faults: test_profile_network_faults.py).

One 2-node cluster for the module, without CPU splitting: R1 (2 workers on node 0) and R1n (1 worker on
each node) then use the same two cores, so their difference is the network alone. The model
(netmodel.py) has 6.3 MB of gradients and almost no compute, so the network dominates.
"""

from __future__ import annotations

import json
import subprocess

import duckdb
import pytest
from clusterkit import NET_MODEL, cluster_fixture, net_profile, stash_argv, stash_env

from stash_core.campaign.local import run_campaign
from stash_core.campaign.plan import CampaignSettings, plan_campaign
from stash_core.decide.fit import fit_stall_models, parse_rate_gbps, predict_stall

pytestmark = [pytest.mark.cluster, pytest.mark.quiet]  # measured stalls and probes against the link's rate

cluster_state = cluster_fixture(2, "net", bandwidth="200mbit", latency="0ms")
INSTANCE = "emulated"
HELD_OUT_RATE = "400mbit"  # between the two profiled rates


@pytest.fixture(scope="module")
def two_bandwidths(cluster_state, tmp_path_factory):
    """The same profile at 200 and 800 Mbit/s (set by --cluster-bandwidth for each profile)."""
    tmp = tmp_path_factory.mktemp("bandwidths")
    runs = {}
    for rate in ("200mbit", "800mbit"):
        # stored as the campaign runner labels an emulated link: the held-out test below fits to them
        label = f"{INSTANCE}@{rate}"
        runs[rate] = net_profile(
            cluster_state, tmp, "--iterations", "12", "--cluster-bandwidth", rate, "--instance", label
        )
    return tmp, runs


@pytest.mark.slow
def test_lower_bandwidth_gives_the_larger_network_stall(two_bandwidths):
    _, runs = two_bandwidths
    for result, doc in runs.values():
        assert result.returncode == 0, result.stderr
        assert [phase["name"] for phase in doc["phases"]] == ["R1", "R1n"]
        assert doc["breakdown"]["network_reference"] == "R1 (2 workers, 1 machine) vs R1n (2x1 workers)"
        assert "network figure compares R1 (2 workers, 1 machine) vs R1n (2x1 workers)" in result.stdout
        assert doc["spec"]["cluster_bandwidth"] in ("200mbit", "800mbit")
        assert [rank["node"] for rank in doc["phases"][1]["ranks"]] == [0, 1]  # every rank reported back
    slow = runs["200mbit"][1]["breakdown"]["stalls"]["network"]["seconds"]
    fast = runs["800mbit"][1]["breakdown"]["stalls"]["network"]["seconds"]
    assert slow > fast > 0


@pytest.mark.slow
def test_measured_gradient_allreduce_stays_above_the_link_limit(two_bandwidths):
    _, runs = two_bandwidths
    for rate_bps, (_, doc) in zip((200e6, 800e6), runs.values(), strict=True):
        network = doc["breakdown"]["communication"]["network"]
        assert network["link_gbps"] == pytest.approx(rate_bps / 1e9)
        # physics: the ring moves 2(n-1)/n x gradient bytes through a link of that rate
        assert network["link_lower_bound_s"] == pytest.approx(doc["model"]["grad_bytes"] * 8 / rate_bps)
        assert network["allreduce_s"] > network["link_lower_bound_s"]
        # and the stall itself cannot beat the wire either (nothing of it hides behind this tiny backward)
        assert doc["breakdown"]["stalls"]["network"]["seconds"] > 0.5 * network["link_lower_bound_s"]


@pytest.mark.slow
def test_probe_bus_bandwidth_follows_the_tc_rate_and_is_stored(two_bandwidths):
    tmp, runs = two_bandwidths
    peaks = {}
    for rate, (_, doc) in runs.items():
        probe = next(probe for probe in doc["probes"] if probe["phase"] == "R1n")
        assert probe["nodes"] == 2 and probe["world_size"] == 2
        assert {row["scope"] for row in probe["p2p"]} == {"inter_node"}
        # the largest message: tc's token bucket lets small ones through faster than the rate
        peaks[rate] = max(probe["allreduce"], key=lambda row: row["size_bytes"])["busbw_gbps"]
    # within a sensible factor of the shaped rate (headers, gloo's CPU cost on 2 cores)
    assert 0.5 * 0.2 < peaks["200mbit"] < 1.25 * 0.2
    assert 0.3 * 0.8 < peaks["800mbit"] < 1.25 * 0.8
    assert peaks["800mbit"] > peaks["200mbit"]
    with duckdb.connect(str(tmp / "results.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT p.nodes, count(*) FROM probes p JOIN runs r USING (run_id) "
            "WHERE p.kind = 'allreduce' AND p.phase = 'R1n' GROUP BY p.nodes"
        ).fetchall()
    expected = sum(len(doc["probes"][-1]["allreduce"]) for _, doc in runs.values())
    assert rows == [(2, expected)]


def test_stash_probe_across_two_nodes(cluster_state, tmp_path):
    out = tmp_path / "probe.json"
    result = subprocess.run(
        stash_argv(
            "probe", "--workers", "1", "--nodes", "2", "--cluster", "emulated", "--cluster-state",
            str(cluster_state), "--max-size", "4MiB", "--p2p-size", "1MiB", "--out", str(out), "--db",
            str(tmp_path / "p.duckdb"),
        ),  # fmt: skip
        capture_output=True, text=True, env=stash_env(), timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "p2p inter_node" in result.stdout and "alpha-beta fit" in result.stdout
    probe = json.loads(out.read_text())
    assert probe["nodes"] == 2 and probe["link_gbps"] == pytest.approx(0.2)
    largest = max(probe["allreduce"], key=lambda row: row["size_bytes"])
    assert largest["size_bytes"] == 4 * 1024 * 1024
    assert 0.1 < largest["busbw_gbps"] < 0.25  # the 200 Mbit/s link
    with duckdb.connect(str(tmp_path / "p.duckdb"), read_only=True) as con:
        stored = con.execute(
            "SELECT count(*), min(nodes) FROM probes WHERE probe_id = ?", [probe["probe_id"]]
        )
        assert stored.fetchone() == (len(probe["allreduce"]) + len(probe["p2p"]), 2)


@pytest.mark.slow
def test_network_stall_at_an_unprofiled_bandwidth(two_bandwidths, cluster_state, tmp_path):
    """Held out: the stall models fitted to the profiles at 200 and 800 Mbit/s predict the network stall at
    400 Mbit/s, which a profile through the campaign runner (`stash profile` in a child process) then
    measures. The error is printed and bounded loosely (a factor of two either way) so that a busy machine
    does not make it flicker; the ordering of the three measured stalls is asserted too."""
    tmp, runs = two_bandwidths
    model = runs["200mbit"][1]["model"]
    predicted = predict_stall(
        counts={key: model[key] for key in ("grad_bytes", "grad_tensor_count", "layer_count")},
        stall="network",
        workers_per_node=1,
        nodes=2,
        device="cpu",
        instance=INSTANCE,
        bandwidth_gbps=parse_rate_gbps(HELD_OUT_RATE),
        report=fit_stall_models(tmp / "results.duckdb", stalls=("network",)),
    )
    assert predicted["stall_s"] is not None, predicted["status"]
    settings = CampaignSettings(
        db_path=tmp_path / "held_out.duckdb",
        iterations="12",
        input_shape="3,16,16",
        num_classes=10,
        device="cpu",
        stalls=["network"],  # R1 and R1n only
        extra_args=["--cluster-state", str(cluster_state), "--no-probes"],
    )
    model_ref = NET_MODEL[NET_MODEL.index("--model") + 1]
    lines: list[str] = []
    plan = plan_campaign([model_ref], [8], [1], [2], [HELD_OUT_RATE], instance=INSTANCE)
    outcome = run_campaign(plan, settings, report=lines.append)
    assert not outcome.failed and len(outcome.completed) == 1, "\n".join(lines)
    observed = fit_stall_models(settings.db_path, stalls=("network",)).observations
    held_out = float(observed.set_index("bandwidth_gbps").loc[parse_rate_gbps(HELD_OUT_RATE), "stall_s"])
    at = {rate: doc["breakdown"]["stalls"]["network"]["seconds"] for rate, (_, doc) in runs.items()}
    error = abs(predicted["stall_s"] - held_out) / held_out
    print(
        f"network stall measured {at} and {held_out:.4f} s at {HELD_OUT_RATE}; predicted there "
        f"{predicted['stall_s']:.4f} s by {predicted['method']}; error {error:.1%}"
    )
    assert at["200mbit"] > held_out > at["800mbit"] > 0
    assert 0.5 < predicted["stall_s"] / held_out < 2.0
