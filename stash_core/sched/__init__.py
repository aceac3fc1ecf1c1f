"""Placing network-sensitive jobs in a shared GPU cluster: a trace-driven simulator of delay scheduling,
preemption and the classical baselines."""

from stash_core.sched.fabric import Fabric
from stash_core.sched.formats import FORMATS, load_trace, read_trace_frame
from stash_core.sched.metrics import schedule_metrics
from stash_core.sched.policy import POLICIES, Policy
from stash_core.sched.simulator import JobOutcome, simulate
from stash_core.sched.topology import Cluster
from stash_core.sched.trace import TraceJob, jobs_from_frame, synthetic_trace
from stash_core.sched.tuner import TUNING_MODES, plan_policies, tune

__all__ = [
    "FORMATS",
    "POLICIES",
    "TUNING_MODES",
    "Cluster",
    "Fabric",
    "TraceJob",
    "JobOutcome",
    "Policy",
    "jobs_from_frame",
    "load_trace",
    "plan_policies",
    "read_trace_frame",
    "schedule_metrics",
    "simulate",
    "synthetic_trace",
    "tune",
]
