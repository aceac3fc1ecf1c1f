"""The options of a simulation that it would not use (`stash schedule`, simulate_schedule(), the Schedule
page): refused, never dropped, each named as its caller spells it (--delay-s on the command line, delay_s
in Python). A dropped one ran the simulation as if it had not been given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stash_core.errors import UsageError
from stash_core.sched.policy import PREEMPTIVE

# Options that set one policy's behaviour, and the policies that use them (sched/policy.py)
USED_BY = {
    "delay_s": ("delay",), "scale": ("network-delay", "network-preempt"),
    "checkpoint_s": PREEMPTIVE, "min_run_s": PREEMPTIVE, "max_preemptions": PREEMPTIVE,
    "las_limits_gpu_h": ("las",), "starve_factor": ("las",),
}  # fmt: skip


def as_flag(name: str) -> str:
    """delay_s as the command line spells it: --delay-s."""
    return "--" + name.replace("_", "-")


def refuse_unused(
    given: dict[str, Any], policies: list[str], *, tuning: str, synthetic: bool, trace_format: str,
    arrivals: str | None, spelled: Callable[[str], str] = str,
) -> None:  # fmt: skip
    """UsageError for the first option the simulation would not use: one in `given` (the policy options, tune
    fraction, mean gap, uplink factor and node bandwidth by their Python names, None where not given) that
    sets only policies not run (starve_factor with policies fifo,sjf), a trace format with synthetic jobs, a
    tune fraction without split tuning, a mean gap with batch arrivals, an uplink factor with a link model.
    `tuning` as the simulation resolves it."""
    for name, users in USED_BY.items():
        if given.get(name) is not None and not set(users) & set(policies):
            raise UsageError(f"{spelled(name)} sets {' and '.join(users)}, not run here "
                             f"({spelled('policies')} {','.join(policies)})")  # fmt: skip
    if synthetic and trace_format != "auto":
        raise UsageError(f"{spelled('trace_format')} reads a {spelled('trace')} file; "
                         f"{spelled('synthetic_jobs')} makes its own jobs")  # fmt: skip
    if given.get("tune_fraction") is not None and tuning != "split":
        raise UsageError(f"{spelled('tune_fraction')} is the share split tuning tunes on: "
                         f"{spelled('tuning')} {tuning} takes none")  # fmt: skip
    if given.get("mean_gap_s") is not None and arrivals == "batch":
        raise UsageError(f"{spelled('mean_gap_s')} spaces the arrivals; {spelled('arrivals')} batch submits "
                         "every job at 0")  # fmt: skip
    if given.get("uplink_factor") is not None and given.get("node_gbps") is not None:
        raise UsageError(f"{spelled('uplink_factor')} is the stall multiplier without a link model; "
                         f"{spelled('node_gbps')} models the links instead: give one of them")  # fmt: skip
