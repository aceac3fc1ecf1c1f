"""The later single-GPU sources: every row usable, every source new to published_throughputs.csv, and only
their PyTorch rows pooled with it (published.load_pool)."""

from __future__ import annotations

import csv

from stash_core.decide.predict.published import HOLDOUT_CSV, PUBLISHED_CSV, framework, load_pool, load_published


def test_every_held_out_row_is_a_usable_single_gpu_figure() -> None:
    published = load_published(HOLDOUT_CSV, count=False)
    assert published.skipped == [] and len(published.points) == 133
    assert all(point.step_s > 0 and point.batch_size > 0 for point in published.points)


def test_the_pool_adds_the_later_sources_pytorch_rows_and_nothing_else() -> None:
    published = load_published(PUBLISHED_CSV, count=False).points
    holdout = load_published(HOLDOUT_CSV, count=False).points
    pool = load_pool(count=False).points
    pytorch = [point for point in holdout if framework(point.measured) == "PyTorch"]
    assert len(pytorch) == 75 and pool == published + pytorch
    assert {point.source_id for point in pytorch} == {"timm-train-bench", "dlperf", "paddle-perf"}


def test_no_later_source_is_in_the_published_figures() -> None:
    with open(HOLDOUT_CSV, encoding="utf-8", newline="") as handle:
        held_out = {row["source_id"] for row in csv.DictReader(handle)}
    with open(PUBLISHED_CSV, encoding="utf-8", newline="") as handle:
        fitted = {row["source_id"] for row in csv.DictReader(handle)}
    assert held_out == {"timm-train-bench", "dlperf", "paddle-perf", "tlkh-tf-metal"}
    assert not held_out & fitted
