"""The hourly price of one catalog instance, on-demand or spot.

A price that the catalog does not have is reported as a status line ("no spot price for instance
p3.8xlarge"), never replaced by a guess; cost = time x hourly price x number of instances is computed by
its users (decide/recommend/costs.py, spot/inputs.py).
"""

from __future__ import annotations

from typing import Any

from stash_core.errors import UsageError
from stash_core.units import finite_float

PRICINGS = ("on_demand", "spot")
_PRICE_COLUMN = {"on_demand": "on_demand_usd_per_h", "spot": "spot_usd_per_h"}


def hourly_price(
    instance: dict[str, Any] | None, name: str | None, pricing: str = "on_demand"
) -> tuple[float | None, str]:
    """(USD per hour of one instance, "ok") or (None, why there is no price)."""
    if pricing not in PRICINGS:
        raise UsageError(f"pricing must be one of {', '.join(PRICINGS)}, got {pricing!r}")
    label = name or "(none)"
    if not name:
        return None, "no price: the run has no instance label"
    if instance is None:
        return (
            None,
            f"no price for instance {label}: it is not in the catalog (add it with `stash instances add`)",
        )
    price = finite_float(instance.get(_PRICE_COLUMN[pricing]))
    if price is None:
        kind = "spot price" if pricing == "spot" else "on-demand price"
        return None, f"no {kind} for instance {label} (set one with `stash instances set`)"
    return price, "ok"
