"""Probe arithmetic, lower bounds, overlap, rows and text (no process group needed)."""

from __future__ import annotations

import json

import pytest

from stash_core.analysis.comm import (
    DDP_BUCKET_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    algbw_gbps,
    alpha_beta_allreduce_s,
    busbw_gbps,
    communication_bounds,
    ddp_bucket_sizes,
    link_lower_bound_s,
    peak_busbw_gbps,
    probe_alpha_beta,
    ring_factor,
    ring_lower_bound_s,
    wire_busbw_gbps,
)
from stash_core.cli.probe_text import format_communication, format_probe, probe_json
from stash_core.measure.probe_plan import PROBE_SIZES_BYTES, probe_sizes, repetitions_for
from stash_core.store.probe_rows import probe_rows
from stash_core.units import MIB


def synthetic_probe(
    alpha_s: float, link_gbps: float, world: int, sizes=(4096, 65536, MIB, 4 * MIB, 16 * MIB)
):
    """A probe whose all-reduce times follow alpha + ring x size / link exactly."""
    rows = []
    for size in sizes:
        time_s = alpha_s + ring_factor(world) * size * 8 / (link_gbps * 1e9)
        rows.append(
            {
                "size_bytes": size,
                "repetitions": 5,
                "time_s": time_s,
                "time_min_s": time_s,
                "algbw_gbps": algbw_gbps(size, time_s),
                "busbw_gbps": busbw_gbps(size, time_s, world),
            }
        )
    return {"world_size": world, "nodes": 2, "backend": "gloo", "device": "cpu", "allreduce": rows}


def test_ring_factor_and_bus_bandwidth():
    assert ring_factor(1) == 0.0
    assert ring_factor(2) == 1.0
    assert ring_factor(8) == pytest.approx(1.75)
    # 1 GB in 8 s is 1 Gbit/s of algorithm bandwidth; the bus carries 2(n-1)/n of it
    assert algbw_gbps(1e9, 8.0) == pytest.approx(1.0)
    assert busbw_gbps(1e9, 8.0, 4) == pytest.approx(1.5)
    assert algbw_gbps(1e9, 0.0) is None


def test_ddp_buckets_cover_the_gradients_in_ddp_sizes():
    grad_bytes = 100 * MIB + 123
    sizes = ddp_bucket_sizes(grad_bytes)
    assert sum(sizes) == grad_bytes
    assert sizes[0] == DDP_FIRST_BUCKET_BYTES
    assert all(size == DDP_BUCKET_BYTES for size in sizes[1:-1])
    assert len(sizes) == 1 + 3 + 1  # 1 MiB, three full 25 MiB buckets, the rest (24 MiB + 123)
    assert ddp_bucket_sizes(1000) == [1000]
    assert ddp_bucket_sizes(0) == []


def test_repetitions_shrink_as_messages_grow():
    budget = 0.3
    counts = [repetitions_for(first_s, budget, 20) for first_s in (0.0001, 0.01, 0.1, 0.29, 0.3, 5.0)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] == 20
    assert counts[-1] == counts[-2] == 1  # the first call is a warm-up: one more is always timed


def test_probe_sizes_span_4kib_to_256mib():
    assert PROBE_SIZES_BYTES[0] == 4096 and PROBE_SIZES_BYTES[-1] == 256 * MIB
    assert probe_sizes(4096, 256 * MIB) == list(PROBE_SIZES_BYTES)
    assert probe_sizes(4096, 100_000) == [4096, 16384, 65536, 100_000]
    assert probe_sizes(3, 6) == [4]  # whole float32 values as sent: one row, not two rows of 4 B
    assert probe_sizes(5, 22) == [4, 20]
    assert probe_sizes(0, 16) == [4, 16]  # 0 B is not multiplied by 4 forever


