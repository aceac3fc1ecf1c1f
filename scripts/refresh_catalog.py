"""Regenerate stash_core/catalog/instances.csv from a SkyPilot catalog folder (the GPU instance types of AWS,
GCP and Azure), keeping every row the file already has.

    python scripts/refresh_catalog.py CATALOG_DIR --version v7 --commit HASH [--price-date 2026-11-25]

CATALOG_DIR holds <cloud>/vms.csv as SkyPilot publishes them (the skypilot-catalog repository's
catalogs/<version>/, or ~/.sky/catalogs/<version>/). For each cloud, each GPU instance type gets one row: the
price in the cloud's default region (DEFAULT_REGIONS), else in its cheapest region, the spot price the lowest
of that region's zones (stash_core/catalog/skypilot.py reads the files). Each row is dated (--price-date, else
the file's modification date) and its source names the catalog version, commit, file and region. The
accelerator is the table's variant (catalog/accelerators.py) for the instance family (FAMILY_VARIANTS: a
p4de is an A100 SXM4 80 GB, which SkyPilot calls "A100-80GB" like Azure's PCIe part), else whatever the
table matches for SkyPilot's name; a type the table cannot place is left out and listed.

GCP's vms.csv prices a GPU machine type (a2, a3, g2) without its GPUs, which have rows of their own (no
instance type; the accelerator, its count, the zone and their price): a row's price is the sum of the two in
the same zone, as SkyPilot bills them (GCP_BUNDLED names the accelerator and count of each family).

Network bandwidth and GPU interconnect are not in SkyPilot's AWS/GCP/Azure columns: they come from the rows
already in instances.csv (hand-checked, kept as they are) or from the documented instance facts in
catalog_network.csv beside this script, each with its source; a row with neither leaves them empty and says
so. Existing rows keep their prices, dates and sources (tests and examples rely on them); only their
accelerator name is brought to the table's variant name.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from datetime import UTC, date, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stash_core.catalog.families import variant_for  # noqa: E402
from stash_core.catalog.fields import clean  # noqa: E402
from stash_core.catalog.skypilot import read_skypilot  # noqa: E402
from stash_core.catalog.skypilot_fixes import CORRECTIONS, gcp_bundled  # noqa: E402
from stash_core.errors import UsageError  # noqa: E402
from stash_core.store.catalog_seed import CATALOG_COLUMNS  # noqa: E402

INSTANCES_CSV = ROOT / "stash_core" / "catalog" / "instances.csv"
NETWORK_CSV = Path(__file__).resolve().parent / "catalog_network.csv"
CLOUDS = ("aws", "gcp", "azure")
DEFAULT_REGIONS = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
# the shipped file has no region column (the region is in each row's source) and no origin (it is "builtin")
CSV_COLUMNS = [column for column in CATALOG_COLUMNS if column not in ("origin", "region")]


# Types the catalog still lists that the cloud has retired or that are promotions of another type.
RETIRED = re.compile(r"_Promo$|^Standard_NC(6|12|24|24r)$|^Standard_NV(6|12|24)$")
RETIRED_WHY = "retired by Azure (NC and NV v1 series, promotional types)"
def gcp_rows(file: Path, price_date: date, region: str) -> list[dict]:
    """One row per GCP GPU machine type: machine plus GPU price per zone, the default region else the
    cheapest; spot the lowest zone's sum."""
    with open(file, encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    gpus = {(r["AcceleratorName"], r["AcceleratorCount"], r["AvailabilityZone"]): r for r in records
            if not r["InstanceType"]}  # fmt: skip
    zones: dict[str, list[tuple[str, float, float | None, dict]]] = {}
    for record in records:
        bundled = gcp_bundled(record["InstanceType"]) if record["InstanceType"] else None
        gpu = bundled and gpus.get((bundled[0], str(bundled[1]), record["AvailabilityZone"]))
        if not gpu or not record["Price"] or not gpu["Price"]:
            continue
        spot = None
        if record["SpotPrice"] and gpu["SpotPrice"]:
            spot = float(record["SpotPrice"]) + float(gpu["SpotPrice"])
        price = float(record["Price"]) + float(gpu["Price"])
        zones.setdefault(record["InstanceType"], []).append((record["Region"], price, spot, record))
    rows = []
    for name, entries in sorted(zones.items()):
        chosen = (
            region if any(entry[0] == region for entry in entries) else min(entries, key=lambda e: e[1])[0]
        )
        inside = [entry for entry in entries if entry[0] == chosen]
        spots = [entry[2] for entry in inside if entry[2] is not None]
        record = inside[0][3]
        accelerator, count = gcp_bundled(name)
        row = clean({
            "name": name, "provider": "gcp", "accelerator": variant_for(name, accelerator),
            "accelerator_count": count, "vcpus": record["vCPUs"], "memory_gib": record["MemoryGiB"],
            "on_demand_usd_per_h": round(min(entry[1] for entry in inside), 5),
            "spot_usd_per_h": round(min(spots), 5) if spots else None, "price_date": price_date,
            "region": chosen,
        }, partial=False)  # fmt: skip
        row["source"] = f"machine and {count} x {accelerator} of one zone, summed"
        rows.append(row)
    return rows


def read_network_facts(path: Path = NETWORK_CSV) -> dict[str, dict[str, str]]:
    """Documented network bandwidth and interconnect by instance type (name, network_gbps, interconnect,
    source)."""
    if not path.exists():
        return {}
    with open(path, encoding="utf-8", newline="") as handle:
        return {row["name"]: row for row in csv.DictReader(handle)}


def cloud_rows(
    folder: Path, cloud: str, version: str, commit: str, price_date: date | None
) -> tuple[list[dict], list[str]]:
    """One row per GPU instance type of a cloud's vms.csv (default region, else cheapest); rows the table
    cannot place are listed, not kept."""
    file = folder / cloud / "vms.csv"
    if not file.exists():
        return [], [f"{cloud}: no {file}, nothing read"]
    region = DEFAULT_REGIONS[cloud]
    if cloud == "gcp":
        day = price_date or datetime.fromtimestamp(file.stat().st_mtime, UTC).date()
        chosen = {row["name"]: row for row in gcp_rows(file, day, region)}
    else:
        try:
            chosen = {row["name"]: row for row in read_skypilot(file, region, price_date=price_date).rows}
        except UsageError:  # no type of this file in the default region
            chosen = {}
        for row in read_skypilot(file, None, price_date=price_date).rows:
            chosen.setdefault(row["name"], row)
    rows, left_out = [], []
    for name in sorted(chosen):
        row = chosen[name]
        if RETIRED.search(name):
            left_out.append(f"{name} ({RETIRED_WHY})")
            continue
        variant = variant_for(name, row["accelerator"])
        if variant is None:
            left_out.append(f"{name} ({row['accelerator']}: not in the accelerator table)")
            continue
        where = "default region" if row["region"] == region else "cheapest region; not offered in " + region
        how = f"; price: {row['source']}" if cloud == "gcp" else ""
        spot = "the region's (no zones listed)" if cloud == "azure" else "lowest of its zones"
        if name in CORRECTIONS:
            row["accelerator_count"], why = CORRECTIONS[name]
            how += f"; GPU count corrected: {why}"
        row.update(
            provider=cloud,
            accelerator=variant,
            source=(
                f"SkyPilot catalog {version} {cloud}/vms.csv (skypilot-org/skypilot-catalog at {commit}), "
                f"region {row['region']} ({where}){how}; spot: {spot}"
            ),
        )
        rows.append(row)
    return rows, left_out


def merge(existing: list[dict], new: list[dict], facts: dict[str, dict[str, str]]) -> tuple[list[dict], list]:
    """Existing rows as they are (accelerator renamed to the table's variant); new types appended with the
    documented network facts where known. Returns the rows and the new names without network facts."""
    rows, names = [], set()
    for row in existing:
        found = variant_for(row["name"], row.get("accelerator"))
        rows.append({**row, "accelerator": found or row.get("accelerator")})
        names.add(row["name"])
    lacking = []
    for row in new:
        if row["name"] in names:
            continue
        fact = facts.get(row["name"])
        if fact:
            row["network_gbps"] = fact["network_gbps"] or None
            row["interconnect"] = fact["interconnect"] or None
            row["source"] += f"; network and interconnect: {fact['source']}"
        else:
            row["source"] += "; network and interconnect: not known to Stash"
            lacking.append(row["name"])
        rows.append(row)
        names.add(row["name"])
    return rows, lacking


def per_cloud(value: str, cloud: str) -> str:
    """A command-line value for one cloud: "v7" for all, or "aws=v7,azure=v6" (a cloud not named: unknown)."""
    if "=" not in value:
        return value
    pairs = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    return pairs.get(cloud, "unknown")


def write_rows(rows: list[dict], path: Path) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({column: _cell(row.get(column)) for column in CSV_COLUMNS})


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else repr(value)
    return str(value)


def main(argv: list[str] | None = None) -> int:
    # the docstring's first paragraph: its first line alone stopped mid-sentence
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("catalog_dir", type=Path, help="folder with <cloud>/vms.csv (SkyPilot's format)")
    parser.add_argument(
        "--version",
        required=True,
        help="SkyPilot catalog version of the files: v7, or per cloud aws=v7,azure=v6",
    )
    parser.add_argument(
        "--commit",
        default="unknown commit",
        help="skypilot-catalog commit of the files (per cloud: aws=HASH,...)",
    )
    parser.add_argument(
        "--price-date", type=date.fromisoformat, help="date of the prices (default: file date)"
    )
    parser.add_argument("--out", type=Path, default=INSTANCES_CSV, help="the CSV to write (default: shipped)")
    parser.add_argument(
        "--existing",
        type=Path,
        default=INSTANCES_CSV,
        help="rows to keep as they are (default: the shipped CSV)",
    )
    args = parser.parse_args(argv)
    if not args.catalog_dir.is_dir():
        print(f"refresh_catalog: no folder {args.catalog_dir}", file=sys.stderr)
        return 2
    with open(args.existing, encoding="utf-8", newline="") as handle:
        existing = list(csv.DictReader(handle))
    new, left_out = [], []
    try:
        for cloud in CLOUDS:
            version, commit = per_cloud(args.version, cloud), per_cloud(args.commit, cloud)
            rows, skipped = cloud_rows(args.catalog_dir, cloud, version, commit, args.price_date)
            new += rows
            left_out += skipped
    except UsageError as exc:
        print(f"refresh_catalog: {exc}", file=sys.stderr)
        return 2
    rows, lacking = merge(existing, new, read_network_facts())
    write_rows(rows, args.out)
    by_cloud = {cloud: sum(row.get("provider") == cloud for row in rows) for cloud in CLOUDS}
    print(f"{len(rows)} instances written to {args.out}: {by_cloud}")
    for line in left_out:
        print(f"left out: {line}")
    if lacking:
        print(f"no network facts for: {', '.join(lacking)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
