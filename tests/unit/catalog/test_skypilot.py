"""`stash instances import --skypilot`: SkyPilot's vms.csv (catalogs/v7/<cloud>/vms.csv) read into one catalog
row per instance type, network figures joined from Stash's own table, user rows kept, bad files refused."""

from __future__ import annotations

import os
from datetime import date

import pytest

from stash_core.catalog import add_instance, get_instance, list_instances, set_instance
from stash_core.catalog.skypilot import import_skypilot, read_skypilot
from stash_core.decide.predict import predict_instances
from stash_core.errors import UsageError

HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,"
    "AvailabilityZone"
)


def gpu_info(name: str, maker: str, mib: int) -> str:
    info = f"{{'Gpus': [{{'Name': '{name}', 'Manufacturer': '{maker}', 'Count': 1, 'MemoryInfo': {{'SizeInMiB': {mib}}}}}], 'TotalGpuMemoryInMiB': {mib}}}"  # noqa: E501
    return f'"{info}"'


V100 = gpu_info("V100", "NVIDIA", 16384)
ROWS = [
    f"p3.2xlarge,V100,1.0,8.0,61.0,{V100},3.06,0.9180,us-east-1,use1-az1",
    f"p3.2xlarge,V100,1.0,8.0,61.0,{V100},3.06,0.8000,us-east-1,use1-az2",
    f"p3.2xlarge,V100,1.0,8.0,61.0,{V100},3.305,0.7,eu-west-1,euw1-az1",
    f"g6.xlarge,L4,1.0,4.0,16.0,{gpu_info('L4', 'NVIDIA', 22888)},0.8048,0.35,us-east-1,use1-az1",
    f"g6.xlarge,L4,1.0,4.0,16.0,{gpu_info('L4', 'NVIDIA', 22888)},0.70,,us-west-2,usw2-az1",
    f"g4ad.2xlarge,Radeon Pro V520,1.0,8.0,32.0,{gpu_info('Radeon Pro V520', 'AMD', 8192)},0.60421,0.244,us-east-1,use1-az1",  # noqa: E501
    "m5.large,,,2.0,8.0,,0.096000,0.0288000,us-east-1,use1-az1",
]


