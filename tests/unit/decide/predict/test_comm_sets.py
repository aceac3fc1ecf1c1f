"""The communication model's data sets and the cube mesh's fewer links: the fitted sets are the six published
files, the test set shares no source with them and every figure of it can be predicted, and a job on part of a
V100 cube mesh gets the share of the links its GPUs have."""

from __future__ import annotations

import csv

import pytest

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.collectives import BusCurve, Fabric, fabric, subset_share
from stash_core.decide.predict.comm_fit import FITTED_SET_NAMES, load_comm_summary
from stash_core.decide.predict.comm_validation import (
    FINAL_CSV,
    FITTED_CSVS,
    FRESH2_CSV,
    FRESH3_CSV,
    FRESH_CSV,
    HOLDOUT_CSV,
    MULTI_GPU_CSV,
    TEST_CSVS,
    Case,
    build_case,
    cases,
    fitted_figures,
    load_figures,
)

MIB = 2**20
V100 = find_accelerator("V100")


def _sources(path) -> set[tuple[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return {(row["source_id"], row["source"]) for row in csv.DictReader(handle)}


def test_a_job_on_part_of_a_cube_mesh_gets_the_share_of_the_links_its_gpus_have():
    assert subset_share("nvlink2_cubemesh", 2) == pytest.approx(1 / 6)
    assert subset_share("nvlink2_cubemesh", 4) == pytest.approx(4 / 6)
    assert subset_share("nvlink2_cubemesh", 8) == 1.0
    assert subset_share("nvswitch_a100", 2) == 1.0 and subset_share("pcie_gen4", 2) == 1.0
    curve = BusCurve("x", (1 * MIB, 16 * MIB), (10.0, 50.0), ("s",))
    assert curve.scaled(0.5).at(16 * MIB) == pytest.approx(25.0) and curve.scaled(1.0) is curve
    two, eight = fabric(2, 1, "NVLink", V100, {}), fabric(8, 1, "NVLink", V100, {})
    assert isinstance(two, Fabric) and isinstance(eight, Fabric)
    assert two.busbw_gbs(25 * MIB) == pytest.approx(eight.busbw_gbs(25 * MIB) / 6)


def test_the_fitted_sets_are_the_six_published_files_and_the_summary_says_so():
    assert FITTED_CSVS == (MULTI_GPU_CSV, HOLDOUT_CSV, FINAL_CSV, FRESH_CSV, FRESH2_CSV, FRESH3_CSV)
    assert tuple(path.name for path in FITTED_CSVS) == FITTED_SET_NAMES  # the files the summary's digest reads
    sources = {figure["source_id"] for figure in fitted_figures()}
    assert {"lambda-pytorch", "csc-ml-benchmarks", "nvidia-dle-pytorch-other", "kempner-resnet50"} <= sources
    summary = load_comm_summary()
    assert summary is not None and summary["fitted_sets"] == [path.name for path in FITTED_CSVS]
    assert "csc-ml-benchmarks" in summary["fitted_on"] and summary["validated"]["several machines"]


def test_the_test_sets_share_no_source_with_the_fitted_sets_or_each_other():
    fitted = set().union(*(_sources(path) for path in FITTED_CSVS))
    seen: set[tuple[str, str]] = set()
    for path in TEST_CSVS:
        fresh = _sources(path)
        assert fresh, path
        for earlier in (fitted, seen):
            assert not {source for _, source in fresh} & {source for _, source in earlier}
            assert not {source_id for source_id, _ in fresh} & {source_id for source_id, _ in earlier}
        seen |= fresh


def test_the_fourth_test_set_is_predictable_but_for_what_it_says():
    built, skipped = cases(load_figures(TEST_CSVS[0]))
    # the GH200 boards (four GPUs joined by NVLink 4, no switch) have no intra-machine class: said
    assert len(built) >= 20 and skipped == {"no class for the GPUs' links inside a machine": 6}, skipped
    # efficiencies of weak scaling, each against its own one-GPU figure: Ray's separate multi-node runs top
    # linear, one HDR link between 4-GPU boards falls far below it
    for case in built:
        assert 0.1 < case.published_efficiency <= 1.05


def test_a_four_gpu_nvlink3_board_is_read_as_the_nvswitch_boards_links():
    row = {
        "model": "m", "input_shape": "", "accelerator": "NVIDIA A100 SXM4 40 GB", "precision": "tf32",
        "batch_size": "64", "gpus": "4", "nodes": "1", "samples_per_s": "3000", "samples_per_s_1gpu": "800",
        "intra_node": "nvlink3_mesh4", "inter_node": "", "framework": "pytorch", "source_id": "s",
        "measured": "params=25000000",
    }  # fmt: skip
    case = build_case(row)
    assert isinstance(case, Case)
    board = build_case({**row, "intra_node": "nvswitch_a100"})
    assert case.links.busbw_gbs(25 * MIB) == pytest.approx(board.links.busbw_gbs(25 * MIB))
