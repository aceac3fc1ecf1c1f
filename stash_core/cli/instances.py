"""`stash instances list|show|seed|add|set`: the instance catalog (shapes, prices with date and source)."""

from __future__ import annotations

import argparse
from typing import Any

from stash_core.cli.args import add_db_argument, db_path
from stash_core.decide.catalog import (
    COLUMNS,
    add_instance,
    get_instance,
    list_instances,
    seed_catalog,
    set_instance,
)
from stash_core.errors import UsageError

INSTANCE_OPTIONS = {
    "provider": (str, "cloud provider, e.g. aws"),
    "accelerator": (str, "accelerator model, e.g. 'NVIDIA V100 16 GB'"),
    "accelerator_count": (str, "accelerators per instance (0 for a CPU machine)"),
    "vcpus": (str, "virtual CPUs"),
    "memory_gib": (str, "memory in GiB"),
    "network_gbps": (str, "network bandwidth in Gbit/s"),
    "interconnect": (str, "GPU interconnect, e.g. NVLink, PCIe, none"),
    "on_demand_usd_per_h": (str, "on-demand price, USD per hour ('none' clears it)"),
    "spot_usd_per_h": (str, "spot price, USD per hour ('none' clears it)"),
    "price_date": (str, "date of the prices, YYYY-MM-DD (default: today when a price changes)"),
    "source": (str, "where the prices come from (default: 'user edit')"),
}
_LIST_COLUMNS = {
    "name": "name",
    "accelerator_count": "gpus",
    "accelerator": "accelerator",
    "vcpus": "vcpus",
    "memory_gib": "mem_gib",
    "network_gbps": "network_gbps",
    "interconnect": "interconnect",
    "on_demand_usd_per_h": "on_demand",
    "spot_usd_per_h": "spot",
    "price_date": "price_date",
    "stored": "stored",
}


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `instances` and its actions to `stash`'s subparsers."""
    parser_class = parser_class or argparse.ArgumentParser
    instances = subparsers.add_parser("instances", help="the instance catalog: list, show, add, set")
    actions = instances.add_subparsers(dest="instances_action", required=True, parser_class=parser_class)
    listing = actions.add_parser("list", help="list the catalog (stored and built-in rows)")
    add_db_argument(listing)
    show = actions.add_parser("show", help="show one instance")
    show.add_argument("name")
    add_db_argument(show)
    seed = actions.add_parser("seed", help="store the built-in rows not stored yet (never overwrites)")
    add_db_argument(seed)
    for action in ("add", "set"):
        sub = actions.add_parser(action, help="add an instance" if action == "add" else "change an instance")
        sub.add_argument("name")
        for field_name, (kind, help_text) in INSTANCE_OPTIONS.items():
            sub.add_argument(f"--{field_name.replace('_', '-')}", dest=field_name, type=kind, help=help_text)
        add_db_argument(sub)


def cmd_instances(args: argparse.Namespace) -> int:
    path = db_path(args)
    action = args.instances_action
    if action == "list":
        frame = list_instances(path)
        print(frame[list(_LIST_COLUMNS)].rename(columns=_LIST_COLUMNS).to_string(index=False, na_rep="-"))
        print("prices in USD per hour; `stash instances show NAME` gives the source of each price")
        return 0
    if action == "seed":
        print(f"stored {seed_catalog(path)} built-in instance(s) in {path}")
        return 0
    if action == "show":
        row = get_instance(path, args.name)
        if row is None:
            raise UsageError(f"unknown instance {args.name!r}: see `stash instances list`")
        for column in COLUMNS:
            print(f"{column:<22}{'-' if row.get(column) is None else row[column]}")
        return 0
    fields = {name: getattr(args, name) for name in INSTANCE_OPTIONS if getattr(args, name) is not None}
    if action == "add":
        row = add_instance(path, name=args.name, **fields)
        print(f"added {row['name']} to the catalog in {path}")
    else:
        row = set_instance(path, args.name, **fields)
        print(f"updated {row['name']}: " + ", ".join(f"{key}={row[key]}" for key in fields))
    return 0


COMMANDS = {"instances": cmd_instances}
