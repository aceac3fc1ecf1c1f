"""The accelerator table: one row per GPU variant with its datasheet, found by every name users, NVML and
SkyPilot give a GPU; an ambiguous short name resolves to its documented default and says so."""

from __future__ import annotations

import csv

import pytest

from stash_core.catalog.accelerators import (
    ACCELERATORS_CSV,
    accelerator_table,
    find_accelerator,
    match_accelerator,
    name_key,
)

VARIANTS = (
    "NVIDIA V100 SXM2 16 GB", "NVIDIA V100 SXM2 32 GB", "NVIDIA V100 PCIe 16 GB", "NVIDIA V100 PCIe 32 GB",
    "NVIDIA A100 SXM4 40 GB", "NVIDIA A100 SXM4 80 GB", "NVIDIA A100 PCIe 40 GB", "NVIDIA A100 PCIe 80 GB",
    "NVIDIA H100 SXM 80 GB", "NVIDIA H100 PCIe 80 GB", "NVIDIA H100 NVL 94 GB", "NVIDIA H200 SXM 141 GB",
    "NVIDIA GH200 96 GB", "NVIDIA B200 180 GB", "NVIDIA A10 24 GB", "NVIDIA A10G 24 GB", "NVIDIA L4 24 GB",
    "NVIDIA L40S 48 GB", "NVIDIA T4 16 GB", "NVIDIA K80", "NVIDIA M60", "NVIDIA P100 PCIe 16 GB",
    "NVIDIA RTX A6000 48 GB", "NVIDIA A40 48 GB", "NVIDIA GeForce RTX 3090 24 GB",
    "NVIDIA GeForce RTX 4090 24 GB", "AMD MI300X 192 GB",
)  # fmt: skip


def test_every_variant_has_a_row_with_its_datasheet_and_what_was_rechecked() -> None:
    table = accelerator_table()
    assert set(VARIANTS) <= set(table)
    for row in table.values():
        documents = ("datasheet", "whitepaper", "spec table", "product brief")
        assert any(document in row.source for document in documents), row.name
        assert "re-checked" in row.source, row.name  # each row says what was (or was not) re-checked
        assert row.sm_count and row.sm_count > 0, row.name
        assert row.memory_gb > 0 and row.memory_gbs > 0 and row.fp32_tflops > 0, row.name


def test_dense_tensor_peaks_are_at_least_the_fp32_peak_and_sparse_figures_are_halved() -> None:
    table = accelerator_table()
    for row in table.values():
        for peak in (row.tf32_tflops, row.fp16_tflops, row.bf16_tflops):
            assert peak is None or peak >= row.fp32_tflops, row.name
    # datasheets print 1979 (H100 SXM) and 1513 (H100 PCIe) FP16 TFLOPS with sparsity: the table is dense
    assert table["NVIDIA H100 SXM 80 GB"].fp16_tflops == pytest.approx(1979 / 2, rel=0.01)
    assert table["NVIDIA H100 PCIe 80 GB"].fp16_tflops == pytest.approx(1513 / 2, rel=0.01)


@pytest.mark.parametrize(
    ("name", "variant"),
    [
        # NVML names, as a profile's fingerprint records them
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80 GB"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM 80 GB"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80 GB"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40 GB"),
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40 GB"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80 GB"),
        ("Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe 32 GB"),
        ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2 16 GB"),
        ("NVIDIA A10", "NVIDIA A10 24 GB"),
        ("NVIDIA A10G", "NVIDIA A10G 24 GB"),
        ("NVIDIA L4", "NVIDIA L4 24 GB"),
        ("Tesla T4", "NVIDIA T4 16 GB"),
        ("NVIDIA GH200 480GB", "NVIDIA GH200 96 GB"),
        ("NVIDIA H200", "NVIDIA H200 SXM 141 GB"),
        ("NVIDIA H100 NVL", "NVIDIA H100 NVL 94 GB"),
        # SkyPilot's accelerator names
        ("H100-MEGA", "NVIDIA H100 SXM 80 GB"),
        ("L4", "NVIDIA L4 24 GB"),
        ("T4", "NVIDIA T4 16 GB"),
        ("A10G", "NVIDIA A10G 24 GB"),
        ("V100-32GB", "NVIDIA V100 SXM2 32 GB"),
        ("B200", "NVIDIA B200 180 GB"),
        # the names of older catalogs, and SkyPilot imports with GpuInfo's memory
        ("NVIDIA V100 16 GB", "NVIDIA V100 SXM2 16 GB"),
        ("NVIDIA A100 80 GB", "NVIDIA A100 SXM4 80 GB"),
        ("NVIDIA H100 80 GB", "NVIDIA H100 SXM 80 GB"),
        ("NVIDIA T4", "NVIDIA T4 16 GB"),
        ("NVIDIA T4 16 GB", "NVIDIA T4 16 GB"),
        ("NVIDIA L4 22 GB", "NVIDIA L4 24 GB"),
        ("NVIDIA H100 94 GB", "NVIDIA H100 NVL 94 GB"),
        ("nvidia a100-sxm4-80gb", "NVIDIA A100 SXM4 80 GB"),
    ],
)  # fmt: skip
def test_nvml_skypilot_and_old_names_find_their_variant(name: str, variant: str) -> None:
    assert find_accelerator(name).name == variant


