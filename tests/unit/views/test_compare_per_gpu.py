"""Compare's per-GPU throughput divides by the GPUs the job used (one per worker on CUDA), not by all of the
instance's; costs below a cent keep three significant digits."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pages._shared import usd_text
from stash_core.views.compare import add_costs


def frame(workers: int, nodes: int, gpus_per_instance: int, device: str) -> pd.DataFrame:
    return pd.DataFrame(
        [{"instance": "p5.48xlarge", "label_ok": True, "workers_per_node": workers, "nodes": nodes,
          "device": device, "iteration_s": 0.5, "epoch_s": 50.0, "accelerator_count": gpus_per_instance,
          "on_demand_usd_per_h": 98.32}]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("workers", "nodes", "gpus", "device", "used"),
    [
        (1, 1, 8, "cuda", 1),
        (8, 1, 8, "cuda", 8),
        (4, 2, 8, "cuda", 8),
        (16, 1, 8, "cuda", 8),
        (2, 1, 8, "cpu", None),
    ],
)
def test_throughput_per_gpu_is_over_the_gpus_the_job_used(workers, nodes, gpus, device, used) -> None:
    costed = add_costs(frame(workers, nodes, gpus, device), batch_size=32)
    samples_per_s = 32 * workers * nodes / 0.5
    if used is None:
        assert math.isnan(costed["samples_per_s_per_gpu"].iloc[0])
    else:
        assert costed["gpus"].iloc[0] == used
        assert costed["samples_per_s_per_gpu"].iloc[0] == pytest.approx(samples_per_s / used)


def test_small_costs_keep_three_significant_digits() -> None:
    assert usd_text(0.0000123) == "$0.0000123"
    assert usd_text(0.5) == "$0.500"
    assert usd_text(12.3456) == "$12.35" and usd_text(0) == "$0.00" and usd_text(None) == "–"
