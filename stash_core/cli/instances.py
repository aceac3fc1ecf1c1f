"""`stash instances list|show|seed|add|set|import|confirm`: the instance catalog (shapes, prices with date and
source; SkyPilot's price catalog imported) and the user's word that a run's instance label is right although
its machine's fingerprint says otherwise."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from stash_core.cli.args import (
    BLANKS,
    Number,
    add_db_argument,
    clearable,
    db_path,
    identifier,
    import_day,
    iso_date,
    non_negative,
    positive_real,
)
from stash_core.errors import UsageError
from stash_core.pathargs import input_text
from stash_core.terminal import printable

# The catalog is imported inside cmd_instances: building `stash --help` must not load pandas. The values are
# checked here when the command line is read, and again by the catalog (catalog/fields.py).

def clearable_text(text: str) -> str:
    """argparse type of a text field that 'none' clears ("" to the catalog: stored as no value): --provider
    none was stored as a provider named "none"."""
    kept = clearable(identifier)(text)
    return "" if kept.strip().lower() in BLANKS else kept


INSTANCE_OPTIONS = {
    "provider": (clearable_text, "cloud provider, e.g. aws ('none' clears it)"),
    "accelerator": (identifier, "accelerator model, e.g. 'NVIDIA V100 16 GB'"),
    "accelerator_count": (
        clearable(Number(0, 1024, what="an integer from 0 to 1024")),
        "accelerators per instance (0 for a CPU machine; 'none' clears it)",
    ),
    "vcpus": (clearable(Number(1, 100_000, what="a positive integer")), "virtual CPUs ('none' clears it)"),
    "memory_gib": (clearable(positive_real(1e7)), "memory in GiB ('none' clears it)"),
    "network_gbps": (clearable(positive_real(1e5)), "network bandwidth in Gbit/s ('none' clears it)"),
    "interconnect": (identifier, "GPU link: NVSwitch, NVLink, PCIe, PCIe peer-to-peer or none"),
    "on_demand_usd_per_h": (clearable(non_negative(1e6)), "on-demand price, USD per hour ('none' clears it)"),
    "spot_usd_per_h": (clearable(non_negative(1e6)), "spot price, USD per hour ('none' clears it)"),
    "price_date": (
        iso_date, "date of the prices, YYYY-MM-DD (default: today when a price changes; 'none' clears it)"
    ),
    "source": (clearable_text, "where the prices come from (default: 'user entry' for add, 'user edit' for "
               "set; 'none' clears it)"),
    "region": (clearable_text, "cloud region the prices are for ('none' clears it)"),
}
_LIST_COLUMNS = {
    "name": "name",
    "accelerator_count": "gpus",
    "accelerator": "accelerator",
    "vcpus": "vcpus",
    "memory_gib": "mem_gib",
    "network_gbps": "network_gbps",
    "interconnect": "interconnect",
    "region": "region",
    "on_demand_usd_per_h": "on_demand",
    "spot_usd_per_h": "spot",
    "price_date": "price_date",
    "origin": "origin",
    "stored": "stored",
}


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `instances` and its actions to `stash`'s subparsers."""
    parser_class = parser_class or argparse.ArgumentParser
    instances = subparsers.add_parser(
        "instances",
        help="the instance catalog: list, show, seed, import, add, set; confirm a run's instance label",
    )
    actions = instances.add_subparsers(dest="instances_action", required=True, parser_class=parser_class)
    listing = actions.add_parser("list", help="list the catalog (stored and built-in rows)")
    add_db_argument(listing)
    show = actions.add_parser("show", help="show one instance")
    show.add_argument("name", help="the instance's catalog name")
    add_db_argument(show)
    seed = actions.add_parser(
        "seed",
        help="store the built-in rows not stored yet and this Stash's values of rows still as shipped",
    )
    add_db_argument(seed)
    imported = actions.add_parser(
        "import",
        help="add or update instances from SkyPilot's price catalog (rows you added or edited are kept)",
        description="Reads catalogs/v7/<cloud>/vms.csv (SkyPilot keeps them under ~/.sky/catalogs/). One row "
        "per "
        "instance type: the region given, or the one with the lowest on-demand price; the spot price is the "
        "lowest of that region's zones. Network bandwidth and interconnect come from Stash's own table; the "
        "output lists the imported instances that lack them.",
    )
    imported.add_argument(
        "--skypilot", required=True, type=input_text, metavar="DIR|FILE", help="a vms.csv or a folder of them"
    )
    imported.add_argument("--region", type=identifier, help="take the prices of this region (e.g. us-east-1)")
    imported.add_argument(
        "--include-cpu", action="store_true", help="also instance types without accelerators"
    )
    imported.add_argument(
        "--price-date", type=import_day, help="date of the prices (default: the file's date)"
    )
    add_db_argument(imported)
    confirm = actions.add_parser(
        "confirm",
        help="use a run as a measurement of its instance although its machine does not fit the label",
        description="A run whose machine fingerprint contradicts its catalog instance label (no GPU, another "
        "GPU count or model) is shown with a warning and not used for that instance's costs and "
        "recommendations. Confirm the label when it is right (e.g. GPUs hidden from the profile).",
    )
    confirm.add_argument("run_id", help="the run id, or any unique part of it")
    add_db_argument(confirm)
    for action in ("add", "set"):
        sub = actions.add_parser(action, help="add an instance" if action == "add" else "change an instance")
        sub.add_argument("name", type=identifier, help="the instance's catalog name")
        for field_name, (kind, help_text) in INSTANCE_OPTIONS.items():
            sub.add_argument(f"--{field_name.replace('_', '-')}", dest=field_name, type=kind, help=help_text)
        add_db_argument(sub)


