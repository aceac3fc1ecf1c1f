"""Catalog values: checked and typed from what a user types or an editor hands back, and made plain again.

A bad value is a one-line UsageError naming the field. Numbers are read with units.finite_float; "", "none",
"null" and "-" clear a number or date.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

import pandas as pd

from stash_core.cells import is_missing, plain_row
from stash_core.errors import UsageError
from stash_core.spec_parse import instance_name_problem
from stash_core.store.instances import COLUMNS
from stash_core.terminal import clipped, unsafe_character
from stash_core.units import finite_float

TEXT = ("name", "provider", "accelerator", "interconnect", "source", "region", "origin")
ORIGINS = ("builtin", "import", "user")
INT_MIN = {"accelerator_count": 0, "vcpus": 1}
# Beyond these, a typo or a broken catalog row, not a machine or a price: the bounds `stash instances add` and
# `set` read their options with (cli/instances.py), held also for imports and the dashboard's editor.
MAXIMA = {"accelerator_count": 1024, "vcpus": 100_000, "memory_gib": 1e7, "network_gbps": 1e5,
          "on_demand_usd_per_h": 1e6, "spot_usd_per_h": 1e6}  # fmt: skip
DATE_RANGE = (date(1970, 1, 1), date(2262, 4, 11))  # what the dashboard (pandas) can represent
POSITIVE = ("memory_gib", "network_gbps")
# The least of them a new value may hold: 1e-9 Gbit/s predicted a step of 22 days, and 1e-300 GiB listed as 0.
MINIMA = {"memory_gib": 0.01, "network_gbps": 0.001}
PRICES = ("on_demand_usd_per_h", "spot_usd_per_h")
# A name (instance, GPU, region) is shown in tables and stored: at most as long as spec_parse.MAX_NAME_CHARS
# lets one be typed; a price's source names a file and a region, so it may be longer.
MAX_NAME_CHARS, MAX_SOURCE_CHARS = 200, 1000


# The GPU links inside one instance that predict tells apart (decide/predict/collectives.intra_class reads
# NVSwitch, NVLink and PCIe in the text), and "none" for an instance of one GPU or none.
INTERCONNECTS = ("NVSwitch", "NVLink", "PCIe", "PCIe peer-to-peer", "none")


# The link an interconnect text names by its first word ("NVSwitch (NVLink 4)", "PCIe Gen4"): a text that
# only holds a name somewhere ("no NVSwitch, PCIe only") was read as that link.
_LINK_RE = re.compile(r"^\s*(nvswitch|nvlink|pcie)(?![a-z])", re.IGNORECASE)  # "NVLink3" too


def link_kind(text: str | None) -> str | None:
    """The GPU link an interconnect text names first ("nvswitch", "nvlink" or "pcie"); None for any other."""
    match = _LINK_RE.match(text or "")
    return match.group(1).lower() if match else None


def known_interconnect(text: str | None) -> bool:
    """Whether an interconnect is one predict can read (or none given)."""
    return (text or "none").strip().lower() == "none" or link_kind(text) is not None


def _check_name(name: str) -> None:
    """A name every command can select and tell apart (spec_parse.instance_name_problem)."""
    problem = instance_name_problem(name)
    if problem:
        raise UsageError(f"name {name!r} {problem}")


def clean(fields: dict[str, Any], partial: bool, stored: bool = False) -> dict[str, Any]:
    """Validated, typed values; UsageError (one line) for an unknown field or a bad value.

    partial: only the fields given; otherwise every column, None where not given. stored: the values of a
    stored row, its texts and price date taken as they are (a date given now must not lie in the future; a
    row an older version stored, say with an interconnect it took, still reads).
    """
    unknown = [key for key in fields if key not in COLUMNS]
    if unknown:
        raise UsageError(f"unknown instance field {', '.join(unknown)}; fields are {', '.join(COLUMNS)}")
    cleaned: dict[str, Any] = {} if partial else {column: None for column in COLUMNS}
    for key, value in fields.items():
        if key in TEXT:
            cleaned[key] = None if is_missing(value) else (str(value).strip() or None)
            if stored:
                continue
            limit = MAX_SOURCE_CHARS if key == "source" else MAX_NAME_CHARS
            if len(cleaned[key] or "") > limit:
                raise UsageError(f"{key}: a text of {len(cleaned[key]):,} characters, at most {limit}")
            character = unsafe_character(cleaned[key] or "")
            if character:
                raise UsageError(f"{key} holds the control character {character}")
            if key == "name":
                _check_name(cleaned[key] or "")
            if key == "origin" and cleaned[key] not in (None, *ORIGINS):
                raise UsageError(f"origin must be one of {', '.join(ORIGINS)}, got {value!r}")
            if key == "interconnect" and not known_interconnect(cleaned[key]):
                raise UsageError(
                    f"interconnect {clipped(cleaned[key], quoted=True)} is no GPU link predict knows; give "
                    f"{', '.join(INTERCONNECTS[:-1])} or {INTERCONNECTS[-1]}"
                )
            continue
        value = None if _blank(value) else value
        if key in INT_MIN:
            cleaned[key] = _whole(key, value, INT_MIN[key])
        elif key in POSITIVE:
            cleaned[key] = _number(key, value, strictly_positive=True)
            if not stored and cleaned[key] is not None and cleaned[key] < MINIMA[key]:
                raise UsageError(f"{key} must be at least {MINIMA[key]:g}, got {value!r}")
        elif key in PRICES:
            cleaned[key] = _number(key, value, strictly_positive=False)
        elif key == "price_date":
            cleaned[key] = _date(value)
            if not stored and cleaned[key] is not None and cleaned[key] > today() + PRICE_DATE_LEEWAY:
                # a typo in the year would keep the price from ever being called old
                raise UsageError(f"price date {cleaned[key]} is in the future: give the day of the price")
    return cleaned


def check_accelerators(row: dict[str, Any]) -> None:
    """A row that names an accelerator has at least one: with 0, predict would take it for a CPU machine."""
    accelerator = str(row.get("accelerator") or "").strip()
    named = bool(accelerator) and accelerator.lower() != "none"
    if named and not row.get("accelerator_count"):  # none given either: it was kept as a CPU machine
        count = "no accelerator_count" if row.get("accelerator_count") is None else "accelerator_count 0"
        raise UsageError(f"instance {row.get('name')}: {count} beside the accelerator {accelerator}: give "
                         "its GPU count (--accelerator-count N), or accelerator none for a CPU machine")
    if not named and (row.get("accelerator_count") or 0) > 0:  # predict read "no accelerator" as a GPU name
        raise UsageError(f"instance {row.get('name')}: accelerator_count {row['accelerator_count']} and no "
                         "accelerator named: give the GPU (--accelerator NAME), or a count of 0")


def typed_row(row: dict[str, Any]) -> dict[str, Any]:
    """A catalog row of plain values (cells.plain: None for missing values), whole numbers as int and dates
    as datetime.date."""
    out = plain_row(row)
    for key, value in out.items():
        if key in INT_MIN and isinstance(value, int | float) and float(value).is_integer():
            out[key] = int(value)  # 8.0 from an editor is 8; 1.5 stays, for clean() to refuse
        elif key == "price_date" and isinstance(value, pd.Timestamp):
            out[key] = value.date()
    return out


def db_value(value: Any) -> Any:
    return None if is_missing(value) else value


# How far ahead of the user's day a price date may be: another time zone is on the next day already.
PRICE_DATE_LEEWAY = timedelta(days=1)


def today() -> date:
    """The user's day, as their calendar has it: a price "of today" entered at 23:52 in Honolulu is of that
    day, not of the UTC day after it."""
    return date.today()


def _blank(value: Any) -> bool:
    """No value: None, NaN, or (for numbers and dates typed on a command line) "", "none", "null", "-"."""
    return is_missing(value) or (
        isinstance(value, str) and value.strip().lower() in ("", "none", "null", "-")
    )


def _checked_float(key: str, value: Any, what: str) -> float | None:
    """finite_float of `value`; UsageError "KEY must be WHAT" when it is no number at all. None for a number
    that is not finite (or a bool): the caller says what it must be instead."""
    number = finite_float(value)
    if number is None:
        try:
            float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{key} must be {what}, got {value!r}") from None
    return number


def _whole(key: str, value: Any, minimum: int) -> int | None:
    if value is None:
        return None
    number = _checked_float(key, value, "a whole number")
    if number is None or not number.is_integer() or number < minimum:
        raise UsageError(f"{key} must be a whole number >= {minimum}, got {value!r}")
    if number > MAXIMA[key]:
        raise UsageError(f"{key} must be at most {MAXIMA[key]:,}, got {value!r}")
    return int(number)


def _number(key: str, value: Any, strictly_positive: bool) -> float | None:
    if value is None:
        return None
    number = _checked_float(key, value, "a number")
    if number is None:
        raise UsageError(f"{key} must be a finite number, got {value!r}")
    if strictly_positive and number <= 0:
        raise UsageError(f"{key} must be positive, got {value!r}")
    if number < 0:
        raise UsageError(f"{key} must not be negative, got {value!r}")
    if number > MAXIMA[key]:
        raise UsageError(f"{key} must be at most {MAXIMA[key]:g}, got {value!r}")
    return number


def _date(value: Any) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, pd.Timestamp):
        return value.date()
    try:
        day = date.fromisoformat(str(value).strip())
    except ValueError:
        raise UsageError(f"price_date must be a date like 2025-01-31, got {value!r}") from None
    if not DATE_RANGE[0] <= day < DATE_RANGE[1]:
        raise UsageError(f"price_date must be from 1970 to 2262, got {value!r}")
    return day
