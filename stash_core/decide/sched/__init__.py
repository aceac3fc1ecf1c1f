"""Placing network-sensitive jobs in a shared GPU cluster: a trace-driven simulator of delay scheduling."""

from stash_core.decide.sched.fabric import Fabric
from stash_core.decide.sched.metrics import schedule_metrics, tune
from stash_core.decide.sched.simulator import POLICIES, JobOutcome, Policy, simulate
from stash_core.decide.sched.topology import Cluster
from stash_core.decide.sched.trace import Job, jobs_from_frame, load_trace, synthetic_trace

__all__ = [
    "POLICIES",
    "Cluster",
    "Fabric",
    "Job",
    "JobOutcome",
    "Policy",
    "jobs_from_frame",
    "load_trace",
    "schedule_metrics",
    "simulate",
    "synthetic_trace",
    "tune",
]
