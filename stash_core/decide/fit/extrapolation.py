"""Whether a stall prediction reaches beyond what was profiled: the held-out errors it states were measured
on models and bandwidths inside the profiled range, and say nothing of one far outside it."""

from __future__ import annotations

from collections.abc import Callable

from stash_core.units import size_words

# How far past the profiled values a prediction is said to extrapolate: the stated error was measured inside.
EXTRAPOLATION_FACTOR = 2.0


def extrapolation_note(value: float, profiled: list, what: str, shown: Callable[[float], str]) -> str | None:
    """A warning when `value` lies more than EXTRAPOLATION_FACTOR beyond the `profiled` values, else None."""
    profiled = [float(v) for v in profiled if v is not None and float(v) > 0]
    if not profiled or not value > 0:
        return None
    low, high = min(profiled), max(profiled)
    if low / EXTRAPOLATION_FACTOR <= value <= high * EXTRAPOLATION_FACTOR:
        return None
    return (
        f"extrapolated: {what} {shown(value)} is far outside the profiled {shown(low)} to {shown(high)}; "
        "the expected error was measured inside that range"
    )


def gradient_bytes_note(grad_bytes: float, models: list) -> str | None:
    """extrapolation_note of a model's gradient bytes against the points `models` (StallModels) were fitted
    on."""
    profiled = [
        value
        for model in models
        if "grad_bytes" in model.residuals.columns
        for value in model.residuals["grad_bytes"]
    ]
    # in the binary units the Models page gives a model's gradients in ("170 MiB of gradients")
    return extrapolation_note(float(grad_bytes), profiled, "gradient bytes", size_words)


def joined_notes(*notes: str | None) -> str | None:
    """The notes that are given, as one ("; "), or None."""
    return "; ".join(note for note in notes if note) or None