def cmd_instances(args: argparse.Namespace) -> int:
    from stash_core.catalog import (
        COLUMNS,
        add_instance,
        confirm_label,
        get_instance,
        list_instances,
        seed_and_refresh,
        set_instance,
        stale_catalog_warning,
    )
    from stash_core.catalog.row_warnings import ambiguous_accelerator_note, redated_price_note, row_warnings

    path = db_path(args)
    action = args.instances_action
    if action == "list":
        frame = list_instances(path)
        table = frame[list(_LIST_COLUMNS)].rename(columns=_LIST_COLUMNS).astype(object)
        print(printable(table.where(table.notna(), "-").to_string(index=False)))
        print("prices in USD per hour; `stash instances show NAME` gives the source of each price")
        stale = stale_catalog_warning(path)
        if stale:
            print(printable(f"note: {stale}"))
        return 0
    new = not Path(path).exists()  # said first once the action made it: a mistyped --db would go unnoticed
    if action == "import":
        return _import(path, args, new)
    if action == "seed":
        inserted, refreshed = seed_and_refresh(path)
        say_new_database(path, new)
        print(printable(f"stored {inserted} built-in instance(s) in {path}"))
        if refreshed:
            print(printable(f"refreshed {len(refreshed)} built-in instance(s) to this Stash's values: "
                            f"{', '.join(refreshed)}"))  # fmt: skip
        return 0
    if action == "confirm":
        check = confirm_label(path, args.run_id)
        if check.status == "confirmed":
            print(f"confirmed: run {check.run_id} counts as a measurement of {check.instance}")
            print(f"  (its machine: {'; '.join(check.problems)})")
            if check.cpu_run_of_gpus:  # Compare prices it; predictions of the GPUs cannot take a CPU's time
                print(f"  in Compare and run costs; predict and recommend still leave it out: {check.remedy}")
        elif check.status == "fits":
            print(f"confirmed run {check.run_id} as {check.instance} (its machine fits the label anyway)")
        else:
            print(f"confirmed run {check.run_id} as {check.instance} (not checked: {check.reason})")
        return 0
    if action == "show":
        row = get_instance(path, args.name)
        if row is None:
            raise UsageError(f"unknown instance {args.name!r}: see `stash instances list`")
        for column in COLUMNS:
            print(printable(f"{column:<22}{'-' if row.get(column) is None else row[column]}"))
        return 0
    fields = {name: getattr(args, name) for name in INSTANCE_OPTIONS if getattr(args, name) is not None}
    if action == "add":
        row = add_instance(path, name=args.name, **fields)
        said = f"added {row['name']} to the catalog in {path}"
    else:
        before = get_instance(path, args.name) or {}
        row = set_instance(path, args.name, **fields)
        values = ", ".join(f"{key}={'none' if row[key] is None else row[key]}" for key in fields)  # as typed
        said = f"updated {row['name']} in {path}: {values}"
    say_new_database(path, new)
    print(printable(said))
    redated = redated_price_note(before, row, set(fields)) if action == "set" else None
    if redated:
        print(printable(f"note: {redated}"))
    for warning in row_warnings(row, set(fields)):
        print(printable(f"warning: {warning}"), file=sys.stderr)
    note = ambiguous_accelerator_note(row) if row.get("accelerator_count") else None
    if note and "accelerator" in fields:
        print(printable(f"note: {note}"))
    return 0


