"""Numbers in the decision commands' tables: '-' for a missing (or NaN, or infinite) figure."""

from __future__ import annotations

from typing import Any

from stash_core.units import finite_float


def fixed(value: Any, spec: str) -> str:
    """`value` formatted with `spec` (e.g. '.3f', ',.2f'), or '-'."""
    number = finite_float(value)
    return "-" if number is None else format(number, spec)


def percent(value: Any) -> str:
    """A fraction as a percentage with one decimal ('12.3%'), or '-'."""
    number = finite_float(value)
    return "-" if number is None else f"{number:.1%}"
