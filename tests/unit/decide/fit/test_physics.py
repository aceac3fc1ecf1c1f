"""The alpha-beta arithmetic and the link read from the probes (decide/fit/physics.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from stash_core.decide.fit import (
    DDP_BUCKET_BYTES,
    allreduce_time_s,
    beta_from_gbps,
    bucket_count,
    link_from_probes,
    parse_rate_gbps,
    ring_factor,
    split_instance_label,
)


def test_alpha_beta_arithmetic():
    assert ring_factor(1) == 0.0
    assert ring_factor(2) == 1.0
    assert ring_factor(8) == pytest.approx(1.75)
    assert bucket_count(0) == 0
    assert bucket_count(1) == 1
    # 1 MiB first bucket, then 25 MiB ones: 26 MiB fits in two, 26 MiB + 1 byte needs three.
    assert bucket_count(26 * 1024 * 1024) == 2
    assert bucket_count(26 * 1024 * 1024 + 1) == 3
    assert bucket_count(50 * 1024 * 1024, first_bucket_bytes=None) == 2
    beta = beta_from_gbps(8.0)  # 8 Gbit/s = 1 GB/s
    assert beta == pytest.approx(1e-9)
    grad_bytes = 100 * DDP_BUCKET_BYTES
    expected = bucket_count(grad_bytes) * 1e-4 + 1.75 * grad_bytes * 1e-9
    assert allreduce_time_s(grad_bytes, 8, 1e-4, beta) == pytest.approx(expected)
    assert allreduce_time_s(grad_bytes, 1, 1e-4, beta) == 0.0


def test_link_from_probes_recovers_alpha_and_beta():
    alpha_s, beta = 50e-6, 1e-9
    sizes = [2**k for k in range(10, 28, 2)]
    probes = pd.DataFrame(
        {
            "kind": "allreduce",
            "world_size": 4,
            "nodes": 1,
            "instance": "box",
            "device": "cpu",
            "size_bytes": sizes,
            "time_s": [alpha_s + ring_factor(4) * size * beta for size in sizes],
        }
    )
    link = link_from_probes(probes)
    assert link.alpha_s == pytest.approx(alpha_s, rel=1e-6)
    assert link.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert link.bandwidth_gbps == pytest.approx(8.0, rel=1e-6)
    assert link_from_probes(probes.iloc[:1]) is None


def test_rates_and_labels():
    assert parse_rate_gbps("1gbit") == 1.0
    assert parse_rate_gbps("200mbit") == pytest.approx(0.2)
    assert parse_rate_gbps("10mbps") == pytest.approx(0.08)  # tc: mbps are megabytes per second
    assert parse_rate_gbps("25") == 25.0
    assert parse_rate_gbps("fast") is None
    assert split_instance_label("local@1gbit") == ("local", 1.0)
    assert split_instance_label("p3.8xlarge") == ("p3.8xlarge", None)