def say_new_database(path: Any, new: bool) -> None:
    if new:
        print(printable(f"note: {path} did not exist: it is a new database, holding the built-in catalog"))


def _import(path: Any, args: argparse.Namespace, new: bool) -> int:
    from stash_core.catalog.skypilot import import_skypilot

    result = import_skypilot(path, args.skypilot, args.region, args.include_cpu, args.price_date)
    say_new_database(path, new)
    outcome = result.outcome
    print(
        f"imported {len(result.rows)} instance type(s) from {len(result.files)} file(s) into {path}: "
        f"{len(outcome.inserted)} new, {len(outcome.replaced)} updated, {len(outcome.unchanged)} unchanged, "
        f"{len(outcome.kept_user)} kept as you edited them"
    )
    if outcome.kept_user:
        print(f"  kept (origin user): {_some(outcome.kept_user)}")
    if result.lacking_network:
        print(
            f"  {len(result.lacking_network)} lack network bandwidth or interconnect (not in SkyPilot's "
            "format; multi-instance and multi-GPU predictions need them: `stash instances set NAME "
            "--network-gbps G --interconnect I`):"
        )
        print(f"  {_some(result.lacking_network)}")
    kept = set(outcome.kept_user)  # the user's own rows, kept as they were: not the file's to warn of
    stored = [row for row in result.rows if row["name"] not in kept]
    for said in _import_warnings(stored).values():
        print(f"  {said}", file=sys.stderr)
    for line in result.skipped[:SHOWN_NAMES]:
        print(f"  skipped {line}")
    if len(result.skipped) > SHOWN_NAMES:
        print(f"  ... and {len(result.skipped) - SHOWN_NAMES:,} more skipped")
    return 0


SHOWN_NAMES = 40  # a catalog of 200,000 rows must not print 200,000 names
IMPORT_WARNINGS = {  # row_problems' kinds an import can bring, in a catalog's words (no link: said above)
    "unknown_gpu": "with a GPU not in Stash's accelerator table (`stash predict` and `stash recommend` leave "
                   "them out)",
    "spot_above_on_demand": "with a spot price above on-demand (kept as the file has it)",
    "free": "priced at $0/h (recommend and spot will take them as free and rank them first)",
    "dear": "priced above ${dear}/h, more than any cloud instance costs (kept as the file has it)",
}


def _import_warnings(rows: list[dict]) -> dict[str, str]:
    """One warning line per kind of problem among the imported rows, naming them (a few)."""
    from stash_core.catalog.row_warnings import DEAR_USD_PER_H, row_problems

    named: dict[str, list[str]] = {kind: [] for kind in IMPORT_WARNINGS}
    for row in rows:
        for kind in row_problems(row).keys() & named.keys():
            named[kind].append(str(row["name"]))
    words = {kind: said.format(dear=f"{DEAR_USD_PER_H:,.0f}") for kind, said in IMPORT_WARNINGS.items()}
    return {kind: printable(f"warning: {len(names):,} type(s) {words[kind]}: {_some(names)}")
            for kind, names in named.items() if names}  # fmt: skip


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f", ... and {len(names) - SHOWN_NAMES:,} more" if len(names) > SHOWN_NAMES else "")


COMMANDS = {"instances": cmd_instances}
