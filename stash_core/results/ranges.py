"""Figures no run can have, refused when a result file is read (results/file.validate_result): a negative
time in the breakdown or a phase, a phase of no workers, a fraction beyond 0..1, a sample shape or image
size below one, and a run id that is a path rather than a name. NaN and null stay "unknown" and pass."""

from __future__ import annotations

from typing import Any

from stash_core.errors import UsageError


def check_ranges(doc: dict[str, Any]) -> None:
    """UsageError (one line, "result file: ...") for the first figure out of its range."""
    run_id = doc["run_id"]
    if "/" in run_id or "\\" in run_id or run_id.strip(".") == "":
        raise UsageError(f"result file: run_id {run_id[:80]!r} is a path, not a name (no '/', '\\\\', '..')")
    breakdown = doc.get("breakdown") or {}
    for key in ("iteration_s", "iteration_ci95_s", "epoch_s"):
        _at_least(f"breakdown.{key}", breakdown.get(key), 0)
    spec = doc["spec"]
    for key in ("threads_per_worker", "image_px"):
        _at_least(f"spec.{key}", spec.get(key), 1)
    limit = spec.get("max_phase_s")
    if _number(limit) and limit <= 0:
        raise UsageError(f"result file: spec.max_phase_s is {limit!r}; expected a positive number of seconds")
    shape = spec.get("input_shape")
    for value in shape if isinstance(shape, list) else ():
        _at_least("spec.input_shape", value, 1)
    for phase in doc["phases"]:
        name = phase["name"]
        _at_least(f"phase {name} wall_s", phase.get("wall_s"), 0)
        for key in ("workers", "workers_per_node", "nodes"):
            _at_least(f"phase {name} {key}", phase.get(key), 1)
        fraction = phase.get("resident_fraction_start")
        if _number(fraction) and not 0 <= fraction <= 1:
            raise UsageError(
                f"result file: phase {name} resident_fraction_start is {fraction!r}; expected 0 to 1"
            )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at_least(what: str, value: Any, least: float) -> None:
    if _number(value) and value < least:  # NaN compares false: unknown, not refused
        raise UsageError(f"result file: {what} is {value!r}; expected at least {least:g}")
