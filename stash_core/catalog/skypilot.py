"""Read SkyPilot's price catalog (catalogs/v7/<cloud>/vms.csv, kept by SkyPilot under ~/.sky/catalogs/) into
catalog rows, and import them (`stash instances import --skypilot DIR|FILE [--region R]`).

vms.csv has one row per instance type and availability zone, with the columns InstanceType, AcceleratorName,
AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, Price, SpotPrice, Region, AvailabilityZone (the order differs
between clouds: they are read by name). Stash keeps one row per instance type:
  - with a region: that region's row; without: the region with the lowest on-demand price (the first such
    region in the file on a tie); the spot price is the lowest of that region's availability zones;
  - the accelerator: the accelerator table's variant of the instance family (catalog/families.py: a p3's V100
    is "NVIDIA V100 SXM2 16 GB"), else of SkyPilot's name with the manufacturer and per-GPU memory of GpuInfo
    ("NVIDIA L40 48 GB" of L40 with 49152 MiB), kept as that name when the table has no such GPU;
  - the price date: the file's modification date (SkyPilot writes the file when it fetches the catalog),
    unless given; the source names the file and the region;
  - the provider: the cloud the file's folder names (catalogs/v7/aws/vms.csv), else the shipped row's.
Rows without an instance type (GCP's attachable accelerators) are priced into the GCP machine types that
come with them, and a GPU count the cloud documents otherwise is corrected (catalog/skypilot_fixes.py);
CPU-only types are skipped unless asked for. A row the file leaves without an on-demand price, or without
the GPUs the stored row has, does not replace that row (it is listed as skipped).
Network bandwidth and GPU interconnect are not in this format: they come from Stash's own table
(instances.csv) by instance type, and the import says which imported instances lack them.
A malformed file is refused with one line naming its row (the file's line number) and column; nothing is
written then.
"""

from __future__ import annotations

import ast
import csv
import functools
import io
import os
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from stash_core.catalog.catalog import builtin_instances, list_instances
from stash_core.catalog.families import variant_for
from stash_core.catalog.fields import MAXIMA, PRICE_DATE_LEEWAY, clean, today
from stash_core.catalog.skypilot_fixes import CORRECTIONS, with_bundled_gpus
from stash_core.errors import UsageError
from stash_core.store.catalog_import import ImportOutcome, write_imported_rows
from stash_core.units import finite_float
from stash_core.userfiles import file_kind, read_user_text, refuse_repeated_columns

MAX_CATALOG_BYTES = 1024 * 1024 * 1024  # all clouds' vms.csv together are tens of MB
MAX_GPU_MEMORY_MIB = 16 * 2**20  # 16 TiB: far above any GPU, below what breaks arithmetic
REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice",
            "Region")  # fmt: skip
_NUMBERS = ("AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice")
_FIELD_OF = {"AcceleratorCount": "accelerator_count", "vCPUs": "vcpus", "MemoryGiB": "memory_gib",
             "Price": "on_demand_usd_per_h", "SpotPrice": "spot_usd_per_h"}  # fmt: skip
# SkyPilot's catalog folders, one per cloud (catalogs/v7/<cloud>/vms.csv)
SKYPILOT_CLOUDS = frozenset({
    "aws", "azure", "gcp", "lambda", "oci", "ibm", "scp", "runpod", "fluidstack", "paperspace", "cudo", "do",
    "vast", "nebius", "hyperbolic", "vsphere",
})  # fmt: skip
MIB_PER_GB = 1024  # GpuInfo gives MiB; GPU memory is marketed in GiB-sized "GB" (16384 MiB is a 16 GB V100)


@dataclass
class SkyPilotImport:
    rows: list[dict[str, Any]]
    files: list[Path]
    skipped: list[str] = field(default_factory=list)
    lacking_network: list[str] = field(default_factory=list)
    outcome: ImportOutcome | None = None


def catalog_files(path: Path | str) -> list[Path]:
    """vms.csv files: the file given, or every vms.csv under a folder (one per cloud)."""
    path = Path(path).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(_files_named(path, "vms.csv"))
        if found:
            return found
        raise UsageError(f"no vms.csv under {path} (SkyPilot keeps them in ~/.sky/catalogs/v7/<cloud>/)")
    try:
        mode = path.stat().st_mode
    except OSError:
        raise UsageError(f"no such file or folder: {path}") from None
    raise UsageError(f"{path}: is a {file_kind(mode)}, not a regular file (a SkyPilot vms.csv)")