def test_alpha_beta_fit_recovers_the_link():
    probe = synthetic_probe(alpha_s=0.002, link_gbps=0.2, world=2)
    alpha_s, beta = probe_alpha_beta(probe)
    # alpha is the smallest message's fastest time less its own 4 KiB of wire time
    assert alpha_s == pytest.approx(0.002, rel=1e-6)
    assert 8 / beta / 1e9 == pytest.approx(0.2, rel=1e-6)
    grad_bytes = 30 * MIB
    predicted = alpha_beta_allreduce_s(grad_bytes, 2, alpha_s, beta)
    assert predicted == pytest.approx(3 * 0.002 + grad_bytes * 8 / 0.2e9, rel=1e-3)  # 1 + 25 + 4 MiB
    # a burst that flatters the small messages does not move beta much: the large ones set it
    probe["allreduce"][1]["time_s"] /= 3
    assert 8 / probe_alpha_beta(probe)[1] / 1e9 == pytest.approx(0.2, rel=1e-2)
    assert probe_alpha_beta({"world_size": 2, "allreduce": probe["allreduce"][:1]}) is None


@pytest.mark.parametrize("world", [2, 4, 16])
@pytest.mark.parametrize("grad_bytes", [300_000, 6 * MIB, 100 * MIB])
def test_lower_bound_never_exceeds_the_true_bucketed_allreduce(world, grad_bytes):
    alpha_s, link_gbps = 0.0015, 1.0
    probe = synthetic_probe(alpha_s, link_gbps, world)
    true_s = sum(
        alpha_s + ring_factor(world) * size * 8 / (link_gbps * 1e9) for size in ddp_bucket_sizes(grad_bytes)
    )
    lower_s = ring_lower_bound_s(grad_bytes, world, wire_busbw_gbps(probe, alpha_s), alpha_s)
    assert 0 < lower_s <= true_s * (1 + 1e-9)  # exact data: the bound is reached, never passed
    assert peak_busbw_gbps(probe) < link_gbps  # the raw peak still carries the latency
    # and the physical limit of the link itself lies below both
    assert link_lower_bound_s(grad_bytes, world, link_gbps * 1e9) <= lower_s
    assert ring_lower_bound_s(grad_bytes, 1, 1.0) == 0.0


def test_a_slow_repetition_of_the_largest_size_does_not_put_the_bound_above_the_measurement():
    """One repetition of 4 MiB at 174 Mbit/s (other load) set the wire rate; 1 MiB had gone at 193 Mbit/s
    and the gradients' all-reduce too: the 'lower bound' was 998 ms beside a measured 907 ms."""
    probe = synthetic_probe(0.0005, 0.193, 2, sizes=(4096, MIB, 4 * MIB))
    probe["allreduce"][-1]["time_s"] *= 1.11  # the largest size's one repetition, slowed
    probe["allreduce"][-1]["time_min_s"] = probe["allreduce"][-1]["time_s"]
    assert wire_busbw_gbps(probe, 0.0005) == pytest.approx(0.193, rel=1e-3)  # the best of the large sizes
    probe["gradient_allreduce"] = {"size_bytes": 20 * MIB, "time_s": 0.5}  # measured below any bound
    bounds = communication_bounds("network", {"seconds": 0.6}, probe, None, 20 * MIB, {}, "R1", "R1n")
    assert bounds["lower_bound_s"] <= bounds["allreduce_s"]


def test_overlap_is_the_hidden_part_of_the_added_allreduce():
    probe = synthetic_probe(0.001, 0.2, 2)
    probe["gradient_allreduce"] = {"size_bytes": 6 * MIB, "time_s": 0.30}
    reference = {"gradient_allreduce": {"time_s": 0.02}}
    stall = {"seconds": 0.2}

    def bounds(backward_r1n_s: float) -> dict:
        return communication_bounds(
            "network", stall, probe, reference, 6 * MIB, {"R1": 0.1, "R1n": backward_r1n_s}, "R1", "R1n", 2e8
        )

    half = bounds(0.1 + 0.14)  # backward grew by half of the 0.28 s the network added
    assert half["added_allreduce_s"] == pytest.approx(0.28)
    assert half["exposed_s"] == pytest.approx(0.14)
    assert half["overlap_share"] == pytest.approx(0.5)
    assert bounds(0.1 + 0.5)["overlap_share"] == 0.0  # backward grew more than the wire time: nothing hidden
    assert bounds(0.1)["overlap_share"] == 1.0
    assert half["link_lower_bound_s"] == pytest.approx(6 * MIB * 8 / 2e8)
    assert half["stall_over_lower_bound"] == pytest.approx(0.2 / half["lower_bound_s"])
    assert communication_bounds("network", stall, None, None, 6 * MIB, {}, "R1", "R1n")["note"]