@pytest.mark.parametrize(
    ("name", "default", "also"),
    [
        ("A100", "NVIDIA A100 SXM4 40 GB", "NVIDIA A100 PCIe 80 GB"),
        ("V100", "NVIDIA V100 SXM2 16 GB", "NVIDIA V100 PCIe 16 GB"),
        ("H100", "NVIDIA H100 SXM 80 GB", "NVIDIA H100 NVL 94 GB"),
        ("A100-80GB", "NVIDIA A100 SXM4 80 GB", "NVIDIA A100 PCIe 80 GB"),
    ],
)
def test_an_ambiguous_short_name_gives_its_default_variant_and_says_so(name, default, also) -> None:
    match = match_accelerator(name)
    assert match.accelerator.name == default and match.ambiguous
    assert also in match.candidates and match.candidates[0] == default
    assert default in match.note() and also in match.note()
    assert not match_accelerator("NVIDIA A100-SXM4-40GB").ambiguous
    assert match_accelerator("NVIDIA A100-SXM4-40GB").note() == ""


@pytest.mark.parametrize("name", ["Gaudi HL-205", "NVIDIA Z9000", "A100 7 GB", "", None, "   "])
def test_an_unknown_name_is_none(name) -> None:
    assert find_accelerator(name) is None and match_accelerator(name) is None


def test_no_name_of_one_variant_is_taken_by_another_unless_meant_as_a_short_name() -> None:
    """NVML names and table names identify one variant each; only short and SkyPilot names are shared."""
    with open(ACCELERATORS_CSV, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    seen: dict[str, str] = {}
    for row in rows:
        for name in [row["name"], *filter(None, row["nvml_names"].split("|"))]:
            key = name_key(name)
            assert seen.setdefault(key, row["name"]) == row["name"], (name, seen[key], row["name"])
    for row in rows:
        for name in filter(None, row["nvml_names"].split("|")):
            found = match_accelerator(name)
            assert found.accelerator.name == row["name"] and not found.ambiguous, name


def test_memory_in_gib_is_the_marketed_binary_size() -> None:
    v100 = find_accelerator("V100")
    assert v100.memory_gib == 16 and v100.memory_bytes == 16 * 2**30


def test_clocks_give_the_base_share_and_the_fp32_lanes_per_sm() -> None:
    table = accelerator_table()
    for row in table.values():
        if row.base_mhz is not None:  # a base clock is never above the boost clock the peaks count at
            assert row.boost_mhz is not None and 0 < row.base_mhz <= row.boost_mhz
    l4, v100, h100, k80 = (find_accelerator(name) for name in ("L4", "V100", "H100", "K80"))
    assert l4.base_clock_share == pytest.approx(795 / 2040)
    assert v100.fp32_lanes_per_sm == pytest.approx(64, rel=0.02)  # 80 SMs of 64 FP32 lanes at 1,530 MHz
    assert h100.fp32_lanes_per_sm == pytest.approx(128, rel=0.02)
    assert k80.fp32_lanes_per_sm == pytest.approx(192, rel=0.02)  # Kepler's SMX
    # a row without a base clock (GH200, MI300X publish none) is taken at its boost clock
    gh200 = find_accelerator("GH200")
    assert gh200.base_mhz is None and gh200.base_clock_share == 1.0