def _files_named(folder: Path, name: str) -> list[Path]:
    """Every file `name` under `folder`; a folder that vanishes or cannot be read meanwhile (another
    process's temporary one under /tmp) is passed over, as rglob stopped the whole search at it."""
    found = []
    for parent, folders, files in os.walk(folder, onerror=lambda _error: None):
        folders.sort()
        if name in files:
            found.append(Path(parent) / name)
    return found


def read_skypilot(
    path: Path | str, region: str | None = None, include_cpu: bool = False, price_date: date | None = None
) -> SkyPilotImport:
    """Catalog rows (dicts of the instances columns, checked) from one vms.csv or a folder of them."""
    files = catalog_files(path)
    rows: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for file in files:
        for name, row in _read_file(file, region, include_cpu, price_date, skipped).items():
            if name in rows:
                skipped.append(f"{name} of {file}: already read from another file")
                continue
            rows[name] = row
    if region and not rows:
        raise UsageError(f"no instance type in region {region!r} in {', '.join(map(str, files))}")
    _join_network(rows)
    lacking = sorted(
        name for name, row in rows.items() if row["network_gbps"] is None or row["interconnect"] is None
    )
    return SkyPilotImport(list(rows.values()), files, skipped, lacking)


def import_skypilot(
    db_path: Path | str,
    path: Path | str,
    region: str | None = None,
    include_cpu: bool = False,
    price_date: date | None = None,
) -> SkyPilotImport:
    """Read the catalog and store its rows (rows of origin 'user' are kept as they are, and so is a row the
    file would leave unpriced or without its GPUs: kept_over)."""
    result = read_skypilot(path, region, include_cpu, price_date)
    current = {row["name"]: row for row in list_instances(db_path).to_dict(orient="records")}
    result.rows = kept_over(result.rows, current, result.skipped)
    result.outcome = write_imported_rows(db_path, result.rows)
    # what lacks a figure among the rows written: a user's row kept, or a row skipped, is not the file's
    written = {row["name"] for row in result.rows} - set(result.outcome.kept_user)
    result.lacking_network = [name for name in result.lacking_network if name in written]
    return result


def kept_over(rows: list[dict[str, Any]], current: dict[str, dict], skipped: list[str]) -> list[dict]:
    """The imported rows that may replace the catalog's row of their name: not one without an on-demand price
    over a priced row, nor one without GPUs over a row with them (a catalog that leaves them out, as
    SkyPilot's does for some types), nor a new name that differs from one already there only in case (two
    rows a reader takes for one, which `instances add` refuses too); each row kept over is said in
    `skipped`."""
    kept = []
    folded = {str(name).casefold(): name for name in current}
    for row in rows:
        now = current.get(row["name"])
        gpus_now = finite_float(now.get("accelerator_count")) if now else None
        twin = folded.get(row["name"].casefold())
        if now is None and twin is not None:
            skipped.append(f"{row['name']}: differs from {twin}, already there, only in case; not imported")
            continue
        folded.setdefault(row["name"].casefold(), row["name"])
        if now and row["on_demand_usd_per_h"] is None and finite_float(now.get("on_demand_usd_per_h")):
            skipped.append(f"{row['name']}: no on-demand price in the file; the catalog's priced row is kept")
        elif now and not row["accelerator_count"] and gpus_now:
            skipped.append(
                f"{row['name']}: no GPU in the file; the catalog's row of {gpus_now:g} x "
                f"{now.get('accelerator')} is kept"
            )
        else:
            kept.append(row)
    return kept