def test_probe_rows_have_the_table_columns():
    probe = synthetic_probe(0.001, 1.0, 2, sizes=(4096, MIB))
    probe.update(
        probe_id="run-R1n",
        run_id="run",
        phase="R1n",
        gradient_allreduce={"size_bytes": 5 * MIB, "time_s": 0.05, "repetitions": 3, "buckets": 2},
        p2p=[{"scope": "inter_node", "size_bytes": 8, "time_s": 1e-4, "repetitions": 20}],
    )
    rows = probe_rows(probe, instance="emulated@1gbit", link_gbps=1.0)
    assert [(row["kind"], row["scope"]) for row in rows] == [
        ("allreduce", "all"),
        ("allreduce", "all"),
        ("gradient_allreduce", "all"),
        ("p2p", "inter_node"),
    ]
    assert {row["instance"] for row in rows} == {"emulated@1gbit"}
    assert all(row["run_id"] == "run" and row["link_gbps"] == 1.0 for row in rows)


def test_text_shows_probes_and_bounds():
    probe = synthetic_probe(0.001, 0.2, 2, sizes=(4096, MIB))
    probe["p2p"] = [
        {"scope": "inter_node", "size_bytes": 8, "time_s": 2e-4},
        {"scope": "inter_node", "size_bytes": MIB, "time_s": 0.04, "algbw_gbps": 0.21},
    ]
    text = format_probe(probe)
    assert "1 MiB" in text and "p2p inter_node  latency" in text and "alpha-beta fit" in text
    assert text.splitlines()[0] == "probe over 2 worker(s) on 2 machine(s), gloo on cpu"
    probe["link_gbps"] = 0.1  # on the emulated cluster: the rate to hold the bus bandwidth to, said
    assert format_probe(probe).splitlines()[0].endswith("gloo on cpu; emulated links 100 Mbit/s")
    assert "(fastest" not in text  # no fastest latency repetition stored: the mean alone
    del probe["link_gbps"]
    probe["p2p"][0]["time_min_s"] = 2.4e-5  # one stalled repetition drove the mean to 200 us
    assert "latency  one-way 200 us (fastest 24 us)" in format_probe(probe)
    probe["gradient_allreduce"] = {"time_s": 0.27}
    network = communication_bounds("network", {"seconds": 0.27}, probe, None, 6 * MIB, {}, "R1", "R1n", 2e8)
    lines = format_communication(
        {
            "network_reference": "R1 (2 workers, 1 machine) vs R1n (2x1 workers)",
            "communication": {"network": network},
        }
    )
    assert lines[0] == "network figure compares R1 (2 workers, 1 machine) vs R1n (2x1 workers)"
    assert "lower bound" in lines[2] and "link limit" in lines[2]
    assert lines[3].split()[0] == "network"
    # each column said: "wire bw" read as the all-reduce's achieved rate, which it is not
    assert any("wire bw: the bus bandwidth with the call latency taken off" in line for line in lines[-3:])
    assert format_communication(None) == []


@pytest.mark.parametrize("world", [2, 4, 8])
def test_the_one_estimator_recovers_known_alpha_and_beta_from_noisy_probes_on_every_path(world):
    """Probes (dict) and the fits (probes table as a DataFrame) give the same alpha and beta."""
    import random

    import pandas as pd

    from stash_core.decide.fit.physics import link_from_probes

    rng = random.Random(world)
    alpha_s, link_gbps = 150e-6, 5.0
    probe = synthetic_probe(alpha_s, link_gbps, world, sizes=[4096 * 4**k for k in range(8)])
    for row in probe["allreduce"]:  # 3% noise on the means; the fastest repetition sits just below
        row["time_s"] *= 1 + rng.uniform(-0.03, 0.03)
        row["time_min_s"] = min(row["time_min_s"], row["time_s"])
    alpha_fit, beta_fit = probe_alpha_beta(probe)
    assert alpha_fit == pytest.approx(alpha_s, rel=0.05)
    assert 8 / beta_fit / 1e9 == pytest.approx(link_gbps, rel=0.05)
    frame = pd.DataFrame([{**row, "kind": "allreduce", "world_size": world} for row in probe["allreduce"]])
    link = link_from_probes(frame)
    assert (link.alpha_s, link.beta_s_per_byte) == pytest.approx((alpha_fit, beta_fit), rel=1e-12)


