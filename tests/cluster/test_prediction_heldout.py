"""Held-out prediction on the emulated cluster: profile at two bandwidths, predict a third, measure it.

Runs real `stash profile --cluster emulated --cluster-bandwidth RATE` profiles through the campaign runner
(2 nodes x 1 worker, resnet10 at 3x32x32), so it takes a few minutes. The error is printed and bounded
loosely (a factor of two either way) so that a busy machine does not make it flicker; the ordering of the
measured stalls is asserted too.
"""

from __future__ import annotations

import pytest
from clusterkit import cluster_fixture

from stash_core.decide.campaign import CampaignSettings, plan_campaign, run_campaign
from stash_core.decide.fit import fit_stall_models, model_counts, parse_rate_gbps, predict_stall

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.quiet]

# Rates low enough that the wire time of resnet10's 18.7 MiB of gradients (about 1.6 s, 0.8 s, 0.4 s)
# stands well above what two nodes sharing this machine's cores add by contention.
CALIBRATION_RATES = ["100mbit", "400mbit"]
HELD_OUT_RATE = "200mbit"


cluster_state = cluster_fixture(2, "held", bandwidth="1gbit", latency="0ms")


def test_network_stall_at_an_unprofiled_bandwidth(tmp_path, cluster_state):
    settings = CampaignSettings(
        db_path=tmp_path / "heldout.duckdb",
        iterations="10",  # each R1n iteration carries 0.4-1.6 s of wire time: 10 average it well enough
        input_shape="3,32,32",
        num_classes=10,
        device="cpu",
        stalls=["network"],  # R1 and R1n only: the fit below needs the network stall alone
        # the module's cluster, by its state folder; no bandwidth probes: the fit below takes the stalls alone
        extra_args=["--cluster-state", str(cluster_state), "--no-probes"],
    )
    lines: list[str] = []
    calibration = plan_campaign(["resnet10"], [8], [1], [2], CALIBRATION_RATES, instance="emulated")
    outcome = run_campaign(calibration, settings, report=lines.append)
    assert not outcome.failed, "\n".join(lines)
    report = fit_stall_models(settings.db_path, stalls=("network",))
    counts = model_counts("resnet10", num_classes=10, input_shape=(3, 32, 32))
    predicted = predict_stall(
        counts=counts,
        stall="network",
        workers_per_node=1,
        nodes=2,
        device="cpu",
        instance="emulated",
        bandwidth_gbps=parse_rate_gbps(HELD_OUT_RATE),
        report=report,
    )
    assert predicted["stall_s"] is not None, predicted["status"]
    held_out = plan_campaign(["resnet10"], [8], [1], [2], [HELD_OUT_RATE], instance="emulated")
    outcome = run_campaign(held_out, settings, report=lines.append)
    assert not outcome.failed, "\n".join(lines)
    measured = fit_stall_models(settings.db_path, stalls=("network",)).observations.set_index(
        "bandwidth_gbps"
    )
    at = {
        rate: float(measured.loc[parse_rate_gbps(rate), "stall_s"])
        for rate in [*CALIBRATION_RATES, HELD_OUT_RATE]
    }
    error = abs(predicted["stall_s"] - at[HELD_OUT_RATE]) / at[HELD_OUT_RATE]
    print(
        f"network stall measured {at}; predicted at {HELD_OUT_RATE}: {predicted['stall_s']:.4f} s "
        f"by {predicted['method']}; error {error:.1%}"
    )
    assert at["100mbit"] > at["200mbit"] > at["400mbit"] > 0
    assert 0.5 < predicted["stall_s"] / at[HELD_OUT_RATE] < 2.0