@pytest.fixture
def catalog(tmp_path):
    folder = tmp_path / "catalogs" / "v7" / "aws"
    folder.mkdir(parents=True)
    (folder / "vms.csv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    return tmp_path / "catalogs"


def test_one_row_per_type_from_the_region_given(catalog) -> None:
    read = read_skypilot(catalog, region="us-east-1", price_date=date(2025, 6, 1))
    rows = {row["name"]: row for row in read.rows}
    assert set(rows) == {"p3.2xlarge", "g6.xlarge", "g4ad.2xlarge"}  # CPU-only types need include_cpu
    p3 = rows["p3.2xlarge"]
    assert (p3["on_demand_usd_per_h"], p3["spot_usd_per_h"], p3["region"]) == (3.06, 0.8, "us-east-1")
    assert p3["accelerator"] == "NVIDIA V100 SXM2 16 GB" and p3["accelerator_count"] == 1 and p3["vcpus"] == 8
    assert p3["provider"] == "aws" and p3["price_date"] == date(2025, 6, 1) and p3["origin"] == "import"
    assert "vms.csv" in p3["source"] and "us-east-1" in p3["source"]
    assert (p3["network_gbps"], p3["interconnect"]) == (10.0, "none")  # joined from Stash's own table
    assert rows["g6.xlarge"]["accelerator"] == "NVIDIA L4 24 GB"  # the table's variant of the g6 family
    assert rows["g4ad.2xlarge"]["accelerator"] == "AMD Radeon Pro V520 8 GB"  # no such row: SkyPilot's name
    assert read.lacking_network == ["g4ad.2xlarge"]  # g6.xlarge's facts come from the shipped catalog


def test_without_a_region_the_cheapest_region_is_taken(catalog) -> None:
    rows = {row["name"]: row for row in read_skypilot(catalog, include_cpu=True).rows}
    assert rows["p3.2xlarge"]["region"] == "us-east-1"  # 3.06 < 3.305
    assert rows["g6.xlarge"]["region"] == "us-west-2" and rows["g6.xlarge"]["spot_usd_per_h"] is None
    assert rows["m5.large"]["accelerator"] is None and rows["m5.large"]["accelerator_count"] == 0


def test_import_keeps_user_rows_and_predicts_what_the_table_knows(catalog, tmp_path) -> None:
    db = tmp_path / "cat.duckdb"
    set_instance(db, "g4dn.xlarge", on_demand_usd_per_h=0.5)  # the user's row
    (catalog / "v7" / "aws" / "vms.csv").write_text(
        "\n".join([HEADER, *ROWS, "g4dn.xlarge,T4,1.0,4.0,16.0,,0.526,0.2,us-east-1,use1-az1",
                   "lab1,T4,1.0,4.0,16.0,,0.526,0.2,us-east-1,use1-az1"]) + "\n"
    )
    add_instance(db, name="lab1", accelerator="NVIDIA T4 16 GB", accelerator_count=1, network_gbps=10)
    result = import_skypilot(db, catalog, region="us-east-1")
    # shipped rows (p3.2xlarge, g6.xlarge) give way to the import; the user's row does not
    assert result.outcome.kept_user == ["g4dn.xlarge", "lab1"]
    assert "lab1" not in result.lacking_network  # kept as the user added it, with its network: not listed
    assert sorted(result.outcome.replaced) == ["g6.xlarge", "p3.2xlarge"]
    assert get_instance(db, "g4dn.xlarge")["on_demand_usd_per_h"] == 0.5
    assert get_instance(db, "p3.2xlarge")["origin"] == "import"
    origins = list_instances(db).set_index("name")["origin"]
    assert origins["g4dn.xlarge"] == "user" and origins["p5.48xlarge"] == "builtin"
    prediction = predict_instances(db, "resnet18", 32, instances=["g6.xlarge", "g4ad.2xlarge"])
    assert prediction.frame["instance"].tolist() == ["g6.xlarge"]  # L4 22888 MiB is the table's 24 GB L4
    assert prediction.not_predictable == [
        "g4ad.2xlarge: not predictable - AMD Radeon Pro V520 8 GB has no entry in the accelerator table"
    ]


def test_a_second_import_of_the_same_file_updates_nothing_and_says_so(catalog, tmp_path) -> None:
    """It said "0 new, 2 updated" of rows it left as they were."""
    db = tmp_path / "cat.duckdb"
    first = import_skypilot(db, catalog, region="us-east-1", price_date=date(2025, 6, 1)).outcome
    assert sorted(first.replaced) == ["g6.xlarge", "p3.2xlarge"] and not first.unchanged
    again = import_skypilot(db, catalog, region="us-east-1", price_date=date(2025, 6, 1)).outcome
    assert (again.inserted, again.replaced) == ([], [])
    assert sorted(again.unchanged) == sorted(first.inserted + first.replaced)
    dearer = "\n".join([HEADER, *ROWS]).replace("3.06,", "3.10,")
    (catalog / "v7" / "aws" / "vms.csv").write_text(dearer + "\n")
    changed = import_skypilot(db, catalog, region="us-east-1", price_date=date(2025, 6, 1)).outcome
    assert changed.replaced == ["p3.2xlarge"] and "g6.xlarge" in changed.unchanged
    assert get_instance(db, "p3.2xlarge")["on_demand_usd_per_h"] == 3.10


@pytest.mark.parametrize(
    ("row", "says"),
    [
        (ROWS[0].replace(",8.0,61.0,", ",8.5,61.0,"), "row 3, column vCPUs"),
        (ROWS[0].replace("3.06", "cheap"), "row 3, column Price"),
        (ROWS[0].replace("0.9180", "nan"), "row 3, column SpotPrice"),
        ("p3.2xlarge,V100,1.0", "row 3"),
        (ROWS[0].replace(",8.0,61.0,", ",0,61.0,"), "row 3, column vCPUs"),
        (ROWS[0].replace(",8.0,61.0,", ",8.0,0,"), "row 3, column MemoryGiB"),
        (ROWS[0].replace("16384", "1e999"), "row 3, column GpuInfo"),
        (ROWS[0].replace("16384", "-5"), "row 3, column GpuInfo"),
        # beyond what `stash instances add` takes (1,024 GPUs, $1e6 an hour): a broken row, not a machine
        (ROWS[0].replace(",V100,1.0,", ",V100,99999.0,"), "row 3, column AcceleratorCount"),
        (ROWS[0].replace("3.06", "1e7"), "row 3, column Price"),
    ],
)
def test_a_malformed_file_names_row_and_column_and_writes_nothing(catalog, tmp_path, row, says) -> None:
    (catalog / "v7" / "aws" / "vms.csv").write_text("\n".join([HEADER, ROWS[1], row]) + "\n")
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match=says):
        import_skypilot(db, catalog)
    assert not db.exists()


def test_a_file_dated_in_the_future_needs_a_price_date(catalog, tmp_path) -> None:
    vms = catalog / "v7" / "aws" / "vms.csv"
    os.utime(vms, (4102444800, 4102444800))  # 2100-01-01
    with pytest.raises(UsageError, match="in the future.*--price-date"):
        import_skypilot(tmp_path / "cat.duckdb", catalog)
    rows = read_skypilot(catalog, price_date=date(2026, 11, 1)).rows
    assert {row["price_date"] for row in rows} == {date(2026, 11, 1)}


