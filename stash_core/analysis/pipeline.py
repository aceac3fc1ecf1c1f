"""The input-pipeline stall of a script profiled without --data-dir: CPU and disk as one difference.

Without --data-dir Stash cannot set the page-cache state of the script's files, so R3 is not run and R2
minus the last synthetic run before it is the whole input pipeline (loading, decoding, collation).
"""

from __future__ import annotations

from stash_core.analysis.stats import run_difference
from stash_core.units import finite_float, format_time

SYNTHETIC_REFERENCES = ("R1n", "R1", "R0")  # the run R2 is compared with: the last synthetic one measured
PIPELINE_WARNING = "input pipeline (CPU and disk together): "  # how a profile's warning of it begins


def input_pipeline(times: dict[str, tuple[float, float | None]]) -> tuple[float, float, str] | None:
    """R2 minus the last synthetic run, with its 95% interval and that run's name; None without both.

    times: completed run name -> (mean_s, ci95_s).
    """
    reference = next((name for name in SYNTHETIC_REFERENCES if name in times), None)
    if "R2" not in times or reference is None:
        return None
    seconds, ci95_s = run_difference(times["R2"], times[reference])
    return seconds, ci95_s, reference


STEP_PARTS = ("forward_s", "backward_s", "optimizer_s")  # the step's own parts, beside the wait for data


def outside_the_data_wait(
    phases: list[dict], reference: str, seconds: float, ci95_s: float, loader_workers: int | None
) -> str | None:
    """Where a resolved input-pipeline difference (R2 - `reference`) is not in the wait for data: the loop's
    data wait (phases' parts_mean_s.data_s) grew by less than half of it, and the step's own parts grew
    instead. Loading is then not what the difference measured: other load slowed R2, or (with loader
    processes) they took the cores from the training. The sentence that says so, or None."""
    parts = {phase.get("name"): phase.get("parts_mean_s") or {} for phase in phases}
    later, earlier = parts.get("R2") or {}, parts.get(reference) or {}
    grown = {key: _grown(later, earlier, key) for key in ("data_s", *STEP_PARTS)}
    wait_s = grown.pop("data_s")
    if wait_s is None or not seconds > ci95_s or wait_s >= seconds / 2:
        return None
    step = ", ".join(f"{key.removesuffix('_s')} {value * 1e3:+.2f} ms" for key, value in grown.items()
                     if value is not None)  # fmt: skip
    if loader_workers == 0:
        cause = "other load on the machine slowed it (a loader without processes loads within the wait)"
    else:  # loader processes, or runs that disagree on how many (None)
        processes = f"its {loader_workers}" if loader_workers else "its"
        cause = (f"{processes} loader process(es) took cores from the training, or other load on the machine "
                 "slowed it")  # fmt: skip
    wait = f"grew by {format_time(wait_s)}" if wait_s >= 0 else f"shrank by {format_time(-wait_s)}"
    return (f"of the input pipeline's {format_time(seconds)}, the wait for data {wait} (R2 - {reference}); "
            f"the rest is in the step itself ({step or 'its parts not timed'}): {cause}")  # fmt: skip


def _grown(later: dict, earlier: dict, key: str) -> float | None:
    after, before = finite_float(later.get(key)), finite_float(earlier.get(key))
    return None if after is None or before is None else after - before
