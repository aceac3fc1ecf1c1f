"""The Compare page's derived figures as text with their uncertainty: a throughput and a cost carry the
iteration time's relative 95% half-width (views.compare_spread)."""

from pages._shared import number_text, usd_text
from stash_core.views.compare_spread import NARROW_SPREAD, throughput_interval, with_interval


def cost_text(usd: float, spread: float | None) -> str:
    """A cost with its ± (a cost grows with the iteration time: its relative interval is the iteration's)."""
    return with_interval(usd_text(usd), usd_text(usd * spread) if spread is not None else None)


def samples_text(samples_per_s: float, spread: float | None) -> str:
    """'216.2 ± 21.1' for a narrow interval; its bounds for a wide one, whose ± would read below zero
    ('87.4 ± 154.0'), and '87.4 (31.7 or more)' where the iteration's interval reaches 0."""
    bounds = throughput_interval(samples_per_s, spread)
    figure = number_text(samples_per_s)
    if bounds is None or spread is None or spread < NARROW_SPREAD:
        return with_interval(figure, number_text(samples_per_s * spread) if spread else None)
    low, high = (number_text(bound) for bound in bounds)
    return f"{figure} ({low} or more)" if bounds[1] == float("inf") else f"{figure} ({low} to {high})"
