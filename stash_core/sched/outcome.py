"""What happened to one job in a simulation (simulator.py), read by metrics.py and report.py."""

from __future__ import annotations

from dataclasses import dataclass

from stash_core.sched.trace import TraceJob


@dataclass
class JobOutcome:
    job: TraceJob
    start_s: float  # first start
    finish_s: float
    level: str  # the loosest placement it ran in
    nodes: int  # nodes of its last placement
    preemptions: int = 0
    held_s: float | None = None  # seconds it held GPUs (all its runs); None: finish - start
    checkpoint_s: float = 0.0  # of those, seconds spent saving and restoring after preemptions

    @property
    def run_s(self) -> float:
        return self.held_s if self.held_s is not None else self.finish_s - self.start_s

    @property
    def queued_s(self) -> float:
        """Seconds it waited for GPUs: before its first start and after each preemption."""
        return max(0.0, self.finish_s - self.job.submit_s - self.run_s)
