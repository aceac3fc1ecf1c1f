"""scripts/refresh_catalog.py: a SkyPilot catalog folder becomes instances.csv rows (default region, else the
cheapest; the table's GPU variant by family; documented network facts), beside every existing row."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from stash_core.catalog.fields import clean
from stash_core.store.catalog_seed import builtin_catalog_rows

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "refresh_catalog.py"
SHIPPED = Path(__file__).resolve().parents[3] / "stash_core" / "catalog" / "instances.csv"
HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,"
    "AvailabilityZone"
)


def _gpu(name: str, mib: int, count: int = 1) -> str:
    memory = f"{{'SizeInMiB': {mib}}}"
    gpus = f"[{{'Name': '{name}', 'Manufacturer': 'NVIDIA', 'Count': {count}, 'MemoryInfo': {memory}}}]"
    return f"\"{{'Gpus': {gpus}}}\""


def existing_without(tmp_path: Path, names: set[str]) -> Path:
    """The shipped catalog less the rows a test generates, so that the test sees them generated."""
    with open(SHIPPED, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [row for row in reader if row["name"] not in names]
        columns = reader.fieldnames
    path = tmp_path / "existing.csv"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def refresh():
    spec = importlib.util.spec_from_file_location("refresh_catalog", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    aws = tmp_path / "v7" / "aws"
    aws.mkdir(parents=True)
    (aws / "vms.csv").write_text("\n".join([
        HEADER,
        f"p4de.24xlarge,A100-80GB,8.0,96.0,1152.0,{_gpu('A100', 81920, 8)},40.97,12.5,us-east-1,use1-az1",
        f"p4de.24xlarge,A100-80GB,8.0,96.0,1152.0,{_gpu('A100', 81920, 8)},40.97,11.0,us-east-1,use1-az2",
        f"p4de.24xlarge,A100-80GB,8.0,96.0,1152.0,{_gpu('A100', 81920, 8)},30.00,9.0,eu-west-1,euw1-az1",
        f"g6.xlarge,L4,1.0,4.0,16.0,{_gpu('L4', 22888)},0.8048,0.3879,us-east-1,use1-az1",
        f"g6e.xlarge,L40S,1.0,4.0,32.0,{_gpu('L40S', 45776)},2.0,0.9,us-west-2,usw2-az1",  # not in us-east-1
        f"g6e.xlarge,L40S,1.0,4.0,32.0,{_gpu('L40S', 45776)},2.5,0.9,eu-west-1,euw1-az1",
        f"gr7.xlarge,X9,1.0,4.0,16.0,{_gpu('X9', 8192)},0.5,,us-east-1,use1-az1",  # a GPU the table lacks
        "m5.large,,,2.0,8.0,,0.096,0.03,us-east-1,use1-az1",  # no GPU
        f"p5.48xlarge,H100,8.0,192.0,2048.0,{_gpu('H100', 81920, 8)},55.04,20.0,us-east-1,use1-az1",
    ]) + "\n")  # fmt: skip
    return tmp_path / "v7"


def test_rows_from_the_default_region_else_the_cheapest_with_the_tables_variant(
    refresh, folder, tmp_path, capsys
):
    out = tmp_path / "instances.csv"
    existing = existing_without(tmp_path, {"p4de.24xlarge", "g6.xlarge", "g6e.xlarge", "gr7.xlarge"})
    assert refresh.main([str(folder), "--version", "v7", "--commit", "abc123", "--price-date", "2026-11-25",
                         "--out", str(out), "--existing", str(existing)]) == 0  # fmt: skip
    with open(out, encoding="utf-8", newline="") as handle:
        rows = {row["name"]: row for row in csv.DictReader(handle)}
    with open(existing, encoding="utf-8", newline="") as handle:
        shipped = {row["name"]: row for row in csv.DictReader(handle)}
    assert set(shipped) <= set(rows)  # every existing row stays
    p5 = rows["p5.48xlarge"]  # an existing row keeps its hand-checked price, date and network facts
    for column in ("on_demand_usd_per_h", "price_date", "network_gbps", "interconnect", "source"):
        assert p5[column] == shipped["p5.48xlarge"][column]
    p4de = rows["p4de.24xlarge"]  # us-east-1 although eu-west-1 is cheaper: the default region wins
    assert p4de["accelerator"] == "NVIDIA A100 SXM4 80 GB" and p4de["on_demand_usd_per_h"] == "40.97"
    assert p4de["spot_usd_per_h"] == "11" and p4de["price_date"] == "2026-11-25"
    assert "SkyPilot catalog v7 aws/vms.csv" in p4de["source"] and "abc123" in p4de["source"]
    assert "us-east-1 (default region)" in p4de["source"]
    g6e = rows["g6e.xlarge"]  # not offered in the default region: the cheapest region
    assert g6e["on_demand_usd_per_h"] == "2" and "us-west-2 (cheapest region" in g6e["source"]
    assert g6e["accelerator"] == "NVIDIA L40S 48 GB" and "not known to Stash" in g6e["source"]
    assert rows["g6.xlarge"]["network_gbps"] == "2.5"  # documented facts (its baseline), with their source
    assert "AWS EC2 accelerated computing" in rows["g6.xlarge"]["source"]
    assert "gr7.xlarge" not in rows and "m5.large" not in rows
    printed = capsys.readouterr().out
    assert "left out: gr7.xlarge" in printed and "'aws': " in printed
    # what the store seeds and the catalog parses
    assert len(builtin_catalog_rows(out)) == len(rows)
    for row in rows.values():
        clean(row, partial=False)


def test_a_missing_folder_is_one_line_and_writes_nothing(refresh, tmp_path, capsys):
    out = tmp_path / "instances.csv"
    assert refresh.main([str(tmp_path / "nowhere"), "--version", "v7", "--out", str(out)]) == 2
    assert "no folder" in capsys.readouterr().err and not out.exists()


GCP_HEADER = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,"
    "SpotPrice"
)
AZURE_HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Generation"
)


def test_gcp_prices_machine_and_gpus_together_and_azure_rows_are_checked(refresh, tmp_path, capsys):
    folder = tmp_path / "cat"
    (folder / "gcp").mkdir(parents=True)
    (folder / "azure").mkdir()
    gpu = "{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]}"
    (folder / "gcp" / "vms.csv").write_text("\n".join([
        GCP_HEADER,
        "a2-highgpu-2g,24.0,170.0,,,,us-central1,us-central1-a,1.5,0.6",
        "a2-highgpu-2g,24.0,170.0,,,,us-central1,us-central1-b,1.5,0.5",
        f",,,A100,2,{gpu},us-central1,us-central1-a,5.9,2.3",
        f",,,A100,2,{gpu},us-central1,us-central1-b,5.9,2.3",
        f",,,A100,1,{gpu},us-central1,us-central1-a,2.9,1.1",  # no a2-highgpu-1g machine: no row
        "n1-standard-8,8.0,30.0,,,,us-central1,us-central1-a,0.38,0.08",  # no GPUs
    ]) + "\n")  # fmt: skip
    (folder / "azure" / "vms.csv").write_text("\n".join([
        AZURE_HEADER,
        "Standard_NC24ads_A100_v4,A100-80GB,1,24.0,220,A100-80GB,3.673,0.444433,eastus,V2",
        "Standard_ND96isr_H100_v5,H100,12,96.0,1900,H100,98.32,98.32,eastus,V2",
        "Standard_NC6_Promo,K80,1,6.0,56,K80,0.18,,westus2,V1",
    ]) + "\n")  # fmt: skip
    out = tmp_path / "instances.csv"
    existing = existing_without(
        tmp_path, {"a2-highgpu-1g", "a2-highgpu-2g", "Standard_NC24ads_A100_v4", "Standard_ND96isr_H100_v5"}
    )
    assert refresh.main([str(folder), "--version", "gcp=v7,azure=v6", "--out", str(out),
                         "--price-date", "2026-11-25", "--existing", str(existing)]) == 0  # fmt: skip
    with open(out, encoding="utf-8", newline="") as handle:
        rows = {row["name"]: row for row in csv.DictReader(handle)}
    a2 = rows["a2-highgpu-2g"]  # 1.5 + 5.9 per hour; spot: the cheaper zone's sum, 0.5 + 2.3
    assert (a2["on_demand_usd_per_h"], a2["spot_usd_per_h"], a2["accelerator_count"]) == ("7.4", "2.8", "2")
    assert a2["accelerator"] == "NVIDIA A100 SXM4 40 GB" and "catalog v7 gcp/vms.csv" in a2["source"]
    assert "a2-highgpu-1g" not in rows and "n1-standard-8" not in rows
    nc = rows["Standard_NC24ads_A100_v4"]  # SkyPilot calls it A100-80GB: the family says PCIe
    assert nc["accelerator"] == "NVIDIA A100 PCIe 80 GB" and "catalog v6 azure/vms.csv" in nc["source"]
    nd = rows["Standard_ND96isr_H100_v5"]
    assert nd["accelerator_count"] == "8" and "GPU count corrected" in nd["source"]
    assert "Standard_NC6_Promo" not in rows
    assert "left out: Standard_NC6_Promo (retired" in capsys.readouterr().out