def _read_file(
    file: Path, region: str | None, include_cpu: bool, price_date: date | None, skipped: list[str]
) -> dict[str, dict[str, Any]]:
    text = read_user_text(file, "SkyPilot catalog", MAX_CATALOG_BYTES)  # a BOM is dropped here
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = [column for column in REQUIRED if column not in (reader.fieldnames or [])]
        if missing:
            raise UsageError(
                f"{file}: no column {', '.join(missing)}; a SkyPilot vms.csv has {', '.join(REQUIRED)}"
            )
        refuse_repeated_columns(reader.fieldnames, str(file))
        records = [(reader.line_num, record) for record in reader]
        day = price_date or datetime.fromtimestamp(file.stat().st_mtime).date()  # the user's day, as today()
    except (OSError, UnicodeDecodeError, csv.Error, OverflowError, ValueError) as exc:
        raise UsageError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
    latest = today() + PRICE_DATE_LEEWAY  # as `instances set` gives: time zones differ
    if price_date is not None and price_date > latest:
        raise UsageError(f"--price-date {price_date} is in the future: give the date the prices were fetched")
    if day > latest:
        raise UsageError(
            f"{file} was last modified on {day}, in the future: it cannot date its prices; give --price-date"
        )
    by_type: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    attachable: list[tuple[int, dict[str, Any]]] = []  # GCP's GPUs, priced apart from their machine types
    for line, record in records:
        if None in record or any(record.get(column) is None for column in REQUIRED):
            raise UsageError(f"{file} row {line}: not as many columns as the header")
        values = _values(file, line, record)
        if not values["InstanceType"]:
            attachable.append((line, values))  # an attachable accelerator (GCP), not an instance type
            continue
        by_type.setdefault(values["InstanceType"], []).append((line, values))
    by_type = with_bundled_gpus(by_type, attachable, skipped)
    rows = {}
    for name, entries in by_type.items():
        chosen = _choose_region(entries, region)
        if chosen is None:
            continue
        row = _catalog_row(file, chosen, entries, day)
        if not row["accelerator_count"] and not include_cpu:
            continue
        rows[name] = row
    return rows


def _values(file: Path, line: int, record: dict[str, str]) -> dict[str, Any]:
    """The cells of one vms.csv row, typed; UsageError naming the row and column of a bad cell."""
    values: dict[str, Any] = {key: (cell or "").strip() for key, cell in record.items()}
    for column in _NUMBERS:
        text = values[column]
        if not text:
            values[column] = None
            continue
        try:
            number = float(text)
        except ValueError:
            raise UsageError(f"{file} row {line}, column {column}: {text!r} is not a number") from None
        if not number >= 0 or number == float("inf"):
            raise UsageError(f"{file} row {line}, column {column}: {text!r} must be a number >= 0")
        if number == 0 and column in ("vCPUs", "MemoryGiB"):  # a machine has some; empty means unknown
            raise UsageError(f"{file} row {line}, column {column}: {text!r} must be above 0 (or left empty)")
        most = MAXIMA[_FIELD_OF[column]]
        if number > most:  # every row, not only the one imported: a broken row says the file is broken
            raise UsageError(f"{file} row {line}, column {column}: {text!r} must be at most {most:,g}")
        values[column] = number
    for column in ("AcceleratorCount", "vCPUs"):
        if values[column] is not None and not float(values[column]).is_integer():
            raise UsageError(f"{file} row {line}, column {column}: {record[column]!r} is not a whole number")
    values["GpuInfo"] = _gpu_info(file, line, values.get("GpuInfo") or "", values["AcceleratorName"])
    return values


def _gpu_info(file: Path, line: int, text: str, accelerator: str = "") -> dict[str, Any]:
    """Manufacturer and per-GPU memory (MiB) of GpuInfo, a Python-literal dict (SkyPilot writes it so); the
    Azure catalog writes just the accelerator's name there, which says neither."""
    if not text or text == accelerator:
        return {}
    parsed = _parsed_gpu_info(text)
    if parsed is None:
        raise UsageError(f"{file} row {line}, column GpuInfo: not a GPU description SkyPilot writes")
    manufacturer, memory = parsed
    # bool is an int to Python: SizeInMiB true would be 1 MiB, a "0 GB" GPU.
    number = isinstance(memory, int | float) and not isinstance(memory, bool)
    if memory is not None and not (number and MIB_PER_GB <= memory <= MAX_GPU_MEMORY_MIB):
        raise UsageError(
            f"{file} row {line}, column GpuInfo: SizeInMiB {memory!r:.40} is not a GPU memory "
            f"({MIB_PER_GB:,} to {MAX_GPU_MEMORY_MIB:,} MiB)"
        )
    if manufacturer is not None and not (isinstance(manufacturer, str) and manufacturer.isprintable()
                                         and 0 < len(manufacturer.strip()) <= 40):  # fmt: skip
        raise UsageError(
            f"{file} row {line}, column GpuInfo: Manufacturer {manufacturer!r:.40} is not a name"
        )
    return {"manufacturer": manufacturer, "memory_mib": memory}


