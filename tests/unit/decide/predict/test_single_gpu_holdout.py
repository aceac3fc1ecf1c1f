"""The single-GPU held-out figures: every row usable, every source new to the step model's own data."""

from __future__ import annotations

import csv

from stash_core.decide.predict.published import PUBLISHED_CSV, load_published

HOLDOUT_CSV = PUBLISHED_CSV.parent / "published_single_gpu_holdout.csv"


def test_every_held_out_row_is_a_usable_single_gpu_figure() -> None:
    published = load_published(HOLDOUT_CSV, count=False)
    assert published.skipped == [] and len(published.points) == 133
    assert all(point.step_s > 0 and point.batch_size > 0 for point in published.points)


def test_no_held_out_source_is_in_the_data_the_model_was_fitted_on() -> None:
    with open(HOLDOUT_CSV, encoding="utf-8", newline="") as handle:
        held_out = {row["source_id"] for row in csv.DictReader(handle)}
    with open(PUBLISHED_CSV, encoding="utf-8", newline="") as handle:
        fitted = {row["source_id"] for row in csv.DictReader(handle)}
    assert held_out == {"timm-train-bench", "dlperf", "paddle-perf", "tlkh-tf-metal"}
    assert not held_out & fitted