def test_the_json_holds_the_alpha_beta_fit_the_text_ends_with():
    """--json left out the fit the text printed (alpha 252 us per call, beta -> 9.31 Gbit/s)."""
    probe = synthetic_probe(0.001, 0.2, 2, sizes=(4096, MIB))
    fit = probe_json(probe)["alpha_beta"]
    assert "alpha-beta fit: alpha 1.0 ms per call, beta -> 200 Mbit/s" in format_probe(probe)
    assert fit["alpha_s"] == pytest.approx(0.001, rel=1e-3)
    assert fit["link_gbps"] == pytest.approx(0.2, rel=1e-3)
    assert fit["link_gbps"] == pytest.approx(8 / fit["beta_s_per_byte"] / 1e9)
    assert json.loads(json.dumps(probe_json(probe)))["allreduce"] == probe["allreduce"]
    assert probe_json({**probe, "allreduce": probe["allreduce"][:1]})["alpha_beta"] is None


def test_a_shapers_burst_never_makes_the_wire_faster_than_its_link():
    """At 800 Mbit/s the wire bus bandwidth read 885 Mbit/s and the lower bound (298 ms) fell below the
    link's limit (325 ms): tc's token bucket let the fastest 1 MiB repetition through above the rate."""
    probe = synthetic_probe(0.0002, 0.885, 4)  # as fast as the burst made it
    probe["gradient_allreduce"] = {"size_bytes": 20 * MIB, "time_s": 0.5}
    bounds = communication_bounds("network", {"seconds": 0.4}, probe, None, 20 * MIB, {}, "R1", "R1n", 8e8)
    assert bounds["wire_busbw_gbps"] == pytest.approx(0.8)
    assert bounds["lower_bound_s"] >= bounds["link_lower_bound_s"]
    unshaped = communication_bounds("network", {"seconds": 0.4}, probe, None, 20 * MIB, {}, "R1", "R1n")
    assert unshaped["wire_busbw_gbps"] == pytest.approx(0.885, rel=0.01)  # no link known: as measured


def test_a_scripts_links_are_said_though_its_gradients_size_is_not_known():
    """A script's model is its own, so its gradients' size is not known: the profile had printed nothing of
    the probes R1 measured. What the links reached is said, and no bound or overlap is invented."""
    probe = synthetic_probe(0.0004, 2.0, 2, sizes=(4096, MIB, 4 * MIB))
    bounds = communication_bounds("interconnect", {"seconds": 0.01}, probe, None, None, {}, "R0", "R1")
    assert bounds["note"] == "gradient bytes unknown"
    assert bounds["wire_busbw_gbps"] == pytest.approx(2.0, rel=0.01)  # the latency holds 4 KiB of transfer
    assert bounds["latency_s"] == pytest.approx(0.0004 + 4096 * 8 / 2e9, rel=1e-3)
    assert "lower_bound_s" not in bounds and "overlap_share" not in bounds
    lines = format_communication({"communication": {"interconnect": bounds}})
    assert lines[0].startswith("all-reduce from the probes (the gradients' size is not known")
    assert lines[1].split()[:5] == ["interconnect", "2", "workers:", "wire", "bw"]
    assert "wire bw 2.01 Gbit/s" in lines[1] and "call latency 416 us" in lines[1]
    no_probe = communication_bounds("interconnect", {}, None, None, None, {}, "R0", "R1")
    assert format_communication({"communication": {"interconnect": no_probe}}) == []
    # the gradients' size known, their all-reduce not measured: not said to be unknown
    known = communication_bounds("interconnect", {"seconds": 0.01}, probe, None, 6 * MIB, {}, "R0", "R1")
    assert format_communication({"communication": {"interconnect": known}}) == []
