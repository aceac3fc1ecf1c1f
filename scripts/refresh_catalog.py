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

Network bandwidth and GPU interconnect are not in SkyPilot's AWS/GCP/Azure columns: they come from the rows
already in instances.csv (hand-checked, kept as they are) or from the documented instance facts in
catalog_network.csv beside this script, each with its source; a row with neither leaves them empty and says
so. Existing rows keep their prices, dates and sources (tests and examples rely on them); only their
accelerator name is brought to the table's variant name.
"""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stash_core.catalog.families import variant_for  # noqa: E402
from stash_core.catalog.skypilot import read_skypilot  # noqa: E402
from stash_core.errors import UsageError  # noqa: E402
from stash_core.store.catalog_seed import CATALOG_COLUMNS  # noqa: E402

INSTANCES_CSV = ROOT / "stash_core" / "catalog" / "instances.csv"
NETWORK_CSV = Path(__file__).resolve().parent / "catalog_network.csv"
CLOUDS = ("aws", "gcp", "azure")
DEFAULT_REGIONS = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
# the shipped file has no region column (the region is in each row's source) and no origin (it is "builtin")
CSV_COLUMNS = [column for column in CATALOG_COLUMNS if column not in ("origin", "region")]


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
    try:
        chosen = {row["name"]: row for row in read_skypilot(file, region, price_date=price_date).rows}
    except UsageError:  # no type of this file in the default region
        chosen = {}
    for row in read_skypilot(file, None, price_date=price_date).rows:
        chosen.setdefault(row["name"], row)
    rows, left_out = [], []
    for name in sorted(chosen):
        row = chosen[name]
        variant = variant_for(name, row["accelerator"])
        if variant is None:
            left_out.append(f"{name} ({row['accelerator']}: not in the accelerator table)")
            continue
        where = "default region" if row["region"] == region else "cheapest region; not offered in " + region
        row.update(
            provider=cloud,
            accelerator=variant,
            source=(
                f"SkyPilot catalog {version} {cloud}/vms.csv (skypilot-org/skypilot-catalog at {commit}), "
                f"region {row['region']} ({where}); spot: lowest of its zones"
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("catalog_dir", type=Path, help="folder with <cloud>/vms.csv (SkyPilot's format)")
    parser.add_argument("--version", required=True, help="SkyPilot catalog version of the folder, e.g. v7")
    parser.add_argument("--commit", default="unknown commit", help="skypilot-catalog commit of the files")
    parser.add_argument(
        "--price-date", type=date.fromisoformat, help="date of the prices (default: file date)"
    )
    parser.add_argument("--out", type=Path, default=INSTANCES_CSV, help="the CSV to write (default: shipped)")
    args = parser.parse_args(argv)
    if not args.catalog_dir.is_dir():
        print(f"refresh_catalog: no folder {args.catalog_dir}", file=sys.stderr)
        return 2
    with open(INSTANCES_CSV, encoding="utf-8", newline="") as handle:
        existing = list(csv.DictReader(handle))
    new, left_out = [], []
    try:
        for cloud in CLOUDS:
            rows, skipped = cloud_rows(args.catalog_dir, cloud, args.version, args.commit, args.price_date)
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
