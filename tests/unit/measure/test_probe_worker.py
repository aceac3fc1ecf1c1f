"""The point-to-point probe in a real process group of two CPU ranks (gloo): a message predicted to outlast
the time limit of one call is skipped and said, as the all-reduce sizes are, not sent into a timeout."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from stash_core.cli.probe_text import format_probe
from stash_core.measure.probe_plan import P2P_ESTIMATE_BYTES, predicted_one_way_s
from stash_core.measure.probe_worker import measure_p2p
from stash_core.units import MIB

SIZES = [8, 16 * MIB]
LIMITS_S = (1e-9, None, 60.0)  # no message of 16 MiB passes in a nanosecond; no limit; a minute


def _rank(rank: int, folder: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2,
        timeout=datetime.timedelta(seconds=60),
    )  # fmt: skip
    results = []
    try:
        for max_op_s in LIMITS_S:
            settings = {"budget_s_per_size": 0.01, "max_repetitions": 2, "max_op_s": max_op_s}
            rows, skipped = measure_p2p(1, SIZES, torch.device("cpu"), settings)
            results.append({"sizes": [row["size_bytes"] for row in rows], "skipped": skipped})
        # a shaped link of 1 Mbit/s: 16 MiB takes 134 s, whatever a small message (its burst) took
        settings = {"budget_s_per_size": 0.01, "max_repetitions": 2, "max_op_s": 60.0}
        rows, skipped = measure_p2p(1, SIZES, torch.device("cpu"), settings, link_gbps=0.001)
        results.append({"sizes": [row["size_bytes"] for row in rows], "skipped": skipped})
        if rank == 0:
            Path(folder, "result.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    """What rank 0 measured under each limit of LIMITS_S (one process group, torch imported once a rank)."""
    folder = tmp_path_factory.mktemp("p2p")
    mp.spawn(_rank, args=(str(folder),), nprocs=2, join=True)
    return dict(zip([*LIMITS_S, "link"], json.loads((folder / "result.json").read_text()), strict=True))


def test_a_message_predicted_to_outlast_one_call_is_skipped(measured):
    assert measured[1e-9] == {"sizes": [8], "skipped": [16 * MIB]}


def test_a_message_a_known_link_cannot_pass_in_time_is_skipped_however_fast_a_small_one_went(measured):
    """On a 20 Mbit/s emulated link, tc's burst let the 4 KiB estimate through at line speed: 16 MiB was
    predicted 10x too fast, sent, and the probe failed in gloo's timeout where the docs say it is skipped."""
    assert measured["link"] == {"sizes": [8], "skipped": [16 * MIB]}


@pytest.mark.parametrize("max_op_s", [None, 60.0])
def test_a_message_that_fits_is_measured(measured, max_op_s):
    assert measured[max_op_s] == {"sizes": SIZES, "skipped": []}


def test_the_prediction_takes_the_latency_off_before_it_scales():
    # 1 ms of latency, then 1 us per KiB: 16 MiB is 1 ms + 16 ms, not 4096 x the 4 KiB message's time
    estimate_s = 1e-3 + 4e-6
    assert predicted_one_way_s(16 * MIB, (P2P_ESTIMATE_BYTES, estimate_s), (8, 1e-3)) == pytest.approx(
        1e-3 + 16 * 1024 * 1e-6, rel=1e-2
    )
    # without the latency message, all of it scales: the prediction can only be too long
    assert predicted_one_way_s(16 * MIB, (P2P_ESTIMATE_BYTES, estimate_s)) == pytest.approx(estimate_s * 4096)
    assert predicted_one_way_s(16 * MIB, (P2P_ESTIMATE_BYTES, 1e-3), (8, 2e-3)) == 1e-3  # noise: no negative


def test_a_skipped_message_is_listed_with_the_probe():
    probe = {"world_size": 2, "nodes": 2, "skipped_p2p": [{"scope": "inter_node", "size_bytes": 16 * MIB}]}
    assert "p2p inter_node  16 MiB skipped: would exceed the time limit of one call" in format_probe(probe)


def test_the_all_reduces_bus_bandwidth_bounds_a_prediction_scaled_from_a_jittery_estimate():
    """2 ms of jitter on the 4 KiB estimate predicted 8 s for 16 MiB, which the all-reduce (at 10 Gbit/s
    bus bandwidth) says passes in tens of milliseconds: under a 6.7 s limit it was skipped."""
    from stash_core.measure.probe_plan import bounded_by_allreduce_s

    jittery_s = predicted_one_way_s(16 * MIB, (P2P_ESTIMATE_BYTES, 2e-3), (8, 5e-5))
    assert jittery_s > 6.7
    bounded_s = bounded_by_allreduce_s(jittery_s, 16 * MIB, 10.0, 5e-5)
    assert bounded_s == pytest.approx(5e-5 + 2 * 16 * MIB * 8 / 10e9) and bounded_s < 0.03
    assert bounded_by_allreduce_s(0.01, 16 * MIB, 10.0) == 0.01  # a shorter prediction stands
    assert bounded_by_allreduce_s(jittery_s, 16 * MIB, None) == jittery_s  # no all-reduce measured