@functools.lru_cache(maxsize=4096)
def _parsed_gpu_info(text: str) -> tuple[Any, Any] | None:
    """(Manufacturer, SizeInMiB) of a GpuInfo literal, None when it is not one; cached, since a catalog
    repeats a handful of GPU descriptions over every region and zone (parsing each costs 0.2 ms)."""
    try:
        gpu = ast.literal_eval(text)["Gpus"][0]
        return gpu.get("Manufacturer"), gpu.get("MemoryInfo", {}).get("SizeInMiB")
    except (
        ValueError,
        SyntaxError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        MemoryError,
        RecursionError,
    ):
        return None


def _choose_region(entries: list[tuple[int, dict]], region: str | None) -> tuple[int, dict] | None:
    if region:
        inside = [entry for entry in entries if entry[1]["Region"] == region]
        return _cheapest_spot(inside) if inside else None
    priced = [entry for entry in entries if entry[1]["Price"] is not None] or entries
    cheapest = min(priced, key=lambda entry: (entry[1]["Price"] or 0.0, entry[0]))
    return _cheapest_spot([entry for entry in entries if entry[1]["Region"] == cheapest[1]["Region"]])


def _cheapest_spot(entries: list[tuple[int, dict]]) -> tuple[int, dict]:
    spot = [entry for entry in entries if entry[1]["SpotPrice"] is not None]
    return min(spot, key=lambda entry: (entry[1]["SpotPrice"], entry[0])) if spot else entries[0]


def _catalog_row(file: Path, chosen: tuple[int, dict], entries: list, day: date) -> dict[str, Any]:
    line, values = chosen
    count = int(values["AcceleratorCount"] or 0)
    notes = "; machine and its GPUs of one zone, summed" if values.get("bundled") else ""
    if values["InstanceType"] in CORRECTIONS and count:
        count, why = CORRECTIONS[values["InstanceType"]]
        notes += f"; GPU count corrected: {why}"
    name = values["AcceleratorName"]
    if name.upper() in ("", "CPU-ONLY", "NONE"):
        count, name = 0, ""
    region = values["Region"]
    gpu = _variant(values["InstanceType"], _accelerator_name(name, values["GpuInfo"])) if count else None
    fields = {
        "name": values["InstanceType"],
        # the cloud is the catalog's folder (catalogs/v7/aws/vms.csv); a file elsewhere (~/Downloads): none
        "provider": file.parent.name.lower() if file.parent.name.lower() in SKYPILOT_CLOUDS else None,
        "accelerator": gpu,
        "accelerator_count": count,
        "vcpus": int(values["vCPUs"]) if values["vCPUs"] else None,
        "memory_gib": values["MemoryGiB"] or None,
        "on_demand_usd_per_h": values["Price"],
        "spot_usd_per_h": values["SpotPrice"],
        "price_date": day,
        "source": f"SkyPilot catalog {file} (region {region}; spot: lowest of its zones{notes})",
        "region": region or None,
    }
    try:
        return {**clean(fields, partial=False), "origin": "import"}
    except UsageError as exc:
        raise UsageError(f"{file} row {line}: {exc}") from None


def _accelerator_name(name: str, gpu: dict[str, Any]) -> str:
    """'NVIDIA V100 16 GB' of V100 with 16384 MiB: manufacturer and memory from GpuInfo when it has them."""
    text = name
    maker = gpu.get("manufacturer")
    if maker and not text.upper().startswith(str(maker).upper()):
        text = f"{maker} {text}"
    memory = gpu.get("memory_mib")
    if isinstance(memory, int | float) and memory > 0 and "GB" not in name.upper():
        text = f"{text} {round(memory / MIB_PER_GB)} GB"
    return text


def _variant(instance_type: str, accelerator: str) -> str:
    """The accelerator table's name of the instance's GPU variant; SkyPilot's own when the table has none."""
    return variant_for(instance_type, accelerator) or accelerator


def _join_network(rows: dict[str, dict[str, Any]]) -> None:
    """Network bandwidth and interconnect from Stash's own table (instances.csv), by instance type; and its
    provider where the file's folder named no cloud."""
    shipped = builtin_instances().set_index("name")
    for name, row in rows.items():
        if name in shipped.index and row["provider"] is None:
            row["provider"] = shipped.at[name, "provider"]
        if name in shipped.index:
            for column in ("network_gbps", "interconnect"):
                value = shipped.at[name, column]
                row[column] = None if value is None or value != value else value