def test_a_file_outside_a_cloud_s_folder_takes_no_provider_from_its_folder(catalog, tmp_path) -> None:
    """A vms.csv saved to ~/Downloads made g5.xlarge's provider "Downloads", and `campaign --cloud` then
    refused it: "is on Downloads: --cloud launches on aws, gcp, azure"."""
    elsewhere = tmp_path / "Downloads"
    elsewhere.mkdir()
    (elsewhere / "vms.csv").write_text((catalog / "v7" / "aws" / "vms.csv").read_text())
    read = read_skypilot(elsewhere / "vms.csv", price_date=date(2025, 6, 1))
    rows = {row["name"]: row for row in read.rows}
    assert rows["p3.2xlarge"]["provider"] == "aws"  # the shipped row's
    assert rows["g4ad.2xlarge"]["provider"] is None  # a type Stash does not ship: none said


def _cloud_file(root, cloud: str, rows: list[str]):
    folder = root / "catalogs" / "v7" / cloud
    folder.mkdir(parents=True)
    (folder / "vms.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    return root / "catalogs"


def test_a_gcp_machine_type_is_priced_with_the_gpus_it_comes_with(tmp_path) -> None:
    """GCP's vms.csv prices a2-highgpu-1g without its A100, which has a row of its own per zone: read alone,
    the import replaced the shipped 1 x A100 row with a machine of no GPU at a fifth of its price."""
    a100 = gpu_info("A100", "NVIDIA", 40960)
    catalog = _cloud_file(tmp_path, "gcp", [
        "a2-highgpu-1g,,,12.0,85.0,,0.75,0.3,us-central1,us-central1-a",
        f",A100,1,,,{a100},2.93,1.1,us-central1,us-central1-a",
        "a2-highgpu-2g,,,24.0,170.0,,1.5,0.6,us-central1,us-central1-b",  # its GPUs priced in no zone
    ])  # fmt: skip
    db = tmp_path / "cat.duckdb"
    shipped_2g = get_instance(db, "a2-highgpu-2g")
    result = import_skypilot(db, catalog, include_cpu=True)
    row = get_instance(db, "a2-highgpu-1g")
    assert (row["accelerator_count"], row["on_demand_usd_per_h"], row["spot_usd_per_h"]) == (1, 3.68, 1.4)
    assert "A100" in row["accelerator"] and "summed" in row["source"]
    assert any(line.startswith("a2-highgpu-2g: its 2 x A100 have no price") for line in result.skipped)
    assert get_instance(db, "a2-highgpu-2g") == shipped_2g


def test_a_gpu_count_the_cloud_documents_otherwise_is_corrected(tmp_path) -> None:
    row = "Standard_ND96isr_H100_v5,H100,12,96.0,1900,H100,98.32,98.32,eastus,"  # SkyPilot's v6 Azure row
    catalog = _cloud_file(tmp_path, "azure", [row])
    db = tmp_path / "cat.duckdb"
    import_skypilot(db, catalog)
    row = get_instance(db, "Standard_ND96isr_H100_v5")
    assert row["accelerator_count"] == 8 and "GPU count corrected" in row["source"]


def test_a_row_without_a_price_or_without_its_gpus_does_not_replace_the_catalogs(tmp_path) -> None:
    catalog = _cloud_file(tmp_path, "azure", [
        "Standard_NC40ads_H100_v5,H100,1,40.0,320,H100,,,eastus,",
        "Standard_NC24ads_A100_v4,,,24.0,220,,3.67,1.2,eastus,",
    ])  # fmt: skip
    db = tmp_path / "cat.duckdb"
    names = ("Standard_NC40ads_H100_v5", "Standard_NC24ads_A100_v4")
    before = {name: get_instance(db, name) for name in names}
    assert all(row and row["on_demand_usd_per_h"] and row["accelerator_count"] for row in before.values())
    result = import_skypilot(db, catalog, include_cpu=True)
    assert {name: get_instance(db, name) for name in before} == before
    assert "Standard_NC40ads_H100_v5: no on-demand price in the file; the catalog's priced row is kept" in (
        result.skipped
    )
    assert any(line.startswith("Standard_NC24ads_A100_v4: no GPU in the file") for line in result.skipped)


def test_price_dates_are_the_users_day_with_a_days_leeway_for_time_zones(catalog, tmp_path) -> None:
    """"Today" was the UTC day: at 23:52 in Honolulu a price of today was stored as of tomorrow, and from
    10:00 UTC a price date of today in Kiritimati (UTC+14) was refused by the import as in the future."""
    import subprocess
    import sys
    from datetime import timedelta

    from support import REPO

    from stash_core.catalog.fields import today

    for zone in ("Pacific/Honolulu", "Pacific/Kiritimati"):  # one of them is on another day than UTC
        script = ("import datetime, zoneinfo; from stash_core.catalog.fields import today; "
                  f"print(today() == datetime.datetime.now(zoneinfo.ZoneInfo({zone!r})).date())")  # fmt: skip
        said = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "TZ": zone, "PYTHONPATH": str(REPO)}).stdout  # fmt: skip
        assert said.split() == ["True"], zone
    tomorrow = today() + timedelta(days=1)  # somewhere on earth already today
    assert {row["price_date"] for row in read_skypilot(catalog, price_date=tomorrow).rows} == {tomorrow}
    with pytest.raises(UsageError, match="in the future"):
        read_skypilot(catalog, price_date=today() + timedelta(days=2))


