"""The Python API: what the command line, the dashboard and a notebook call.

    import stash_core as stash
    result = stash.profile(model="resnet10", batch_size=8, input_shape=(3, 32, 32), workers=2,
                           max_phase_seconds=4, launches=1, db="x.duckdb")
    result.to_frame()                         # one row per stall
    stash.runs("x.duckdb")                    # every stored run
    stash.predict(model="resnet50", batch_size=64).to_frame()   # one row per instance

Every answer is a dataclass with `.to_frame()` and `.to_dict()` (api/results.py); a bad input raises
stash_core.errors.UsageError with the line the command prints. docs/api.md has a worked example. Each name
is loaded on first use: the profile flow loads torch, the decisions pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "profile": "stash_core.api.profiling",
    "profile_script": "stash_core.api.profiling",
    "predict": "stash_core.api.predicting",
    "recommend": "stash_core.api.decisions",
    "plan_spot": "stash_core.api.decisions",
    "simulate_schedule": "stash_core.api.scheduling",
    "runs": "stash_core.api.reads",
    "breakdown": "stash_core.api.reads",
    "load_result": "stash_core.api.reads",
    "Result": "stash_core.api.results",
    "Predictions": "stash_core.api.results",
    "Recommendation": "stash_core.api.results",
    "SpotPlan": "stash_core.api.results",
    "Schedule": "stash_core.api.results",
    "ProfileSpec": "stash_core.spec",  # what profile(spec=...) starts from
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'stash_core.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})  # a name once used is in globals() too: listed once


__all__ = sorted(_WHERE)
