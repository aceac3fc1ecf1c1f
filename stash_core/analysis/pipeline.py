"""The input-pipeline stall of a script profiled without --data-dir: CPU and disk as one difference.

Without --data-dir Stash cannot set the page-cache state of the script's files, so R3 is not run and R2
minus the last synthetic run before it is the whole input pipeline (loading, decoding, collation).
"""

from __future__ import annotations

from stash_core.analysis.stats import run_difference

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