def test_a_folder_that_vanishes_during_the_search_is_passed_over(tmp_path, monkeypatch):
    """`instances import --skypilot /tmp` ended in "No such file or directory: /tmp/stash-schema-..." when
    another process removed its temporary folder while the search walked past it."""
    from stash_core.catalog.skypilot import catalog_files

    (tmp_path / "aws").mkdir()
    (tmp_path / "aws" / "vms.csv").write_text("InstanceType\n")
    (tmp_path / "gone").mkdir()
    real_scandir = os.scandir

    def vanishing(path):
        if str(path).endswith("gone"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", vanishing)
    assert catalog_files(tmp_path) == [tmp_path / "aws" / "vms.csv"]


def test_a_name_that_differs_from_the_catalogs_only_in_case_is_not_imported(tmp_path) -> None:
    """P3.2XLARGE was stored beside p3.2xlarge (predict listed both), and `instances add` then refused a third
    spelling as a twin of the imported one."""
    catalog = _cloud_file(tmp_path, "aws", [
        f"P3.2XLARGE,V100,1.0,8.0,61.0,{V100},1.0,0.5,us-east-1,use1-az1",
        f"g6.xlarge,L4,1.0,4.0,16.0,{gpu_info('L4', 'NVIDIA', 22888)},0.8048,0.35,us-east-1,use1-az1",
        f"G6.XLARGE,L4,1.0,4.0,16.0,{gpu_info('L4', 'NVIDIA', 22888)},0.9,0.4,us-east-1,use1-az1",
    ])  # fmt: skip
    db = tmp_path / "cat.duckdb"
    before = get_instance(db, "p3.2xlarge")
    result = import_skypilot(db, catalog)
    names = set(list_instances(db)["name"])
    assert "P3.2XLARGE" not in names and get_instance(db, "p3.2xlarge") == before
    assert "G6.XLARGE" not in names and "g6.xlarge" in names
    assert "P3.2XLARGE: differs from p3.2xlarge, already there, only in case; not imported" in result.skipped
    # a row not imported is not listed as lacking the network figures either (it lacks nothing stored)
    assert "P3.2XLARGE" not in result.lacking_network and "G6.XLARGE" not in result.lacking_network


def test_an_import_warns_of_unknown_gpus_and_spot_prices_above_on_demand(catalog, tmp_path, capsys):
    """`stash instances add` warned of these; an import of thousands of rows stored them without a word."""
    from stash_core.cli.main import main

    (catalog / "v7" / "aws" / "vms.csv").write_text(
        "\n".join([HEADER, *ROWS, f"p3.8xlarge,V100,4.0,32.0,244.0,{V100},12.24,13.0,us-east-1,x"]) + "\n"
    )
    db = str(tmp_path / "cat.duckdb")
    assert main(["instances", "import", "--skypilot", str(catalog), "--region", "us-east-1", "--db", db]) == 0
    said = capsys.readouterr().err
    assert "warning: 1 type(s) with a GPU not in Stash's accelerator table" in said and "g4ad.2xlarge" in said
    above = "warning: 1 type(s) with a spot price above on-demand (kept as the file has it): p3.8xlarge"
    assert above in said
    # a row the user edited is kept as it is: the file's prices of it are not stored, nor warned of
    assert main(["instances", "set", "p3.8xlarge", "--spot-usd-per-h", "3", "--db", db]) == 0
    capsys.readouterr()
    assert main(["instances", "import", "--skypilot", str(catalog), "--region", "us-east-1", "--db", db]) == 0
    said = capsys.readouterr()
    assert "kept (origin user): p3.8xlarge" in said.out and "spot price above" not in said.err
