"""The later single-GPU sets: every row usable, every source new to published_throughputs.csv and to the sets
before it, and only their PyTorch rows of sources that wait on no CPU loader pooled with it
(published.load_pool); the untouched set shares no source with any of them."""

from __future__ import annotations

import csv

from stash_core.decide.predict.published import (
    FRESH2_CSV,
    FRESH3_CSV,
    FRESH4_CSV,
    FRESH5_CSV,
    FRESH6_CSV,
    FRESH7_CSV,
    FRESH8_CSV,
    FRESH_CSV,
    HOLDOUT_CSV,
    INPUT_BOUND_SOURCES,
    LATER_CSVS,
    PUBLISHED_CSV,
    UNTOUCHED_CSVS,
    framework,
    is_pooled,
    load_pool,
    load_published,
)


def test_every_held_out_row_is_a_usable_single_gpu_figure() -> None:
    published = load_published(HOLDOUT_CSV, count=False)
    assert published.skipped == [] and len(published.points) == 133
    assert all(point.step_s > 0 and point.batch_size > 0 for point in published.points)


def test_the_pool_adds_the_later_sets_pytorch_rows_and_nothing_else() -> None:
    published = load_published(PUBLISHED_CSV, count=False).points
    later = [point for path in LATER_CSVS for point in load_published(path, count=False).points]
    pool = load_pool(count=False).points
    pooled = [point for point in later if is_pooled(point)]
    assert len(pooled) == 75 + 51 + 2 + 9 and pool == published + pooled
    assert all(framework(point.measured) == "PyTorch" for point in pooled)
    assert {point.source_id for point in pooled} == {
        "timm-train-bench", "dlperf", "paddle-perf", "sandeepkumar-torchvision", "flagperf-nvidia",
        "hf-docs-single-gpu", "xhmy-torch-benchmark", "lucid-single-profile", "devos50-aws-steps",
        "keras-benchmarks-native-torch", "cemde-benchmarkjade", "whynlp-tinyllama", "riken-benchmarker",
    }  # fmt: skip


def test_a_pytorch_source_timing_a_cpu_loader_is_reported_beside_the_pool_not_fitted() -> None:
    fresh = load_published(FRESH_CSV, count=False).points
    bound = [point for point in fresh if point.source_id in INPUT_BOUND_SOURCES]
    assert len(bound) == 17 and all(framework(point.measured) == "PyTorch" for point in bound)
    assert all("ImageNet" in point.measured for point in bound)
    assert not {point.source_id for point in load_pool(count=False).points} & INPUT_BOUND_SOURCES


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


def test_the_later_sets_load_whole_and_each_brings_only_sources_new_to_those_before_it() -> None:
    """Every row of the later sets reaches the step model (a row the loader refused would drop out of their
    evaluation unseen), and no set repeats a source of the published figures or of a set before it."""
    seen = {point.source_id for point in load_published(PUBLISHED_CSV, count=False).points}
    sets = (
        (HOLDOUT_CSV, 133, 75), (FRESH_CSV, 81, 24), (FRESH2_CSV, 41, 2), (FRESH3_CSV, 8, 8),
        (FRESH4_CSV, 8, 8), (FRESH5_CSV, 26, 26), (FRESH6_CSV, 2, 2), (FRESH7_CSV, 9, 9),
    )  # fmt: skip
    assert tuple(path for path, _, _ in sets) == LATER_CSVS
    for path, rows, pytorch in sets:
        published = load_published(path, count=False)
        assert published.skipped == [] and len(published.points) == rows
        assert sum(framework(point.measured) == "PyTorch" for point in published.points) == pytorch
        sources = {point.source_id for point in published.points}
        assert not sources & seen
        seen |= sources


def test_an_untouched_set_loads_whole_and_shares_no_source_with_the_pool_or_the_later_sets() -> None:
    later = {point.source_id for path in LATER_CSVS for point in load_published(path, count=False).points}
    fitted = {point.source_id for point in load_pool(count=False).points}
    assert UNTOUCHED_CSVS == (FRESH8_CSV,)
    seen = later | fitted
    for path, rows in ((FRESH8_CSV, 5),):
        published = load_published(path, count=False)
        assert published.skipped == [] and len(published.points) == rows
        assert all(framework(point.measured) == "PyTorch" for point in published.points)
        sources = {point.source_id for point in published.points}
        assert not sources & seen
        seen |= sources
