"""Placing network-sensitive jobs in a shared GPU cluster: a trace-driven simulator of delay scheduling,
preemption and the classical baselines.

Names are loaded when first used (PEP 562), so that the command's parser can read defaults.py and
policy.py without loading pandas."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "FORMATS": "formats", "load_trace": "formats", "load_trace_counted": "formats",
    "read_trace_frame": "formats",
    "POLICIES": "policy", "Policy": "policy",
    "TUNING_MODES": "tuner", "plan_policies": "tuner", "tune": "tuner",
    "Fabric": "fabric", "schedule_metrics": "metrics", "JobOutcome": "outcome", "simulate": "simulator",
    "Cluster": "topology", "TraceJob": "trace", "jobs_from_frame": "trace", "synthetic_trace": "trace",
}  # fmt: skip

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"stash_core.sched.{_WHERE[name]}"), name)
