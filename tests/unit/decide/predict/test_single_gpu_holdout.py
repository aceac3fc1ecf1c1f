"""The later single-GPU sources: every row usable, every source new to published_throughputs.csv, and only
their PyTorch rows pooled with it (published.load_pool)."""

from __future__ import annotations

import csv

from stash_core.decide.predict.published import (
    FRESH2_CSV,
    FRESH3_CSV,
    FRESH4_CSV,
    FRESH5_CSV,
    FRESH_CSV,
    HOLDOUT_CSV,
    PUBLISHED_CSV,
    framework,
    load_pool,
    load_published,
)


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


def test_a_later_sources_figure_is_checked_against_the_error_stated_without_that_source() -> None:
    from stash_core.decide.predict.stated_error import load_summary, stated_without

    summary = load_summary()
    pooled, pooled_dies = stated_without("")
    assert pooled == summary["stated_error"]["roofline"]
    assert pooled_dies == summary["stated_error_by_gpu"]["roofline"]
    # timm's RTX 3090 figures are among the widest held-out errors: without them, the large-batch error and
    # the GA102 die's own are narrower than the shipped ones
    without, dies = stated_without("timm-train-bench")
    assert without["large"] < pooled["large"]
    assert dies.get("GA102", 0.0) < pooled_dies["GA102"]


def test_the_fresh_sets_load_whole_and_share_no_source_with_what_is_fitted() -> None:
    """Every row of the untouched sets reaches the step model (a row the loader refused would drop out of
    their one evaluation unseen), and none of their sources is in the pool or another of the sets."""
    fitted = {point.source_id for point in load_pool(count=False).points}
    seen: set[str] = set()
    sets = (
        (FRESH_CSV, 81, 24), (FRESH2_CSV, 41, 2), (FRESH3_CSV, 8, 8), (FRESH4_CSV, 8, 8),
        (FRESH5_CSV, 26, 26),
    )  # fmt: skip
    for path, rows, pytorch in sets:
        published = load_published(path, count=False)
        assert published.skipped == [] and len(published.points) == rows
        assert sum(framework(point.measured) == "PyTorch" for point in published.points) == pytorch
        sources = {point.source_id for point in published.points}
        assert not sources & fitted and not sources & seen
        seen |= sources
