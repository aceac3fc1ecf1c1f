"""What a catalog row stored as given may get wrong later, said when it is written (`stash instances add`,
`set` and `import`, the Recommend page's catalog editor): a spot price above on-demand, a price of $0 or
above any instance's, a GPU
name the accelerator table lacks, several GPUs with no link. The row is kept in each case: each can be
meant, and each changes what recommend and spot rank without a word of their own."""

from __future__ import annotations

import difflib
from typing import Any

from stash_core.catalog.accelerators import accelerator_table, match_accelerator
from stash_core.units import finite_float

PRICES = {"on-demand": "on_demand_usd_per_h", "spot": "spot_usd_per_h"}
# Ten times the dearest instance the shipped catalog lists (8 x H100 at about $98/h on demand): a price above
# is a slip of the decimal point or of the unit (per month, per GPU-year), and would rank the row last.
DEAR_USD_PER_H = 1000.0


def row_warnings(row: dict[str, Any], given: set[str] | None = None) -> list[str]:
    """The warnings of a stored row, each one line without the "warning: " prefix. `given` holds the fields
    just written (None: all of them), so that an edit of one field does not repeat what another field has
    said since it was written (a $0 price, a GPU count without a link)."""
    return list(row_problems(row, given).values())


def row_problems(row: dict[str, Any], given: set[str] | None = None) -> dict[str, str]:
    """row_warnings by kind: "spot_above_on_demand", "free", "dear", "unknown_gpu", "no_gpu_link"."""
    given = set(row) if given is None else given
    name = row.get("name")
    said: dict[str, str] = {}
    spot, on_demand = finite_float(row.get("spot_usd_per_h")), finite_float(row.get("on_demand_usd_per_h"))
    if spot is not None and on_demand is not None and spot > on_demand:  # kept as given: likely a typo
        said["spot_above_on_demand"] = (f"{name}'s spot price ${spot:g}/h is above its on-demand "
                                        f"${on_demand:g}/h; spot capacity sells below on-demand")  # fmt: skip
    free = [kind for kind, column in PRICES.items() if column in given and finite_float(row.get(column)) == 0]
    if free:  # a typo would rank first
        prices = f"{free[0]} price is" if len(free) == 1 else "on-demand and spot prices are"
        said["free"] = (f"{name}'s {prices} $0/h: recommend and spot will take it as free and rank it "
                        "first")  # fmt: skip
    prices = {kind: finite_float(row.get(column)) or 0 for kind, column in PRICES.items() if column in given}
    dear = [(kind, price) for kind, price in prices.items() if price > DEAR_USD_PER_H]
    if dear:
        kind, price = dear[0]
        said["dear"] = (f"{name}'s {kind} price ${price:,.10g}/h is above ${DEAR_USD_PER_H:,.0f}/h, more "
                        "than any cloud instance costs: give it in USD per hour")  # fmt: skip
    gpus = finite_float(row.get("accelerator_count")) or 0
    if "accelerator" in given and gpus > 0 and row.get("accelerator"):
        unknown = unknown_accelerator(row)
        if unknown:
            said["unknown_gpu"] = unknown
    link = str(row.get("interconnect") or "none")
    if gpus > 1 and link.lower() == "none" and {"accelerator_count", "interconnect"} & given:
        said["no_gpu_link"] = (f"{name} has {gpus:g} GPUs and no GPU link between them: predict and "
                               "recommend cannot predict their all-reduce (give --interconnect NVSwitch, "
                               "NVLink, PCIe or 'PCIe peer-to-peer')")  # fmt: skip
    return said


VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro", "amd", "instinct"}


def unknown_accelerator(row: dict[str, Any]) -> str | None:
    """Said of a GPU name the accelerator table lacks (with the names close to it): predictions leave the
    instance out. None for a known name."""
    gpu = str(row["accelerator"])
    if match_accelerator(gpu) is not None:
        return None
    # the names a user types are short (V100, H100): the table's full names are never close to them
    # compared without the vendor's words: "Tesla V10" is close to V100, not far from every "NVIDIA ..." name
    spelled = {_without_vendor(spelling.lower()): (spelling, gpu_row.name)
               for gpu_row in accelerator_table().values()
               for spelling in (gpu_row.name, *gpu_row.aliases, *gpu_row.skypilot_names)}  # fmt: skip
    close = difflib.get_close_matches(_without_vendor(gpu.lower()), sorted(spelled), n=6, cutoff=0.6)
    by_gpu = {spelled[spelling][1]: spelled[spelling][0] for spelling in reversed(close)}  # the closest's
    meant = ", ".join(list(dict.fromkeys(by_gpu[spelled[spelling][1]] for spelling in close))[:3])
    hint = f" (did you mean {meant}?)" if close else ""
    return (f"{gpu!r} is not in Stash's accelerator table{hint}: `stash predict` and `stash recommend` leave "
            f"{row['name']} out")  # fmt: skip


def _without_vendor(name: str) -> str:
    """A lower-case GPU name without NVIDIA's, AMD's and their brands' words (tesla v100 -> v100)."""
    return " ".join(word for word in name.split() if word not in VENDOR_WORDS) or name


def ambiguous_accelerator_note(row: dict[str, Any]) -> str | None:
    """A short GPU name several variants carry resolves to one of them: which, and how to choose."""
    found = match_accelerator(str(row["accelerator"]))
    if found is None or not found.ambiguous:
        return None
    return f"{row['name']}'s {found.note()}; give the full name to choose"


def redated_price_note(before: dict[str, Any], after: dict[str, Any], given: set[str]) -> str | None:
    """A price kept as it was but dated anew, since a row has one date for its prices and the other price
    was just set (None where nothing was redated)."""
    old, new = before.get("price_date"), after.get("price_date")
    if "price_date" in given or old is None or new is None or old == new:
        return None
    kept = [(kind, finite_float(after.get(column))) for kind, column in PRICES.items() if column not in given]
    kept = [(kind, price) for kind, price in kept if price is not None]
    if not kept:
        return None
    kind, price = kept[0]
    return (f"{after.get('name')}'s {kind} price ${price:,.10g}/h, of {old}, is now dated {new} too: a row "
            "has one date for its prices (--price-date gives theirs)")  # fmt: skip
